package io.phasemeter.load.campaign;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.Profile;
import io.phasemeter.load.workload.SessionSpec;
import io.phasemeter.load.workload.replay.MooncakeTraces;
import io.phasemeter.load.workload.replay.Replay;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class PlanTest {

  @Test
  void theShippedSamplePlanParses() throws Exception {
    Plan p = Plan.load(Path.of("..", "config", "campaign.yaml"));
    assertThat(p.repeats()).isEqualTo(3);
    assertThat(p.concurrency()).containsExactly(1, 2, 4, 8, 12, 16, 24, 32);
    assertThat(p.rates()).containsExactly(0.15, 0.3, 0.45);
    assertThat(p.points()).hasSize(2 * (8 + 3));
    assertThat(p.points().get(0).id()).isEqualTo("doc-qa/c1");
    assertThat(p.points().get(8).id()).isEqualTo("doc-qa/r0.15");
    assertThat(p.warmupDuration()).isEqualTo(Duration.ofSeconds(30));
    assertThat(p.connectionReuse()).isTrue();
  }

  @Test
  void connectionReuseIsOnOrOff() {
    String base = "model: m\nduration: 1s\nprofiles: [doc-qa]\nconcurrency: [1]\n";
    assertThat(Plan.parse(base, "a.yaml").connectionReuse()).isTrue();
    assertThat(Plan.parse(base + "connection_reuse: off\n", "a.yaml").connectionReuse()).isFalse();
    assertThat(Plan.parse(base + "connection_reuse: \"on\"\n", "a.yaml").connectionReuse())
        .isTrue();
    assertThatThrownBy(() -> Plan.parse(base + "connection_reuse: sometimes\n", "a.yaml"))
        .hasMessage("a.yaml: key 'connection_reuse' must be on or off, got 'sometimes'");
  }

  @Test
  void errorsNameTheFileAndTheKey() {
    String base = "model: m\nduration: 1s\nprofiles: [doc-qa]\nconcurrency: [1]\n";
    assertThatThrownBy(() -> Plan.parse(base + "repeats: 2\n", "plans/a.yaml"))
        .hasMessage("plans/a.yaml: key 'repeats' must be at least 3, got 2");
    assertThatThrownBy(() -> Plan.parse(base + "repets: 3\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'repets' is not a plan key");
    assertThatThrownBy(
            () -> Plan.parse("model: m\nduration: 1s\nprofiles: [huge]\nrates: [1]\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'profiles' holds 'huge'");
    assertThatThrownBy(
            () ->
                Plan.parse("model: m\nduration: soon\nprofiles: [doc-qa]\nrates: [1]\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'duration' must be a duration");
    assertThatThrownBy(() -> Plan.parse("model: m\nduration: 1s\nprofiles: [doc-qa]\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'concurrency' give concurrency levels, rates");
    assertThatThrownBy(() -> Plan.parse(base + "rates: [0]\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'rates' every rate must be a positive number");
  }

  @Test
  void apiIsCompletionsUnlessTheCampaignSaysOtherwise() {
    String base = "model: m\nduration: 1s\nprofiles: [doc-qa]\nconcurrency: [1]\n";
    Plan plain = Plan.parse(base, "a.yaml");
    assertThat(plain.api()).isEqualTo(Api.COMPLETIONS);
    assertThat(plain.stream()).isTrue();
    Plan responses = Plan.parse(base + "api: responses\nstream: false\n", "a.yaml");
    assertThat(responses.api()).isEqualTo(Api.RESPONSES);
    assertThat(responses.stream()).isFalse();
    assertThat(Plan.parse(base + "api: chat\n", "a.yaml").stream()).isTrue();
    // Embeddings never stream: off by default, refused when asked for.
    Plan embeddings = Plan.parse(base + "api: embeddings\n", "a.yaml");
    assertThat(embeddings.api()).isEqualTo(Api.EMBEDDINGS);
    assertThat(embeddings.stream()).isFalse();
    assertThatThrownBy(() -> Plan.parse(base + "api: embeddings\nstream: true\n", "a.yaml"))
        .hasMessage("a.yaml: key 'stream' cannot be true with api: embeddings (never streamed)");
    assertThatThrownBy(() -> Plan.parse(base + "api: response\n", "plans/a.yaml"))
        .hasMessage(
            "plans/a.yaml: key 'api' must be one of chat, completions, responses, embeddings,"
                + " got 'response'");
    assertThatThrownBy(() -> Plan.parse(base + "api: [chat]\n", "a.yaml"))
        .hasMessage("a.yaml: key 'api' must be a single value");
  }

  @Test
  void apiKeyEnvNamesAVariableAndNeverHoldsTheKey() {
    String base = "model: m\nduration: 1s\nprofiles: [doc-qa]\nconcurrency: [1]\n";
    assertThat(Plan.parse(base, "a.yaml").apiKeyEnv()).isNull();
    assertThat(Plan.parse(base + "api_key_env: OPENAI_API_KEY\n", "a.yaml").apiKeyEnv())
        .isEqualTo("OPENAI_API_KEY");
    assertThatThrownBy(() -> Plan.parse(base + "api_key_env: sk-abc-123\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'api_key_env' must name an environment variable")
        .hasMessageNotContaining("sk-abc-123");
  }

  // --- replay:, dataset: and sessions: entries (issue 36) ---

  @TempDir Path dir;

  private static final String HEAD = "model: m\nduration: 1s\n";

  private Path trace(String name) throws Exception {
    Files.createDirectories(dir.resolve("traces"));
    return MooncakeTraces.write(
        dir.resolve("traces").resolve(name), new MooncakeTraces.Shape(30, 1000, 2, 1, 1, 8, 5));
  }

  private Path jsonl(String name, String... lines) throws Exception {
    Files.createDirectories(dir.resolve("data"));
    return Files.write(dir.resolve("data").resolve(name), List.of(lines));
  }

  private Plan plan(String yaml) throws Exception {
    Path file = dir.resolve("plan.yaml");
    Files.writeString(file, yaml);
    return Plan.load(file);
  }

  /** The plan's error, with the plan file's path shortened to plan.yaml. */
  private String error(String yaml) {
    Throwable t = org.assertj.core.api.Assertions.catchThrowable(() -> plan(yaml));
    assertThat(t).as(yaml).isInstanceOf(IllegalArgumentException.class);
    return t.getMessage().replace(dir.resolve("plan.yaml").toString(), "plan.yaml");
  }

  private static String sha256(Path file) throws Exception {
    return HexFormat.of()
        .formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file)));
  }

  @Test
  void aReplayIsOnePointOfItsOwnReadOnceFromThePlansDirectory() throws Exception {
    Path t = trace("day1.jsonl");
    Plan p =
        plan(
            HEAD
                + "concurrency: [1]\nrates: [2]\n"
                + "profiles: [64:8, {replay: traces/day1.jsonl, speed: 2}]\n");
    assertThat(p.points().stream().map(Plan.Point::id))
        .containsExactly("64-8/c1", "64-8/r2", "replay-day1-x2");
    Plan.Point replay = p.points().get(2);
    assertThat(replay.concurrency()).isZero();
    assertThat(replay.open()).isFalse();
    assertThat(replay.load()).isEqualTo("trace replay at speed 2");
    Source.Trace s = (Source.Trace) replay.source();
    assertThat(s.replay().file()).isEqualTo(t);
    assertThat(s.replay().format()).isNull();
    assertThat(s.replay().prefixes()).isEqualTo(Replay.Prefixes.SHARED);
    assertThat(s.sha256()).isEqualTo(sha256(t));
    assertThat(s.replayed().trace().rows()).isEqualTo(30);
    // The plan's duration does not cut a replay: the whole trace, its 1 s span ÷ 2.
    assertThat(s.duration()).isNull();
    assertThat(s.length(s.duration())).isEqualTo(Duration.ofMillis(501));
    assertThat(p.notes())
        .containsExactly(
            "replay-day1-x2: one point, on the trace's own schedule (concurrency and rates do not"
                + " apply): 30 rows of "
                + t
                + ", 501 ms a run (its span ÷ speed 2), sha256 "
                + sha256(t).substring(0, 12)
                + "…");
  }

  @Test
  void aReplayTakesItsOwnKeysAndAPlanOfReplaysNeedsNoLoads() throws Exception {
    trace("t.jsonl");
    Plan p =
        plan(
            HEAD
                + "profiles:\n"
                + "  - {replay: traces/t.jsonl, format: mooncake, speed: 1.5, limit: 10,"
                + " prefixes: distinct, duration: 300ms}\n"
                + "  - {replay: traces/t.jsonl, name: day-one}\n");
    assertThat(p.points().stream().map(Plan.Point::id)).containsExactly("replay-t-x1.5", "day-one");
    Source.Trace s = (Source.Trace) p.sources().get(0);
    assertThat(s.replay().format()).isEqualTo(Replay.Format.MOONCAKE);
    assertThat(s.replay().speed()).isEqualTo(1.5);
    assertThat(s.replay().limit()).isEqualTo(10);
    assertThat(s.replay().prefixes()).isEqualTo(Replay.Prefixes.DISTINCT);
    assertThat(s.duration()).isEqualTo(Duration.ofMillis(300));
    assertThat(s.replayed().trace().rows()).isEqualTo(10);
  }

  @Test
  void aReplaysBadKeysAndValuesNameTheEntryAndTheKey() throws Exception {
    trace("t.jsonl");
    String base = HEAD + "profiles:\n  - doc-qa\n  - {replay: traces/t.jsonl, ";
    String c = "}\nconcurrency: [1]\n";
    String where = "plan.yaml: profiles entry 2 (replay): key ";
    assertThat(error(base + "sped: 2" + c))
        .isEqualTo(
            where
                + "'sped' is not a replay entry key (known: duration, format, limit, name,"
                + " prefixes, replay, speed)");
    assertThat(error(base + "speed: 0" + c))
        .isEqualTo(where + "'speed' must be a positive number (2 replays twice as fast), got '0'");
    assertThat(error(base + "speed: fast" + c)).startsWith(where + "'speed' must be a positive");
    assertThat(error(base + "limit: 0" + c))
        .isEqualTo(where + "'limit' must be a whole number of rows, at least 1, got 0");
    assertThat(error(base + "prefixes: some" + c))
        .isEqualTo(where + "'prefixes' must be shared or distinct, got 'some'");
    assertThat(error(base + "format: csv" + c))
        .isEqualTo(where + "'format' must be mooncake, azure or jsonl, got 'csv'");
    assertThat(error(base + "duration: soon" + c))
        .isEqualTo(where + "'duration' must be a duration such as 500ms, 30s or 2m, got 'soon'");
    assertThat(error(base + "name: a/b" + c)).startsWith(where + "'name' must be 1 to 64 letters");
    assertThat(error(HEAD + "profiles: [{replay: traces/none.jsonl}]\n"))
        .isEqualTo(
            "plan.yaml: profiles entry 1 (replay): key 'replay' "
                + dir.resolve("traces/none.jsonl")
                + ": no such file");
    assertThat(error(HEAD + "api: chat\nprofiles: [{replay: traces/t.jsonl}]\n"))
        .isEqualTo(
            "plan.yaml: profiles entry 1 (replay): a replay sends the trace's exact lengths as"
                + " token ids on completions: it cannot go with api: chat");
    assertThat(error(HEAD + "profiles: [{replay: traces/t.jsonl}, {replay: traces/t.jsonl}]\n"))
        .isEqualTo(
            "plan.yaml: key 'profiles' lists 'replay-t-x1' twice: give one entry another name:"
                + " (two replays of one file, another speed)");
    assertThat(error(HEAD + "profiles: [{replay: traces/t.jsonl, dataset: jsonl:x}]\n"))
        .startsWith("plan.yaml: profiles entry 1 names replay and dataset: an entry is a profile");
    assertThat(error(HEAD + "profiles: [{speed: 2}]\nconcurrency: [1]\n"))
        .startsWith("plan.yaml: profiles entry 1 names none: an entry is a profile");
  }

  @Test
  void aBadTraceFailsThePlanAtLoadWithItsLine() throws Exception {
    Files.createDirectories(dir.resolve("traces"));
    Path bad =
        Files.write(
            dir.resolve("traces/bad.jsonl"),
            List.of(
                "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 4}",
                "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": -3}"));
    assertThat(error(HEAD + "profiles: [{replay: traces/bad.jsonl}]\n"))
        .startsWith("plan.yaml: profiles entry 1 (replay): replay " + bad + ":2: ")
        .contains("output_length");
    // load campaign: one line and exit 2, before any server is asked anything (port 9: none).
    StringWriter err = new StringWriter();
    CommandLine cl = new CommandLine(new io.phasemeter.load.LoadMain());
    cl.setOut(new PrintWriter(new StringWriter(), true));
    cl.setErr(new PrintWriter(err, true));
    int code =
        cl.execute(
            "campaign",
            "--plan",
            dir.resolve("plan.yaml").toString(),
            "--url",
            "http://127.0.0.1:9",
            "--out",
            dir.resolve("out").toString());
    assertThat(code).isEqualTo(2);
    assertThat(err.toString().lines())
        .singleElement()
        .asString()
        .startsWith("phasemeter load campaign: " + dir.resolve("plan.yaml") + ": profiles entry 1")
        .contains("bad.jsonl:2: ");
    assertThat(dir.resolve("out")).doesNotExist();
  }

  @Test
  void aDatasetIsCrossedWithTheLoadsAsAProfileIs() throws Exception {
    Path d =
        jsonl(
            "questions.jsonl",
            "{\"prompt\": \"one\", \"output_tokens\": 4}",
            "{\"prompt\": \"two\", \"output_tokens\": 6}");
    Plan p =
        plan(
            HEAD
                + "concurrency: [1, 2]\nrates: [3]\n"
                + "profiles: [{dataset: jsonl:data/questions.jsonl},"
                + " {dataset: jsonl:data/questions.jsonl, output_tokens: 16, name: q16}]\n");
    assertThat(p.points().stream().map(Plan.Point::id))
        .containsExactly(
            "dataset-questions/c1",
            "dataset-questions/c2",
            "dataset-questions/r3",
            "q16/c1",
            "q16/c2",
            "q16/r3");
    Source.FromDataset s = (Source.FromDataset) p.sources().get(0);
    assertThat(s.dataset().file()).isEqualTo(d);
    assertThat(s.entries().size()).isEqualTo(2);
    assertThat(s.sha256()).isEqualTo(sha256(d));
    // Read once: the runs' options share the Dataset, which keeps what it read.
    assertThat(s.dataset().load(0)).isSameAs(s.entries());
    Source.FromDataset q16 = (Source.FromDataset) p.sources().get(1);
    assertThat(q16.outputTokens()).isEqualTo(16);
    assertThat(q16.dataset().load(16)).isSameAs(q16.entries());
    assertThat(p.notes())
        .containsExactly(
            "dataset-questions: 2 usable entries of "
                + d
                + ", sha256 "
                + sha256(d).substring(0, 12)
                + "…",
            "q16: 2 usable entries of " + d + ", sha256 " + sha256(d).substring(0, 12) + "…");
  }

  @Test
  void aDatasetsBadKeysValuesAndFilesFailThePlanAtLoad() throws Exception {
    Path d = jsonl("q.jsonl", "{\"prompt\": \"one\", \"output_tokens\": 4}", "{\"prompt\": 3}");
    jsonl("ok.jsonl", "{\"prompt\": \"one\", \"output_tokens\": 4}");
    String where = "plan.yaml: profiles entry 1 (dataset): ";
    String c = "\nconcurrency: [1]\n";
    assertThat(error(HEAD + "profiles: [{dataset: jsonl:data/ok.jsonl, output: 3}]" + c))
        .isEqualTo(
            where
                + "key 'output' is not a dataset entry key (known: dataset, name, output_tokens)");
    assertThat(error(HEAD + "profiles: [{dataset: jsonl:data/ok.jsonl, output_tokens: 0}]" + c))
        .isEqualTo(where + "key 'output_tokens' must be a whole number, at least 1, got 0");
    assertThat(error(HEAD + "profiles: [{dataset: csv:data/ok.jsonl}]" + c))
        .isEqualTo(
            where + "key 'dataset' must be sharegpt:FILE or jsonl:FILE, got 'csv:data/ok.jsonl'");
    assertThat(error(HEAD + "profiles: [{dataset: jsonl:data/none.jsonl}]" + c))
        .isEqualTo(where + "dataset " + dir.resolve("data/none.jsonl") + ": no such file");
    assertThat(error(HEAD + "profiles: [{dataset: jsonl:data/q.jsonl}]" + c))
        .startsWith(where + "dataset " + d + ":2: ")
        .contains("prompt");
    assertThat(error(HEAD + "api: embeddings\nprofiles: [{dataset: jsonl:data/ok.jsonl}]" + c))
        .isEqualTo(
            where + "a dataset sends its prompts on completions or chat, not api: embeddings");
    // A dataset, as a profile, needs loads.
    assertThat(error(HEAD + "profiles: [{dataset: jsonl:data/ok.jsonl}]\n"))
        .startsWith("plan.yaml: key 'concurrency' give concurrency levels, rates, or both");
  }

  @Test
  void sessionsAreCrossedWithConcurrencyOnlyAndSaySo() throws Exception {
    Plan p =
        plan(
            HEAD
                + "concurrency: [1, 4]\nrates: [2, 3]\n"
                + "profiles: [64:8, {sessions: {turns: 4, think_time: 250ms, max_tokens: 4096,"
                + " profile: 512:64}}, {sessions: {}, name: chats}]\n");
    assertThat(p.points().stream().map(Plan.Point::id))
        .containsExactly(
            "64-8/c1",
            "64-8/c4",
            "64-8/r2",
            "64-8/r3",
            "sessions-4t/c1",
            "sessions-4t/c4",
            "chats/c1",
            "chats/c4");
    Source.Sessions s = (Source.Sessions) p.sources().get(1);
    assertThat(s.turns()).isEqualTo(4);
    assertThat(s.thinkTime()).isEqualTo(Duration.ofMillis(250));
    assertThat(s.maxTokens()).isEqualTo(4096);
    assertThat(s.profile()).isEqualTo(Profile.custom(512, 64));
    assertThat(p.points().get(5).load()).isEqualTo("4 sessions at once");
    // The defaults of load run's flags.
    Source.Sessions d = (Source.Sessions) p.sources().get(2);
    assertThat(d.turns()).isEqualTo(SessionSpec.DEFAULT_TURNS);
    assertThat(d.thinkTime()).isZero();
    assertThat(d.maxTokens()).isEqualTo(SessionSpec.DEFAULT_MAX_TOKENS);
    assertThat(d.profile()).isEqualTo(Profile.DOC_QA);
    assertThat(p.notes())
        .containsExactly(
            "sessions-4t: crossed with concurrency only (the sessions at once): rates do not apply"
                + " to sessions, so 2 rates are skipped for it",
            "chats: crossed with concurrency only (the sessions at once): rates do not apply to"
                + " sessions, so 2 rates are skipped for it");
  }

  @Test
  void sessionsBadKeysAndValuesNameTheEntryAndTheKey() throws Exception {
    String base = HEAD + "concurrency: [2]\nprofiles: [{sessions: {";
    String where = "plan.yaml: profiles entry 1 (sessions): key ";
    assertThat(error(base + "turn: 2}}]\n"))
        .isEqualTo(
            where
                + "'turn' is not a key of sessions: (known: max_tokens, profile, think_time,"
                + " turns)");
    assertThat(error(HEAD + "concurrency: [2]\nprofiles: [{sessions: {}, turns: 2}]\n"))
        .isEqualTo(where + "'turns' is not a sessions entry key (known: name, sessions)");
    assertThat(error(base + "turns: 0}}]\n"))
        .isEqualTo(where + "'turns' must be a whole number from 1 to 10000, got 0");
    assertThat(error(base + "think_time: soon}}]\n"))
        .isEqualTo(where + "'think_time' must be a duration such as 0s, 500ms or 2s, got 'soon'");
    assertThat(error(base + "max_tokens: 0}}]\n"))
        .isEqualTo(where + "'max_tokens' must be a whole number, at least 1, got 0");
    assertThat(error(base + "profile: huge}}]\n")).startsWith(where + "'profile' holds 'huge'");
    assertThat(error(base + "max_tokens: 1000}}]\n"))
        .isEqualTo(
            where
                + "'max_tokens' 1000 is below the first turn's 4096 input + 300 output tokens"
                + " (doc-qa): no session could start");
    assertThat(error(HEAD + "api: chat\n" + base.substring(HEAD.length()) + "max_tokens: 9}}]\n"))
        .startsWith(where + "'max_tokens' is for api: completions");
    assertThat(error(HEAD + "concurrency: [2]\nprofiles: [{sessions: 3}]\n"))
        .startsWith(where + "'sessions' must be a mapping");
    assertThat(error(HEAD + "api: responses\nconcurrency: [2]\nprofiles: [{sessions: {}}]\n"))
        .isEqualTo(
            "plan.yaml: profiles entry 1 (sessions): sessions go with api: completions or chat,"
                + " not responses (a session's turns send back the history)");
    assertThat(error(HEAD + "rates: [1]\nprofiles: [{sessions: {}}]\n"))
        .startsWith("plan.yaml: key 'concurrency' is needed by sessions entry 'sessions-3t'");
    assertThat(error(HEAD + "concurrency: [8]\nmax_in_flight: 4\nprofiles: [{sessions: {}}]\n"))
        .startsWith("plan.yaml: key 'max_in_flight' 4 is below concurrency 8");
  }
}
