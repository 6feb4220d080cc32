package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.workload.Profile;
import io.phasemeter.load.workload.PromptSalt;
import io.phasemeter.load.workload.Workload;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --prompt-salt}: a fresh salt per run by default (a search's probes each draw one), a given
 * one kept, {@code none} the seed's prompts alone; a bad value and a salt with {@code --dataset}
 * are refused (one line, exit 2, before any request: nothing listens on the URL).
 */
class PromptSaltOptionsTest {
  private static final String[] BASE = {
    "--url", "http://127.0.0.1:1", "--model", "m", "--rate", "1", "--duration", "1s"
  };

  @TempDir Path dir;

  private static LoadOptions options(String... extra) {
    List<String> args = new ArrayList<>(List.of(BASE));
    args.addAll(List.of(extra));
    return TestLoadOptions.parse(args.toArray(String[]::new));
  }

  /** Runs {@code load run}; returns the exit code and what it wrote to standard error. */
  private static String[] execute(String... extra) {
    List<String> args = new ArrayList<>(List.of("run", "--warmup", "0"));
    args.addAll(List.of(BASE));
    args.addAll(List.of(extra));
    StringWriter err = new StringWriter();
    StringWriter out = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
            .execute(args.toArray(String[]::new));
    return new String[] {String.valueOf(code), err.toString(), out.toString()};
  }

  @Test
  void eachRunDrawsItsOwnSaltUnlessOneIsGiven() {
    LoadOptions a = options();
    LoadOptions b = options();
    assertThat(a.promptSalt().drawn()).isTrue();
    assertThat(a.promptSalt().none()).isFalse();
    assertThat(b.promptSalt()).isNotEqualTo(a.promptSalt());
    assertThat(a.workload().request(1).body()).isNotEqualTo(b.workload().request(1).body());
    // A search's probe: a drawn salt is drawn again, a given one kept.
    LoadOptions probe = a.withLoad(2, 0, Duration.ofSeconds(1), 0, Duration.ZERO, false, null, 2);
    assertThat(probe.promptSalt().drawn()).isTrue();
    assertThat(probe.promptSalt()).isNotEqualTo(a.promptSalt());
    LoadOptions given = options("--prompt-salt", "0xBEEF");
    assertThat(given.promptSalt()).isEqualTo(PromptSalt.of(0xbeef));
    assertThat(
            given
                .withLoad(2, 0, Duration.ofSeconds(1), 0, Duration.ZERO, false, null, 2)
                .promptSalt())
        .isEqualTo(given.promptSalt());
    // The same seed and salt, the same prompts.
    assertThat(options("--prompt-salt", given.promptSalt().hex()).workload().request(5).body())
        .isEqualTo(given.workload().request(5).body());
    // The sessions' conversations take the run's salt.
    LoadOptions sessions =
        TestLoadOptions.parse(
            "--url",
            "http://127.0.0.1:1",
            "--model",
            "m",
            "--sessions",
            "2",
            "--prompt-salt",
            "beef");
    assertThat(sessions.conversations().salt()).isEqualTo(given.promptSalt());
  }

  @Test
  void noneSendsTheSeedsPromptsAlone() {
    for (String none : new String[] {"none", "0"}) {
      LoadOptions o = options("--prompt-salt", none, "--seed", "9");
      assertThat(o.promptSalt()).isEqualTo(PromptSalt.NONE);
      assertThat(o.workload().request(3).body())
          .isEqualTo(Workload.completions("m", Profile.DOC_QA, true, 9).request(3).body());
    }
  }

  @Test
  void aBadSaltOrOneWithADatasetIsRefusedBeforeAnyRequest() throws Exception {
    String[] r = execute("--prompt-salt", "pepper");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1].strip())
        .isEqualTo(
            "phasemeter load: --prompt-salt must be up to 16 hex digits (as the conditions'"
                + " prompt_salt records it), or none (0) for no salt, got 'pepper'");
    Path file =
        Files.writeString(dir.resolve("d.jsonl"), "{\"prompt\": \"hi\", \"output_tokens\": 4}\n");
    r = execute("--dataset", "jsonl:" + file, "--prompt-salt", "ab");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1].strip())
        .isEqualTo(
            "phasemeter load: --prompt-salt cannot go with --dataset: the file's prompts are sent"
                + " as they are (their text is yours; nothing is salted)");
    // A dataset's run records none, and none may be said.
    assertThat(options("--dataset", "jsonl:" + file).promptSalt()).isEqualTo(PromptSalt.NONE);
    assertThat(options("--dataset", "jsonl:" + file, "--prompt-salt", "none").promptSalt())
        .isEqualTo(PromptSalt.NONE);
  }
}
