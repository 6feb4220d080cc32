package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every command's {@code --help} renders: picocli treats descriptions as format strings, and a bare
 * {@code %} makes it print a warning and the raw text instead of the help a user asked for.
 */
class HelpTextTest {

  @ParameterizedTest
  @ValueSource(strings = {"", "run", "search", "demo", "campaign", "compare", "merge"})
  void helpRendersWithoutAWarning(String command) {
    StringWriter out = new StringWriter();
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();
    PrintStream original = System.err;
    System.setErr(new PrintStream(stderr, true, StandardCharsets.UTF_8));
    int code;
    try {
      String[] args =
          command.isEmpty() ? new String[] {"--help"} : new String[] {command, "--help"};
      code =
          LoadMain.commandLine(
                  new PrintWriter(out, true), new PrintWriter(new StringWriter(), true))
              .execute(args);
    } finally {
      System.setErr(original);
    }

    assertThat(code).isZero();
    assertThat(out.toString()).startsWith("Usage: phasemeter load");
    assertThat(stderr.toString(StandardCharsets.UTF_8)).doesNotContain("picocli WARN");
  }
}
