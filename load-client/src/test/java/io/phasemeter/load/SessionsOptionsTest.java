package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.workload.SessionSpec;
import io.phasemeter.load.workload.Workload;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code --sessions} and its companions: what they make of a run, and what is refused (one line,
 * exit 2, before any request: nothing listens on the URL, so a request sent would fail instead).
 */
class SessionsOptionsTest {
  private static final List<String> BASE =
      List.of("run", "--url", "http://127.0.0.1:1", "--model", "m", "--warmup", "0");

  /** Runs the command line; returns the exit code and what it wrote to standard error. */
  private static String[] execute(String... extra) {
    List<String> args = new ArrayList<>(BASE);
    args.addAll(List.of(extra));
    return executeArgs(args);
  }

  private static String[] executeArgs(List<String> args) {
    StringWriter err = new StringWriter();
    StringWriter out = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
            .execute(args.toArray(String[]::new));
    return new String[] {String.valueOf(code), err.toString(), out.toString()};
  }

  @Test
  void sessionsAreALoadShapeWithTheirOwnWordsAndNoDurationNeeded() {
    LoadOptions o =
        TestLoadOptions.parse(
            "--url",
            "http://127.0.0.1:1",
            "--model",
            "m",
            "--sessions",
            "4",
            "--think-time",
            "500ms",
            "--input-tokens",
            "64",
            "--output-tokens",
            "8");
    assertThat(o.sessions().count()).isEqualTo(4);
    assertThat(o.sessions().turns()).isEqualTo(3);
    assertThat(o.sessions().thinkTime()).isEqualTo(Duration.ofMillis(500));
    assertThat(o.sessions().maxTokens()).isEqualTo(32_768);
    assertThat(o.duration()).isNull();
    assertThat(o.arrivalDescription()).isEqualTo("sessions: 4 × 3 turns, think 0.5 s");
    assertThat(o.conversations().spec()).isEqualTo(o.sessions());
    LoadOptions timed =
        TestLoadOptions.parse(
            "--url",
            "http://127.0.0.1:1",
            "--model",
            "m",
            "--sessions",
            "2",
            "--turns",
            "5",
            "--duration",
            "10s",
            "--api",
            "chat");
    assertThat(timed.duration()).isEqualTo(Duration.ofSeconds(10));
    assertThat(timed.arrivalDescription()).isEqualTo("sessions: 2 × 5 turns, think 0 s");
    // Without --sessions, nothing changes.
    assertThat(
            TestLoadOptions.parse(
                    "--url", "http://x", "--model", "m", "--rate", "1", "--duration", "1s")
                .sessions())
        .isNull();
  }

