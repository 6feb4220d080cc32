package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.RequestSpec;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** {@code phasemeter load run --api …}: what each choice sends, and what is refused, and how. */
class ApiOptionTest {
  private static final List<String> BASE =
      List.of(
          "run", "--url", "http://127.0.0.1:1", "--model", "m", "--rate", "1", "--duration", "1s");

  private static LoadOptions options(String... extra) {
    List<String> args = new ArrayList<>(BASE);
    args.addAll(List.of(extra));
    CommandLine cl =
        LoadMain.commandLine(
            new PrintWriter(new StringWriter(), true), new PrintWriter(new StringWriter(), true));
    CommandLine.ParseResult parsed = cl.parseArgs(args.toArray(String[]::new));
    LoadMain.Run run = parsed.subcommand().commandSpec().commandLine().getCommand();
    return run.options();
  }

  /** Runs the command line; returns the exit code and what it wrote to standard error. */
  private static String[] execute(String... extra) {
    List<String> args = new ArrayList<>(BASE);
    args.addAll(List.of(extra));
    StringWriter err = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(new StringWriter(), true), new PrintWriter(err, true))
            .execute(args.toArray(String[]::new));
    return new String[] {String.valueOf(code), err.toString()};
  }

  @Test
  void withoutApiTheRunIsWhatItWasStreamedExactCompletions() {
    LoadOptions o = options();
    assertThat(o.api()).isEqualTo(Api.COMPLETIONS);
    assertThat(o.stream()).isTrue();
    assertThat(o.chat()).isFalse();
    RequestSpec spec = o.workload().request(0);
    assertThat(spec.path()).isEqualTo("/v1/completions");
    assertThat(spec.exactLengths()).isTrue();
    assertThat(o.workloadText()).isEqualTo("doc-qa (4096 in / 300 out), streamed");
    assertThat(options("--no-stream").stream()).isFalse();
  }

  @Test
  void chatIsAnAliasOfApiChat() {
    // One salt for both, so that their prompts can be the same (each run draws its own).
    LoadOptions alias = options("--chat", "--output-tokens", "16", "--prompt-salt", "a1");
    LoadOptions named = options("--api", "chat", "--output-tokens", "16", "--prompt-salt", "a1");
    assertThat(alias.api()).isEqualTo(Api.CHAT).isEqualTo(named.api());
    assertThat(alias.chat()).isTrue();
    assertThat(alias.workload().request(3).body()).isEqualTo(named.workload().request(3).body());
    assertThat(alias.workloadText()).isEqualTo("chat, free text, streamed");
    assertThat(options("--chat", "--api", "chat").api()).isEqualTo(Api.CHAT);
    assertThatThrownBy(() -> options("--chat", "--api", "completions"))
        .hasMessage("--chat is --api chat; it cannot go with --api completions");
  }

  @Test
  void responsesAreFreeTextStreamedUnlessAskedOtherwise() {
    LoadOptions o = options("--api", "responses", "--output-tokens", "20");
    assertThat(o.stream()).isTrue();
    RequestSpec spec = o.workload().request(0);
    assertThat(spec.api()).isEqualTo(Api.RESPONSES);
    assertThat(spec.maxTokens()).isEqualTo(20);
    assertThat(spec.exactLengths()).isFalse();
    assertThat(o.workloadText()).isEqualTo("responses, free text, streamed");
    assertThat(options("--api", "responses", "--no-stream").workload().request(0).stream())
        .isFalse();
    assertThat(options("--api", "responses").workload().request(0).maxTokens()).isEqualTo(128);
    for (String[] exact :
        List.of(
            new String[] {"--profile", "doc-qa"},
            new String[] {"--mix", "1k:1=1"},
            new String[] {"--input-tokens", "10", "--output-tokens", "2"})) {
      List<String> args = new ArrayList<>(List.of("--api", "responses"));
      args.addAll(List.of(exact));
      assertThatThrownBy(() -> options(args.toArray(String[]::new)))
          .hasMessageStartingWith("--api responses sends free text, so input lengths cannot be");
    }
  }

  @Test
  void embeddingsAreNeverStreamedAndTakeTheInputLengthOnly() {
    LoadOptions o = options("--api", "embeddings");
    assertThat(o.stream()).isFalse();
    RequestSpec spec = o.workload().request(0);
    assertThat(spec.api()).isEqualTo(Api.EMBEDDINGS);
    assertThat(spec.promptTokens()).isEqualTo(4096);
    assertThat(spec.stream()).isFalse();
    assertThat(o.workloadText()).isEqualTo("embeddings, doc-qa, 4096 tokens in, whole responses");
    LoadOptions custom = options("--api", "embeddings", "--input-tokens", "300");
    assertThat(custom.workload().request(0).promptTokens()).isEqualTo(300);
    assertThat(custom.workloadText()).isEqualTo("embeddings, 300 tokens in, whole responses");
    assertThat(options("--api", "embeddings", "--profile", "single-1k").workload().request(0))
        .extracting(RequestSpec::promptTokens)
        .isEqualTo(1024);
    assertThat(options("--api", "embeddings", "--mix", "1k:9=1").workloadText())
        .isEqualTo("embeddings, input of mix 1k:9=1, whole responses");
    assertThat(options("--api", "embeddings", "--no-stream").stream()).isFalse();
  }

  @Test
  void streamedEmbeddingsAreRefusedInOneLineWithExit2() {
    String[] r = execute("--api", "embeddings", "--stream");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1])
        .isEqualTo(
            "phasemeter load: --stream cannot go with --api embeddings: embeddings are never"
                + " streamed"
                + System.lineSeparator());
  }

  @Test
  void badCombinationsAreRefusedWithExit2() {
    String[] unknown = execute("--api", "completion");
    assertThat(unknown[0]).isEqualTo("2");
    assertThat(unknown[1])
        .startsWith(
            "phasemeter load: --api must be one of chat, completions, responses, embeddings, got"
                + " 'completion'");
    String[] output = execute("--api", "embeddings", "--output-tokens", "4");
    assertThat(output[0]).isEqualTo("2");
    assertThat(output[1]).contains("--output-tokens cannot go with --api embeddings");
    assertThat(execute("--chat", "--api", "responses")[0]).isEqualTo("2");
  }
}
