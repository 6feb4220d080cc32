package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.report.LengthStats;
import io.phasemeter.load.workload.RequestSpec;
import io.phasemeter.load.workload.Workload;
import io.phasemeter.load.workload.dataset.DatasetFiles;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.ToLongFunction;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code load run --dataset} end to end against the simulator in this JVM: a generated ShareGPT
 * file (50 usable entries and 9 planted to be skipped) on {@code /v1/completions} and a jsonl file
 * on chat. Every request succeeds with exactly the output it asked for (the client checks each
 * against usage: an early stop would be INVALID); summary.json's {@code lengths} equal those of the
 * requests the seed says were sent, counted by the simulator's rule ({@code ceil(chars / 4)}, plus
 * the chat template's 7 for one message); the conditions carry the file's SHA-256 and the planted
 * skips; no prompt text reaches any output.
 */
class DatasetRunTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Vertx servers;
  private Simulator sim;
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @TempDir Path dir;

  @BeforeEach
  void start() throws Exception {
    servers = Vertx.vertx();
    sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(16)
                    .withDecodeStepMs(1)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(1_000_000))
            .await(10, TimeUnit.SECONDS);
  }

  @AfterEach
  void stop() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  private List<String> args(Path outDir, String... extra) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "--url",
                "http://127.0.0.1:" + sim.port(),
                "--model",
                "sim-llama",
                "--concurrency",
                "8",
                "--duration",
                "1500ms",
                "--seed",
                "5",
                "--out",
                outDir.toString(),
                "--report-interval",
                "1s"));
    args.addAll(Arrays.asList(extra));
    return args;
  }

  private int run(List<String> args) {
    List<String> all = new ArrayList<>(List.of("run"));
    all.addAll(args);
    return LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(RunArgs.quiet(all));
  }

  /**
   * The {@code lengths} summary.json must give: those of requests 1…sent as the run's own options
   * build them, the prompt counted by {@code promptTokens}.
   */
  private static void assertLengths(
      JsonNode lengths, List<String> args, long sent, ToLongFunction<JsonNode> promptTokens)
      throws Exception {
    Workload w = TestLoadOptions.parse(args.toArray(String[]::new)).workload();
    long[] prompts = new long[(int) sent];
    long[] outputs = new long[(int) sent];
    for (int k = 1; k <= sent; k++) {
      RequestSpec spec = w.request(k);
      prompts[k - 1] = promptTokens.applyAsLong(JSON.readTree(spec.body().getBytes()));
      outputs[k - 1] = spec.maxTokens();
    }
    assertThat(lengths.get("prompt_tokens").get("asked").isNull()).isTrue();
    assertThat(stats(lengths.get("prompt_tokens").get("received")))
        .isEqualTo(LengthStats.of(prompts));
    assertThat(stats(lengths.get("completion_tokens").get("asked")))
        .isEqualTo(LengthStats.of(outputs));
    assertThat(stats(lengths.get("completion_tokens").get("received")))
        .isEqualTo(LengthStats.of(outputs));
  }

  private static LengthStats stats(JsonNode s) {
    return new LengthStats(
        s.get("count").asLong(),
        s.get("mean").asDouble(),
        s.get("p50").asLong(),
        s.get("p90").asLong(),
        s.get("p99").asLong(),
        s.get("max").asLong());
  }

  private static long textTokens(String text) {
    return Math.max(1, (text.length() + 3) / 4);
  }

  private void assertNoText(Path outDir, String canary) throws Exception {
    for (String f : List.of("summary.json", "pairs.csv", "report.html")) {
      assertThat(Files.readString(outDir.resolve(f))).as(f).doesNotContain(canary);
    }
    assertThat(out.toString() + err).doesNotContain(canary);
  }

  @Test
  void shareGptOnCompletionsSendsExactOutputsAndReportsTheFileAndItsSkips() throws Exception {
    DatasetFiles.Planted p = DatasetFiles.shareGpt(dir.resolve("sharegpt.json"), 50, 17);
    Path outDir = dir.resolve("sharegpt");
    List<String> args = args(outDir, "--dataset", "sharegpt:" + p.file());

    assertThat(run(args)).as(out + "\n" + err).isZero();

    JsonNode s = JSON.readTree(outDir.resolve("summary.json").toFile());
    long sent = s.get("requests").get("sent").asLong();
    assertThat(sent).isPositive();
    assertThat(s.get("requests").get("ok").asLong()).isEqualTo(sent);
    assertThat(s.get("requests").get("invalid").asLong()).isZero();
    assertLengths(s.get("lengths"), args, sent, b -> textTokens(b.get("prompt").asText()));

    JsonNode c = s.get("conditions");
    assertThat(c.get("dataset").asText()).isEqualTo("sharegpt");
    assertThat(c.get("dataset_file").asText()).isEqualTo(p.file().toString());
    assertThat(c.get("dataset_sha256").asText()).isEqualTo(DatasetFiles.sha256(p.file()));
    assertThat(c.get("dataset_entries").asLong()).isEqualTo(50);
    assertThat(c.get("dataset_entries_read").asLong()).isEqualTo(59);
    Map<String, Long> skipped = new java.util.LinkedHashMap<>();
    c.get("dataset_skipped")
        .properties()
        .forEach(e -> skipped.put(e.getKey(), e.getValue().asLong()));
    assertThat(skipped).isEqualTo(p.skipped());
    assertThat(c.get("dataset_stopped_at").isNull()).isTrue();
    assertThat(c.get("dataset_output_tokens").get("count").asLong()).isEqualTo(50);
    assertThat(c.get("dataset_output_tokens").get("max").asLong())
        .isEqualTo(
            p.usable().stream().mapToLong(DatasetFiles.Entry::outputTokens).max().orElseThrow());
    assertThat(c.get("workload").asText())
        .isEqualTo("sharegpt " + p.file() + " (50 entries), streamed");
    assertThat(out.toString())
        .contains(
            "phasemeter load: --dataset sharegpt "
                + p.file()
                + ": 50 usable entries of 59 read (skipped: malformed_entry 2 no_human_gpt_pair 2"
                + " value_over_1_mib 1 prompt_under_4_tokens 1 output_under_4_tokens 1"
                + " prompt_over_1024_tokens 1 total_over_2048_tokens 1)");
    assertThat(Files.readString(outDir.resolve("report.html"))).contains("<h2>Lengths</h2>");
    assertNoText(outDir, p.canary());
  }

  @Test
  void jsonlOnChatSendsExactOutputsToo() throws Exception {
    String canary = "canary-jsonl-prompt";
    List<String> lines = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      lines.add(
          "{\"prompt\": \""
              + canary
              + " number "
              + i
              + " "
              + "é".repeat(i * 3)
              + "\", \"output_tokens\": "
              + (1 + i * 2)
              + "}");
    }
    Path file = DatasetFiles.lines(dir.resolve("d.jsonl"), lines);
    Path outDir = dir.resolve("jsonl");
    List<String> args = args(outDir, "--dataset", "jsonl:" + file, "--api", "chat", "--no-stream");

    assertThat(run(args)).as(out + "\n" + err).isZero();

    JsonNode s = JSON.readTree(outDir.resolve("summary.json").toFile());
    long sent = s.get("requests").get("sent").asLong();
    assertThat(sent).isPositive();
    assertThat(s.get("requests").get("ok").asLong()).isEqualTo(sent);
    // The simulator's chat template: 3 + 4 per message, plus the text's ceil(chars / 4).
    assertLengths(
        s.get("lengths"),
        args,
        sent,
        b -> 7 + (b.get("messages").get(0).get("content").asText().length() + 3) / 4);
    JsonNode c = s.get("conditions");
    assertThat(c.get("dataset").asText()).isEqualTo("jsonl");
    assertThat(c.get("dataset_sha256").asText()).isEqualTo(DatasetFiles.sha256(file));
    assertThat(c.get("dataset_entries").asLong()).isEqualTo(20);
    assertThat(c.get("dataset_skipped").size()).isZero();
    assertThat(c.get("dataset_output_tokens_from").asText()).isEqualTo("file");
    assertThat(c.get("workload").asText())
        .isEqualTo("jsonl " + file + " (20 entries), chat, whole responses");
    assertNoText(outDir, canary);
  }
}
