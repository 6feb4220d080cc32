package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A bad trace file or a bad combination of replay flags, through {@code phasemeter load}: one line
 * on stderr naming the file, the line and the field (or the flags), exit 2, and not one request at
 * the target, which counts what it receives.
 */
class ReplayUsageTest {
  private static final String ROW =
      "{\"timestamp\": %s, \"input_length\": %s, \"output_length\": 4}";

  @TempDir Path dir;

  private HttpServer target;
  private final AtomicInteger received = new AtomicInteger();

  @BeforeEach
  void start() throws Exception {
    target = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    target.createContext(
        "/",
        exchange -> {
          received.incrementAndGet();
          exchange.sendResponseHeaders(500, -1);
          exchange.close();
        });
    target.start();
  }

  @AfterEach
  void stop() {
    target.stop(0);
  }

  private static String row(Object timestamp, Object input) {
    return String.format(ROW, timestamp, input);
  }

  static Stream<Arguments> badFiles() {
    String ok = row(0, 100) + "\n";
    return Stream.of(
        Arguments.of(
            "missing field",
            ok + "{\"timestamp\": 5, \"input_length\": 100}\n",
            "t.jsonl:2: output_length is missing"),
        Arguments.of(
            "wrong type",
            ok + row(5, "\"100\"") + "\n",
            "t.jsonl:2: input_length must be a whole number, got a string"),
        Arguments.of(
            "zero length",
            ok + row(5, 0) + "\n",
            "t.jsonl:2: input_length must be at least 1, got 0"),
        Arguments.of(
            "negative length",
            ok + ok + row(5, -7) + "\n",
            "t.jsonl:3: input_length must be at least 1, got -7"),
        Arguments.of(
            "unsorted timestamps",
            row(100, 10) + "\n" + row(200, 10) + "\n\n" + row(150, 10) + "\n",
            "t.jsonl:4: timestamp is earlier than line 2's (by 50 ms): rows must be in time order"),
        Arguments.of(
            "a session's first turn without timestamp",
            ok
                + "{\"session_id\": \"s\", \"delay\": 5, \"input_length\": 9, \"output_length\": 4}\n",
            "t.jsonl:2: timestamp is missing (only a later turn of a session, after its first, may"
                + " go without: it follows its previous turn's answer)"),
        Arguments.of("empty file", "", "t.jsonl: the file has no rows"),
        Arguments.of("not JSON", ok + "timestamp=5\n", "t.jsonl:2: not JSON (at column 11)"),
        Arguments.of(
            "too many hash ids",
            "{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 4, \"hash_ids\": [1, 2]}\n",
            "t.jsonl:1: hash_ids names 2 blocks, but input_length 512 fills at most 1 (512-token"
                + " blocks)"),
        Arguments.of(
            "a line over 1 MiB",
            ok + "{\"pad\": \"" + "x".repeat(1 << 20) + "\"}\n",
            "t.jsonl:2: the line is longer than 1,048,576 bytes (the limit): not a trace row"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("badFiles")
  void aBadFileIsOneLineAndExit2BeforeAnyRequest(String why, String content, String expected)
      throws Exception {
    Path file = dir.resolve("t.jsonl");
    Files.writeString(file, content);
    assertUsage(
        "phasemeter load: --replay " + file + expected.substring("t.jsonl".length()),
        "--replay",
        file.toString());
  }

  @Test
  void notUtf8ABadAzureTimeOrNoFileIsOneLineToo() throws Exception {
    Path latin = dir.resolve("latin.jsonl");
    byte[] row = (row(0, 10) + "\n").getBytes(StandardCharsets.UTF_8);
    byte[] bad = "{\"timestamp\": 1, \"x\": \"caf\u00e9\"}\n".getBytes(StandardCharsets.ISO_8859_1);
    byte[] both = Arrays.copyOf(row, row.length + bad.length);
    System.arraycopy(bad, 0, both, row.length, bad.length);
    Files.write(latin, both);
    assertUsage(
        "phasemeter load: --replay " + latin + ":2: not UTF-8 text", "--replay", latin.toString());
    Path csv = dir.resolve("azure.csv");
    Files.writeString(csv, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15,10,2\n");
    assertUsage(
        "phasemeter load: --replay "
            + csv
            + ":2: TIMESTAMP must be a UTC date and time such as 2023-11-16 18:15:46.6805900 (up"
            + " to 9 fractional digits, an offset such as +00:00 after them)",
        "--replay",
        csv.toString());
    Path none = dir.resolve("none.jsonl");
    assertUsage(
        "phasemeter load: --replay " + none + ": cannot read it (NoSuchFileException)",
        "--replay",
        none.toString());
  }

  @Test
  void aReplaySpeedThatStretchesTheTraceBeyondThirtyDaysIsOneLineAndExit2() throws Exception {
    Path file = dir.resolve("ten-seconds.jsonl");
    Files.writeString(file, row(0, 10) + "\n" + row(10_000, 10) + "\n");
    assertUsage(
        "phasemeter load: --replay-speed 0.000001 stretches the trace's 10 s to 116 days: more"
            + " than 30 (the limit); replay faster or fewer rows (--replay-limit)",
        "--replay",
        file.toString(),
        "--replay-speed",
        "1e-6");
  }

  static Stream<Arguments> badFlags() {
    return Stream.of(
        Arguments.of(
            List.of("--rate", "5"),
            "--replay is a load shape of its own (the trace's times are the arrivals): it cannot"
                + " go with --rate, --concurrency or --steps"),
        Arguments.of(
            List.of("--arrival", "constant"),
            "--arrival cannot go with --replay: the trace's own times are the arrivals"
                + " (--replay-speed scales them)"),
        Arguments.of(
            List.of("--profile", "doc-qa"),
            "--profile, --mix, --input-tokens and --output-tokens cannot go with --replay: the"
                + " trace gives every request's lengths"),
        Arguments.of(
            List.of("--api", "chat"),
            "--replay sends the trace's exact lengths as token ids on /v1/completions: it cannot"
                + " go with --api chat (whose lengths cannot be exact)"),
        Arguments.of(
            List.of("--prefix-tokens", "10", "--prefixes", "2"),
            "--prefix-tokens and --prefixes cannot go with --replay: the trace's hash_ids say what"
                + " is shared (--replay-prefixes distinct makes nothing shared)"),
        Arguments.of(
            List.of("--replay-speed", "0"),
            "--replay-speed must be a positive number (2 replays twice as fast), got 0.0"),
        Arguments.of(List.of("--replay-limit", "0"), "--replay-limit must be at least 1, got 0"),
        Arguments.of(
            List.of("--replay-format", "csv"),
            "--replay-format must be mooncake, azure or jsonl, got 'csv'"),
        Arguments.of(
            List.of("--replay-prefixes", "none"),
            "--replay-prefixes must be shared or distinct, got 'none'"));
  }

  @ParameterizedTest
  @MethodSource("badFlags")
  void aBadCombinationOfFlagsIsOneLineAndExit2(List<String> flags, String expected)
      throws Exception {
    Path file = dir.resolve("ok.jsonl");
    Files.writeString(file, row(0, 10) + "\n");
    List<String> args = new ArrayList<>(List.of("--replay", file.toString()));
    args.addAll(flags);
    assertUsage("phasemeter load: " + expected, args.toArray(String[]::new));
  }

  @Test
  void replayFlagsWithoutReplaySharedPrefixesOfFreeTextAndSearchWithReplayAreRefused()
      throws Exception {
    assertUsage(
        "phasemeter load: --replay-speed needs --replay FILE",
        "--rate",
        "5",
        "--duration",
        "1s",
        "--replay-speed",
        "2");
    assertUsage(
        "phasemeter load: --prefix-tokens needs token-id prompts: --api completions or embeddings"
            + " (chat and responses send free text, whose tokens are the server's)",
        "--rate",
        "5",
        "--duration",
        "1s",
        "--api",
        "chat",
        "--prefix-tokens",
        "10",
        "--prefixes",
        "2");
    assertUsage(
        "phasemeter load: --prefix-tokens 4096 must be below every input length: shape doc-qa"
            + " has 4096 tokens in",
        "--rate",
        "5",
        "--duration",
        "1s",
        "--prefix-tokens",
        "4096",
        "--prefixes",
        "2");
    Path file = dir.resolve("ok.jsonl");
    Files.writeString(file, row(0, 10) + "\n");
    StringWriter err = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(new StringWriter(), true), new PrintWriter(err, true))
            .execute(
                "search",
                "--url",
                "http://127.0.0.1:" + target.getAddress().getPort(),
                "--model",
                "m",
                "--slo",
                "ttft=1s",
                "--replay",
                file.toString(),
                "--out",
                dir.resolve("s").toString());
    assertThat(code).isEqualTo(LoadRun.USAGE);
    assertThat(err.toString())
        .isEqualTo(
            "phasemeter load search: --replay cannot go with search: a search sets its own rates"
                + " (replay a trace with load run --replay)"
                + System.lineSeparator());
    assertThat(received).hasValue(0);
  }

  private void assertUsage(String expected, String... extra) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "run",
                "--url",
                "http://127.0.0.1:" + target.getAddress().getPort(),
                "--model",
                "m",
                "--out",
                dir.resolve("out").toString()));
    args.addAll(List.of(extra));
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
            .execute(RunArgs.quiet(args));
    assertThat(code).as(out + "\n" + err).isEqualTo(LoadRun.USAGE);
    assertThat(err.toString()).isEqualTo(expected + System.lineSeparator());
    assertThat(received).as("requests at the target").hasValue(0);
    assertThat(Files.exists(dir.resolve("out"))).as("no report").isFalse();
  }
}