  @Test
  void completionsSessionsHoldAtMost64MiTokensOfPromptsInFlight() {
    // 2,048 × 32,768 = 64 Mi exactly: accepted; one session more is refused, one line, exit 2.
    LoadOptions o =
        TestLoadOptions.parse(
            "--url",
            "http://127.0.0.1:1",
            "--model",
            "m",
            "--sessions",
            "2048",
            "--max-in-flight",
            "4096");
    assertThat((long) o.sessions().count() * o.sessions().maxTokens())
        .isEqualTo(LoadOptions.MAX_SESSION_TOKENS_IN_FLIGHT);
    String[] r = execute("--sessions", "2049", "--max-in-flight", "4096");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1].lines().count()).isEqualTo(1);
    assertThat(r[1])
        .contains(
            "--sessions 2049 × --session-max-tokens 32768 is more than 67108864 tokens of prompts"
                + " in flight at once");
    // Chat keeps its own bound on the history (Conversation): not this one. Parsed, not run: a
    // run would send its requests and write a report.
    assertThat(
            TestLoadOptions.parse(
                    "--url",
                    "http://127.0.0.1:1",
                    "--model",
                    "m",
                    "--sessions",
                    "2049",
                    "--max-in-flight",
                    "4096",
                    "--api",
                    "chat")
                .sessions()
                .count())
        .isEqualTo(2049);
  }

  @Test
  void theTurnsCarryTheSessionHeaderName() {
    assertThat(Workload.SESSION_HEADER).isEqualTo("x-session-id");
  }

  @Test
  void aSecondShapeOrACompanionWithoutSessionsIsRefused() {
    String[] r = execute("--sessions", "2", "--rate", "5", "--duration", "1s");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1])
        .contains(
            "give exactly one of --rate R, --concurrency N, --steps R1,R2,…, --sessions N or"
                + " --replay FILE");
    r = execute("--sessions", "2", "--concurrency", "2", "--duration", "1s");
    assertThat(r[0]).isEqualTo("2");
    for (String flag : List.of("--turns", "--think-time", "--session-max-tokens")) {
      r =
          execute(
              "--rate", "1", "--duration", "1s", flag, flag.equals("--think-time") ? "1s" : "5");
      assertThat(r[0]).as(flag).isEqualTo("2");
      assertThat(r[1]).contains("go with --sessions N");
    }
  }

  @Test
  void aTraceADatasetOrSharedPrefixesCannotGoWithSessions() throws Exception {
    java.nio.file.Path trace = java.nio.file.Files.createTempFile("sessions", ".jsonl");
    try {
      java.nio.file.Files.writeString(
          trace, "{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 2}\n");
      String[] r = execute("--sessions", "2", "--replay", trace.toString());
      assertThat(r[0]).isEqualTo("2");
      assertThat(r[1])
          .contains("it cannot go with --sessions (a trace's sessions are in its rows)");
      r = execute("--sessions", "2", "--dataset", "jsonl:" + trace);
      assertThat(r[0]).isEqualTo("2");
      assertThat(r[1])
          .contains(
              "--sessions builds each turn's prompt from the session's history: it cannot go with"
                  + " --dataset or --prefix-tokens");
      r = execute("--sessions", "2", "--prefix-tokens", "4", "--prefixes", "2");
      assertThat(r[0]).isEqualTo("2");
      assertThat(r[1]).contains("it cannot go with --dataset or --prefix-tokens");
    } finally {
      java.nio.file.Files.deleteIfExists(trace);
    }
  }

  @Test
  void badValuesAreRefusedWithTheFlagNamed() {
    assertThat(execute("--sessions", "-1")[1]).contains("--sessions must be at least 1");
    assertThat(execute("--sessions", "2", "--turns", "0")[1]).contains("--turns must be between 1");
    assertThat(execute("--sessions", "2", "--turns", "10001")[1])
        .contains("--turns must be between 1 and 10000");
    assertThat(new SessionSpec(1, SessionSpec.MAX_TURNS, null, 1).turns()).isEqualTo(10_000);
    assertThat(execute("--sessions", "2", "--think-time", "soon")[1])
        .contains("--think-time: 'soon' is not a duration");
    assertThat(execute("--sessions", "2", "--session-max-tokens", "0")[1])
        .contains("--session-max-tokens must be at least 1");
    assertThat(execute("--sessions", "2", "--duration", "0s")[1])
        .contains("--duration must be a positive duration");
    String[] r = execute("--sessions", "5", "--max-in-flight", "4");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1]).contains("--sessions 5 is above --max-in-flight 4");
  }

  @Test
  void onlyCompletionsAndChatHaveSessions() {
    String[] r = execute("--sessions", "2", "--api", "embeddings", "--input-tokens", "8");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1]).contains("--sessions goes with --api completions or chat, not embeddings");
    r = execute("--sessions", "2", "--api", "responses");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1]).contains("not responses");
    r = execute("--sessions", "2", "--api", "chat", "--session-max-tokens", "100");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1]).contains("--session-max-tokens is for --api completions");
  }

  @Test
  void aTokenLimitBelowTheFirstTurnIsRefusedBeforeAnyRequest() {
    String[] r =
        execute(
            "--sessions",
            "2",
            "--input-tokens",
            "90",
            "--output-tokens",
            "20",
            "--session-max-tokens",
            "100");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1].strip())
        .isEqualTo(
            "phasemeter load: --session-max-tokens 100 is below a first turn's 90 input + 20"
                + " output tokens (90-20): no session could start");
    assertThat(r[2]).doesNotContain("clock starts");
  }

  @Test
  void aSearchRefusesSessions() {
    List<String> args =
        new ArrayList<>(
            List.of("search", "--url", "http://127.0.0.1:1", "--model", "m", "--slo", "ttft=1s"));
    args.addAll(List.of("--sessions", "2"));
    String[] r = executeArgs(args);
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1])
        .contains(
            "--sessions, --turns, --think-time and --session-max-tokens cannot go"
                + " with search");
  }

  @Test
  void arrivalsOfTheOpenModelCannotGoWithSessions() {
    for (String[] flag : new String[][] {{"--arrival", "gamma"}, {"--burstiness", "0.5"}}) {
      String[] r = execute("--sessions", "2", flag[0], flag[1]);
      assertThat(r[0]).as(flag[0]).isEqualTo("2");
      assertThat(r[1].strip())
          .isEqualTo(
              "phasemeter load: "
                  + flag[0]
                  + " cannot go with --sessions: each turn starts from the previous answer's"
                  + " last byte plus --think-time");
    }
    // Their defaults, not given, are not refused.
    assertThat(TestLoadOptions.parse("--url", "http://x", "--model", "m", "--sessions", "2"))
        .isNotNull();
  }

  @Test
  void chatSessionsAreBoundedByTheRunsHistory() {
    LoadOptions most =
        TestLoadOptions.parse(
            "--url",
            "http://x",
            "--model",
            "m",
            "--api",
            "chat",
            "--sessions",
            "4096",
            "--max-in-flight",
            "4096");
    assertThat(most.conversations().spec().count()).isEqualTo(4096);
    String[] r = execute("--api", "chat", "--sessions", "4097", "--max-in-flight", "5000");
    assertThat(r[0]).isEqualTo("2");
    assertThat(r[1].strip())
        .isEqualTo(
            "phasemeter load: --sessions 4097 with --api chat: at most 4096 (the run keeps at"
                + " most 256 MiB of chat history, and each session at least one answer's 64 KiB)");
    assertThat(r[2]).doesNotContain("clock starts");
  }

  @Test
  void theHelpOfSessionsAndDatasetNamesWhatEachRefuses() throws Exception {
    String sessions = help("sessions");
    for (String flag :
        List.of(
            "--rate",
            "--concurrency",
            "--steps",
            "--arrival",
            "--burstiness",
            "--replay",
            "--dataset",
            "--prefix-tokens")) {
      assertThat(sessions).as(flag).contains(flag);
    }
    String dataset = help("dataset");
    for (String flag : List.of("--replay", "--prefix-tokens", "--sessions")) {
      assertThat(dataset).as(flag).contains(flag);
    }
  }

  /** The {@code --help} text of option field {@code field} of {@code load run}. */
  private static String help(String field) throws Exception {
    return String.join(
        " ",
        LoadMain.Run.class
            .getDeclaredField(field)
            .getAnnotation(picocli.CommandLine.Option.class)
            .description());
  }
}
