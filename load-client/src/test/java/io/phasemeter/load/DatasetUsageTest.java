package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.workload.dataset.DatasetFiles;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@code load run --dataset} with a bad file or bad flags, through the command line against a
 * server that counts what it receives: exit 2, one line on stderr naming the file, the line and the
 * field, and not one request received (the warm-up included: the file is read before anything is
 * sent).
 */
class DatasetUsageTest {
  private static final String CANARY = "canary-dataset-text";
  private static final String GOOD = "{\"prompt\": \"a b c d\", \"output_tokens\": 4}";

  private static Vertx vertx;
  private static HttpServer server;
  private static final AtomicLong received = new AtomicLong();

  @TempDir static Path dir;

  @BeforeAll
  static void start() throws Exception {
    vertx = Vertx.vertx();
    server =
        vertx
            .createHttpServer()
            .requestHandler(
                req -> {
                  received.incrementAndGet();
                  req.response().setStatusCode(500).end();
                })
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
  }

  @AfterAll
  static void stop() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private static Path write(String name, String content) throws Exception {
    return Files.writeString(dir.resolve(name), content);
  }

  /** A case: the --dataset value's file contents, extra flags, and the error after the prefix. */
  static Stream<Arguments> cases() throws Exception {
    String bigLine =
        "{\"prompt\": \"" + CANARY + "x".repeat(1024 * 1024) + "\", \"output_tokens\": 4}";
    Path sharegptGood =
        write(
            "good.json",
            "[{\"conversations\": [{\"from\": \"human\", \"value\": \"a fine"
                + " question\"}, {\"from\": \"gpt\", \"value\": \"a fine answer\"}]}]");
    return Stream.of(
        jsonl("not-json", GOOD + "\n{\"prompt\": \"" + CANARY, ":2: not valid JSON"),
        jsonl("no-prompt", GOOD + "\n\n{\"output_tokens\": 3}", ":3: no \"prompt\""),
        jsonl(
            "empty-prompt", "{\"prompt\": \"\", \"output_tokens\": 3}", ":1: \"prompt\" is empty"),
        jsonl(
            "zero-output",
            GOOD + "\n{\"prompt\": \"" + CANARY + "\", \"output_tokens\": 0}",
            ":2: \"output_tokens\" must be an integer from 1 to 2147483647, got 0"),
        jsonl(
            "text-output",
            "{\"prompt\": \"" + CANARY + "\", \"output_tokens\": \"4\"}",
            ":1: \"output_tokens\" must be an integer from 1 to 2147483647, got a string"),
        jsonl(
            "no-output",
            "{\"prompt\": \"" + CANARY + "\"}",
            ":1: no \"output_tokens\" (give it on every line, or --output-tokens N for all)"),
        jsonl(
            "long-line",
            GOOD + "\n" + bigLine,
            ":2: the line is longer than 1,048,576 bytes, the limit"),
        jsonl("empty", "", ": the file is empty"),
        Arguments.of(
            "sharegpt not an array",
            "sharegpt:" + write("obj.json", "{\"conversations\": []}"),
            List.of(),
            "--dataset "
                + dir.resolve("obj.json")
                + ":1: not a ShareGPT file: the top level is not a JSON array of entries"),
        Arguments.of(
            "sharegpt broken",
            "sharegpt:" + write("broken.json", "[\n{\"conversations\": [\n{\"from\" \"" + CANARY),
            List.of(),
            "--dataset " + dir.resolve("broken.json") + ":3: not valid JSON"),
        Arguments.of(
            "sharegpt nothing usable",
            "sharegpt:"
                + write(
                    "short.json",
                    "[{\"conversations\": [{\"from\": \"human\", \"value\": \"hi\"},"
                        + " {\"from\": \"gpt\", \"value\": \""
                        + CANARY
                        + "\"}]}]"),
            List.of(),
            "--dataset "
                + dir.resolve("short.json")
                + ": no usable entry (1 read;"
                + " prompt_under_4_tokens 1)"),
        Arguments.of(
            "no such file",
            "sharegpt:" + dir.resolve("missing.json"),
            List.of(),
            "--dataset " + dir.resolve("missing.json") + ": no such file"),
        Arguments.of(
            "an unknown kind",
            "csv:" + sharegptGood,
            List.of(),
            "--dataset must be sharegpt:FILE or jsonl:FILE, got 'csv:" + sharegptGood + "'"),
        Arguments.of(
            "with --profile",
            "sharegpt:" + sharegptGood,
            List.of("--profile", "single-1k"),
            "--dataset gives the prompts and their lengths: it cannot go with --profile, --mix or"
                + " --input-tokens (--output-tokens N sets every output length)"),
        Arguments.of(
            "with --api embeddings",
            "sharegpt:" + sharegptGood,
            List.of("--api", "embeddings"),
            "--dataset sends its prompts on --api completions (the default) or --api chat, not"
                + " --api embeddings"));
  }

  private static Arguments jsonl(String name, String content, String error) throws Exception {
    Path f = write(name + ".jsonl", content);
    return Arguments.of("jsonl " + name, "jsonl:" + f, List.of(), "--dataset " + f + error);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void isOneLineAndExit2BeforeAnyRequest(
      String name, String dataset, List<String> extra, String error) {
    long before = received.get();
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    List<String> args =
        new ArrayList<>(
            Arrays.asList(
                "run",
                "--url",
                "http://127.0.0.1:" + server.actualPort(),
                "--model",
                "m",
                "--rate",
                "5",
                "--duration",
                "1s",
                "--out",
                dir.resolve("out-" + name.replace(' ', '-')).toString(),
                "--dataset",
                dataset));
    args.addAll(extra);
    // The warm-up and the floor stay on: the file must stop the run before them too.
    int code =
        LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
            .execute(args.toArray(String[]::new));

    assertThat(code).as(out + "\n" + err).isEqualTo(LoadRun.USAGE);
    assertThat(err.toString().lines().toList()).containsExactly("phasemeter load: " + error);
    assertThat(out + err.toString()).doesNotContain(CANARY);
    assertThat(received.get() - before).isZero();
  }

  /** A control for the cases above: a good file with the same flags is read, not refused. */
  @org.junit.jupiter.api.Test
  void aGoodFileIsRead() throws Exception {
    Path file = DatasetFiles.shareGpt(dir.resolve("control.json"), 8, 1).file();
    LoadOptions o =
        TestLoadOptions.parse(
            "--url",
            "http://127.0.0.1:1",
            "--model",
            "m",
            "--rate",
            "1",
            "--duration",
            "1s",
            "--dataset",
            "sharegpt:" + file);
    assertThat(o.datasetEntries().size()).isEqualTo(8);
    assertThat(o.workloadText()).isEqualTo("sharegpt " + file + " (8 entries), streamed");
  }
}
