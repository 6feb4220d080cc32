package io.phasemeter.load.workload.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The trace formats as read, and every bound at its limit. */
class TraceReaderTest {
  private static final long MS = 1_000_000L;
  private static final TraceReader.Limits LIMITS = TraceReader.Limits.DEFAULT;

  @TempDir Path dir;

  private static Trace read(
      Replay.Format format, long limit, TraceReader.Limits limits, String text) throws IOException {
    return new TraceReader("t", format, limit, limits)
        .read(new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8)));
  }

  private static Trace read(Replay.Format format, String text) throws IOException {
    return read(format, 0, LIMITS, text);
  }

  private static String error(Replay.Format format, TraceReader.Limits limits, String text) {
    try {
      read(format, 0, limits, text);
    } catch (IllegalArgumentException e) {
      assertThat(e.getMessage()).doesNotContain("\n");
      return e.getMessage();
    } catch (IOException e) {
      throw new AssertionError(e);
    }
    throw new AssertionError("no error for: " + text);
  }

  private static String error(Replay.Format format, String text) {
    return error(format, LIMITS, text);
  }

  @Test
  void mooncakeRowsKeepTheirTimesAfterTheFirstTheirLengthsAndHashIds() throws Exception {
    Trace t =
        read(
            null,
            "{\"timestamp\": 1000, \"input_length\": 655, \"output_length\": 52, \"hash_ids\":"
                + " [46, 47]}\n"
                + "\n"
                + "{\"timestamp\": 1000.25, \"input_length\": 1024, \"output_length\": 1,"
                + " \"extra\": {\"a\": [1]}, \"hash_ids\": [46, 9]}\r\n"
                + "{\"timestamp\": 11535, \"input_length\": 672.0, \"output_length\": 26}\n");
    assertThat(t.format()).isEqualTo(Replay.Format.MOONCAKE);
    assertThat(t.rows()).isEqualTo(3);
    assertThat(t.fileRows()).isEqualTo(3);
    assertThat(t.offsets()).containsExactly(0, 250_000, 10_535 * MS);
    assertThat(t.spanNanos()).isEqualTo(10_535 * MS);
    assertThat(t.input(2)).isEqualTo(672);
    assertThat(t.output(0)).isEqualTo(52);
    assertThat(t.hashIds(0)).isEqualTo(2);
    assertThat(t.hashId(1, 0)).isEqualTo(46);
    assertThat(t.hashId(1, 1)).isEqualTo(9);
    assertThat(t.hashIds(2)).isZero();
    // 46, 47, 9: interned once each.
    assertThat(t.distinctHashIds()).isEqualTo(3);
    assertThat(t.sessions()).isZero();
    assertThat(t.sessionId(0)).isNull();
    assertThat(t.turn(0)).isZero();
  }

  @Test
  void theFormatIsToldFromTheFirstRowOrTheCsvName() throws Exception {
    assertThat(read(null, "{\"offset_ms\": 0, \"input_length\": 1, \"output_length\": 1}").format())
        .isEqualTo(Replay.Format.JSONL);
    Path csv = dir.resolve("azure.csv");
    Files.writeString(csv, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n");
    Replayed r = new Replay(csv, null, 1, 0, Replay.Prefixes.SHARED).load();
    assertThat(r.trace().format()).isEqualTo(Replay.Format.AZURE);
    assertThat(r.sha256())
        .isEqualTo(
            HexFormat.of()
                .formatHex(
                    java.security.MessageDigest.getInstance("SHA-256")
                        .digest(Files.readAllBytes(csv))));
    assertThat(error(null, "\n{\"input_length\": 1, \"output_length\": 1}"))
        .isEqualTo(
            "--replay t:2: cannot tell the format: the first row must have timestamp (mooncake)"
                + " or offset_ms (jsonl); give --replay-format");
    assertThat(error(null, "a,b\n"))
        .isEqualTo(
            "--replay t:1: not JSON: cannot tell the format (a .csv file is read as azure; or"
                + " give --replay-format)");
  }

  @Test
  void azureTimesAreUtcToTheNanosecondAndRowsWithoutTokensAreSkippedAndCounted() throws Exception {
    Trace t =
        read(
            Replay.Format.AZURE,
            "Model,GeneratedTokens,TIMESTAMP,ContextTokens\n"
                + "x,52,2023-11-16 18:15:46.6805900,4808\n"
                + "x,0,2023-11-16 18:15:46.6805901,100\n"
                + "\"a, quoted\",10,2023-11-16T18:15:47.000000001Z,1\n"
                // 2024's form: six fractional digits and the offset from UTC.
                + "x,3,2023-11-16 18:15:47.500000+00:00,2\n"
                + "x,3,2023-11-16 19:15:48+01:00,2\n");
    assertThat(t.rows()).isEqualTo(4);
    assertThat(t.fileRows()).isEqualTo(5);
    assertThat(t.skipped()).isEqualTo(1);
    assertThat(t.input(0)).isEqualTo(4808);
    assertThat(t.output(0)).isEqualTo(52);
    // 47.000000001 − 46.68059 s, then 47.5 and (19:15:48 at UTC+1) 48 s.
    assertThat(t.offsets()).containsExactly(0, 319_410_001, 819_410_000, 1_319_410_000);
    assertThat(
            error(
                Replay.Format.AZURE,
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00+24:00,3,1\n"))
        .isEqualTo(
            "--replay t:2: TIMESTAMP must be a UTC date and time such as"
                + " 2023-11-16 18:15:46.6805900 (up to 9 fractional digits, an offset such as"
                + " +00:00 after them)");
    assertThat(
            error(
                Replay.Format.AZURE,
                "TIMESTAMP,ContextTokens,GeneratedTokens\n1970-01-01 00:30:00+01:00,3,1\n"))
        .isEqualTo("--replay t:2: TIMESTAMP must be in 1970 or later");
    assertThat(error(Replay.Format.AZURE, "TIMESTAMP,ContextTokens\n"))
        .isEqualTo(
            "--replay t:1: the header must name TIMESTAMP, ContextTokens and GeneratedTokens"
                + " (Azure's LLM inference trace; missing: GeneratedTokens)");
    assertThat(
            error(
                Replay.Format.AZURE,
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,-3,1\n"))
        .isEqualTo("--replay t:2: ContextTokens must be a whole number of 0 or more, got -3");
    assertThat(
            error(
                Replay.Format.AZURE,
                "TIMESTAMP,ContextTokens,GeneratedTokens\n16/11/2023 18:15:46,3,1\n"))
        .isEqualTo(
            "--replay t:2: TIMESTAMP must be a UTC date and time such as"
                + " 2023-11-16 18:15:46.6805900 (up to 9 fractional digits, an offset such as"
                + " +00:00 after them)");
    assertThat(error(Replay.Format.AZURE, "TIMESTAMP,ContextTokens,GeneratedTokens\n"))
        .isEqualTo("--replay t: the file has no rows (a header only)");
    assertThat(
            error(
                Replay.Format.AZURE,
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,0,1\n"))
        .isEqualTo("--replay t: no row to replay: every one of its 1 rows has a length of 0");
  }

  @Test
  void sessionsAreTurnsInFileOrderAndATurnWithoutBlocksExtendsThePrevious() throws Exception {
    Trace t =
        read(
            Replay.Format.JSONL,
            "{\"offset_ms\": 0, \"input_length\": 100, \"output_length\": 20, \"session\": \"a\"}\n"
                + "{\"offset_ms\": 5, \"input_length\": 50, \"output_length\": 5, \"session\": \"b\","
                + " \"prefix\": \"sys\", \"prefix_length\": 30}\n"
                + "{\"offset_ms\": 9, \"input_length\": 130, \"output_length\": 20, \"session\":"
                + " \"a\"}\n"
                + "{\"offset_ms\": 9, \"input_length\": 600, \"output_length\": 1, \"session\":"
                + " \"a\", \"hash_ids\": [7]}\n"
                + "{\"offset_ms\": 10, \"input_length\": 40, \"output_length\": 1, \"prefix\":"
                + " \"sys\", \"prefix_length\": 30}\n");
    assertThat(t.sessions()).isEqualTo(2);
    assertThat(t.sessionId(0)).isEqualTo("a");
    assertThat(t.turn(0)).isEqualTo(1);
    assertThat(t.turn(1)).isEqualTo(1);
    assertThat(t.turn(2)).isEqualTo(2);
    assertThat(t.extendsRow(2)).isZero();
    // A turn with hash ids says itself what it shares.
    assertThat(t.turn(3)).isEqualTo(3);
    assertThat(t.extendsRow(3)).isEqualTo(-1);
    assertThat(t.sessionId(4)).isNull();
    assertThat(t.prefix(1)).isEqualTo(t.prefix(4)).isZero();
    assertThat(t.prefixLength(4)).isEqualTo(30);
    assertThat(
            error(
                Replay.Format.JSONL,
                "{\"offset_ms\": 0, \"input_length\": 100, \"output_length\": 20, \"session\":"
                    + " \"a\"}\n"
                    + "{\"offset_ms\": 1, \"input_length\": 119, \"output_length\": 20, \"session\":"
                    + " \"a\"}\n"))
        .isEqualTo(
            "--replay t:2: input_length 119 is shorter than its session's previous turn with its"
                + " answer (line 1: 100 in + 20 out): a turn without hash_ids or prefix extends"
                + " the previous prompt and answer");
    assertThat(
            error(
                Replay.Format.JSONL,
                "{\"offset_ms\": 0, \"input_length\": 100, \"output_length\": 2, \"prefix\": \"p\","
                    + " \"prefix_length\": 10}\n"
                    + "{\"offset_ms\": 1, \"input_length\": 100, \"output_length\": 2, \"prefix\":"
                    + " \"p\", \"prefix_length\": 11}\n"))
        .isEqualTo(
            "--replay t:2: prefix_length 11 differs from line 1's 10 for the same prefix: one"
                + " prefix, one length");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"session_id\":"
                    + " \"caf\u00e9\"}"))
        .isEqualTo(
            "--replay t:1: session_id must be 1 to 128 printable ASCII characters (it is sent as a"
                + " header)");
  }

  @Test
  void theLimitKeepsTheFirstRowsAndOnlyCountsTheRest() throws Exception {
    String ok = "{\"timestamp\": %d, \"input_length\": 10, \"output_length\": 1}\n";
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < 5; i++) {
      sb.append(String.format(ok, i * 10));
    }
    Trace t = read(Replay.Format.MOONCAKE, 2, LIMITS, sb.toString());
    assertThat(t.rows()).isEqualTo(2);
    assertThat(t.fileRows()).isEqualTo(5);
    assertThat(t.spanNanos()).isEqualTo(10 * MS);
    // Past the limit nothing is parsed: rows out of time order, not JSON, or a line of any
    // length are counted (blank lines are not), never checked.
    sb.append("{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1}\n")
        .append("not json\n \t\r\n\n")
        .append("x".repeat(3 << 20))
        .append("\r\n  last without a newline");
    Trace rest = read(Replay.Format.MOONCAKE, 2, LIMITS, sb.toString());
    assertThat(rest.rows()).isEqualTo(2);
    assertThat(rest.fileRows()).isEqualTo(9);
    // The file's hash is of all of it all the same.
    Path file = Files.writeString(dir.resolve("limited.jsonl"), sb);
    assertThat(new Replay(file, null, 1, 2, Replay.Prefixes.SHARED).load().sha256())
        .isEqualTo(
            HexFormat.of()
                .formatHex(
                    java.security.MessageDigest.getInstance("SHA-256")
                        .digest(Files.readAllBytes(file))));
  }

  @Test
  void theRowCapCountsTheRowsKeptNotTheRowsOfTheFile() throws Exception {
    TraceReader.Limits three = new TraceReader.Limits(1 << 20, 3, 10, 10, 100, 1000);
    String ok = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n";
    String five = ok.repeat(5);
    assertThat(error(Replay.Format.MOONCAKE, three, five))
        .isEqualTo(
            "--replay t:4: more than 3 rows to replay (the limit): replay fewer (--replay-limit)");
    Trace t = read(Replay.Format.MOONCAKE, 3, three, five);
    assertThat(t.rows()).isEqualTo(3);
    assertThat(t.fileRows()).isEqualTo(5);
    // Azure rows without tokens are not kept: they do not count against the cap.
    String azure =
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
            + "2024-05-10 00:00:00.000001+00:00,0,5\n".repeat(4)
            + "2024-05-10 00:00:01+00:00,7,5\n".repeat(3);
    Trace a = read(Replay.Format.AZURE, 0, three, azure);
    assertThat(a.rows()).isEqualTo(3);
    assertThat(a.skipped()).isEqualTo(4);
  }

  @Test
  void aiperfsMultiTurnFormALaterTurnWithoutTimestampFollowsItsPreviousAfterItsDelay()
      throws Exception {
    Trace t =
        read(
            null,
            "{\"session_id\": \"s1\", \"timestamp\": 1000, \"input_length\": 300,"
                + " \"output_length\": 40}\n"
                + "{\"timestamp\": 1000.5, \"input_length\": 10, \"output_length\": 1}\n"
                + "{\"session_id\": \"s1\", \"delay\": 2.5, \"input_length\": 350,"
                + " \"output_length\": 20}\n"
                + "{\"session_id\": \"s1\", \"input_length\": 380, \"output_length\": 20,"
                + " \"delay\": null}\n"
                // A timestamp wins over a delay, as in AIPerf; one earlier than the previous
                // turn's time leaves once that turn has.
                + "{\"session_id\": \"s1\", \"timestamp\": 1001, \"delay\": 99,"
                + " \"input_length\": 400, \"output_length\": 20}\n"
                + "{\"session_id\": \"s1\", \"timestamp\": 9000, \"input_length\": 420,"
                + " \"output_length\": 1}\n");
    assertThat(t.format()).isEqualTo(Replay.Format.MOONCAKE);
    assertThat(t.sessions()).isEqualTo(1);
    // Times after the first: their own, or the earliest a later turn can leave.
    assertThat(t.offsets()).containsExactly(0, 500_000, 2_500_000, 2_500_000, 2_500_000, 8000 * MS);
    assertThat(t.delayNanos(0)).isEqualTo(-1);
    assertThat(t.delayNanos(1)).isEqualTo(-1);
    assertThat(t.delayNanos(2)).isEqualTo(2_500_000);
    assertThat(t.delayNanos(3)).isZero();
    assertThat(t.delayNanos(4)).isEqualTo(-1);
    assertThat(List.of(t.nextTurn(0), t.nextTurn(1), t.nextTurn(2), t.nextTurn(3), t.nextTurn(4)))
        .containsExactly(2, -1, 3, 4, 5);
    assertThat(t.nextTurn(5)).isEqualTo(-1);
    assertThat(t.turn(5)).isEqualTo(5);
    assertThat(t.extendsRow(2)).isZero();
    assertThat(t.spanNanos()).isEqualTo(8000 * MS);

    String first = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n";
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                first + "{\"session_id\": \"a\", \"input_length\": 10, \"output_length\": 1}"))
        .isEqualTo(
            "--replay t:2: timestamp is missing (only a later turn of a session, after its first,"
                + " may go without: it follows its previous turn's answer)");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                first + "{\"delay\": 5, \"input_length\": 10, \"output_length\": 1}"))
        .startsWith("--replay t:2: timestamp is missing (only a later turn");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"session_id\":"
                    + " \"a\"}\n{\"session_id\": \"a\", \"delay\": -1, \"input_length\": 20,"
                    + " \"output_length\": 1}"))
        .isEqualTo("--replay t:2: delay must be 0 or more, got -1");
    assertThat(
            error(
                Replay.Format.JSONL,
                "{\"offset_ms\": 0, \"input_length\": 10, \"output_length\": 1, \"session\":"
                    + " \"a\"}\n{\"session\": \"a\", \"input_length\": 20, \"output_length\":"
                    + " 1}"))
        .isEqualTo("--replay t:2: offset_ms is missing");
  }

  @Test
  void aLineOfExactlyTheLimitIsReadAndOneByteMoreIsRefused() throws Exception {
    String head = "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"pad\": \"";
    String tail = "\"}";
    int pad = LIMITS.maxLineBytes() - head.length() - tail.length();
    String atLimit = head + "x".repeat(pad) + tail;
    assertThat(atLimit.length()).isEqualTo(1 << 20);
    assertThat(read(Replay.Format.MOONCAKE, atLimit + "\r\n" + atLimit).rows()).isEqualTo(2);
    String over = head + "x".repeat(pad + 1) + tail;
    assertThat(error(Replay.Format.MOONCAKE, atLimit + "\n" + over + "\n"))
        .isEqualTo(
            "--replay t:2: the line is longer than 1,048,576 bytes (the limit): not a trace row");
  }

  /** A stream of one 2 GB line, generated as it is read: never in memory, never on disk. */
  private static final class HugeLine extends InputStream {
    private final long size = 2L << 30;
    long read;

    @Override
    public int read() {
      if (read >= size) {
        return -1;
      }
      return read++ == 0 ? '{' : 'x';
    }

    @Override
    public int read(byte[] b, int off, int len) {
      if (read >= size) {
        return -1;
      }
      int n = (int) Math.min(len, size - read);
      java.util.Arrays.fill(b, off, off + n, (byte) 'x');
      if (read == 0 && n > 0) {
        b[off] = '{';
      }
      read += n;
      return n;
    }
  }

  @Test
  void aTwoGigabyteLineIsRefusedAfterReadingAboutOneMebibyteOfIt() {
    HugeLine huge = new HugeLine();
    assertThatThrownBy(
            () -> new TraceReader("huge.jsonl", Replay.Format.MOONCAKE, 0, LIMITS).read(huge))
        .hasMessage(
            "--replay huge.jsonl:1: the line is longer than 1,048,576 bytes (the limit): not a"
                + " trace row");
    // The limit and at most one read buffer (64 KiB) past it.
    assertThat(huge.read).isGreaterThan(1 << 20).isLessThanOrEqualTo((1 << 20) + (64 << 10));
  }

  @Test
  void rowsSessionsPrefixesHashIdsAndLengthsAreBoundedAtTheirLimits() throws Exception {
    TraceReader.Limits small = new TraceReader.Limits(1 << 20, 3, 2, 2, 4, 1000);
    String row = "{\"offset_ms\": 0, \"input_length\": 1000, \"output_length\": 1000%s}\n";
    String three = String.format(row, "").repeat(3);
    assertThat(read(Replay.Format.JSONL, 0, small, three).rows()).isEqualTo(3);
    assertThat(error(Replay.Format.JSONL, small, three + String.format(row, "")))
        .isEqualTo(
            "--replay t:4: more than 3 rows to replay (the limit): replay fewer (--replay-limit)");

    String sessions =
        String.format(row, ", \"session\": \"a\"") + String.format(row, ", \"session\": \"b\"");
    assertThat(read(Replay.Format.JSONL, 0, small, sessions).sessions()).isEqualTo(2);
    assertThat(
            error(
                Replay.Format.JSONL, small, sessions + String.format(row, ", \"session\": \"c\"")))
        .isEqualTo("--replay t:3: more than 2 sessions (the limit)");

    String p = ", \"prefix\": \"%s\", \"prefix_length\": 5";
    String prefixes =
        String.format(row, String.format(p, "x")) + String.format(row, String.format(p, "y"));
    assertThat(read(Replay.Format.JSONL, 0, small, prefixes).rows()).isEqualTo(2);
    assertThat(
            error(Replay.Format.JSONL, small, prefixes + String.format(row, String.format(p, "z"))))
        .isEqualTo("--replay t:3: more than 2 prefixes (the limit)");

    String hashes = String.format(row, ", \"hash_ids\": [1, 2]").repeat(2);
    assertThat(read(Replay.Format.JSONL, 0, small, hashes).distinctHashIds()).isEqualTo(2);
    assertThat(
            error(Replay.Format.JSONL, small, hashes + String.format(row, ", \"hash_ids\": [3]")))
        .isEqualTo(
            "--replay t:3: the rows to replay name more than 4 hash ids together (the limit):"
                + " replay fewer (--replay-limit)");

    assertThat(
            error(
                Replay.Format.JSONL,
                small,
                "{\"offset_ms\": 0, \"input_length\": 1001, \"output_length\": 1}"))
        .isEqualTo("--replay t:1: input_length 1001 is above the limit of 1,000 tokens");
  }

  @Test
  void eachBadRowIsOneLineNamingTheLineAndTheField() {
    String a = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n";
    assertThat(error(Replay.Format.MOONCAKE, a + "{\"timestamp\": 5, \"output_length\": 1}"))
        .isEqualTo("--replay t:2: input_length is missing");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                "{\"timestamp\": 0, \"text_input\": \"hello\", \"output_length\": 1}"))
        .isEqualTo(
            "--replay t:1: input_length is missing (text_input and messages are not replayed:"
                + " the replay sends token ids of input_length)");
    assertThat(error(Replay.Format.MOONCAKE, "{\"input_length\": 10, \"output_length\": 1}"))
        .isEqualTo("--replay t:1: timestamp is missing");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                "{\"timestamp\": \"0\", \"input_length\": 10, \"output_length\": 1}"))
        .isEqualTo("--replay t:1: timestamp must be a number of milliseconds, got a string");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                "{\"timestamp\": -1, \"input_length\": 10, \"output_length\": 1}"))
        .isEqualTo("--replay t:1: timestamp must be 0 or more, got -1");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 1}"))
        .isEqualTo("--replay t:1: input_length must be at least 1, got 0");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": -4}"))
        .isEqualTo("--replay t:1: output_length must be at least 1, got -4");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                "{\"timestamp\": 0, \"input_length\": 10.5, \"output_length\": 1}"))
        .isEqualTo("--replay t:1: input_length must be a whole number, got 10.5");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                "{\"timestamp\": 0, \"input_length\": 1025, \"output_length\": 1, \"hash_ids\":"
                    + " [1, 2, 3, 4]}"))
        .isEqualTo(
            "--replay t:1: hash_ids names 4 blocks, but input_length 1025 fills at most 3"
                + " (512-token blocks)");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1,"
                    + " -2]}"))
        .isEqualTo(
            "--replay t:1: hash_ids must be an array of whole numbers of 0 or more (below 2^63),"
                + " got one out of that range at position 2");
    assertThat(error(Replay.Format.MOONCAKE, a + "{\"timestamp\": 0, \"input_length\": 1"))
        .isEqualTo("--replay t:2: not JSON (at column 35)");
    assertThat(error(Replay.Format.MOONCAKE, a + "[1, 2]"))
        .isEqualTo("--replay t:2: not a JSON object (one object a line)");
    assertThat(error(Replay.Format.MOONCAKE, a + a.trim() + " {}"))
        .isEqualTo("--replay t:2: not one JSON object (one object a line)");
    assertThat(
            error(
                Replay.Format.MOONCAKE,
                "{\"timestamp\": 0, \"timestamp\": 1, \"input_length\": 1, \"output_length\": 1}"))
        .startsWith("--replay t:1: a field appears twice (at column");
    assertThat(error(Replay.Format.MOONCAKE, "  \n\n"))
        .isEqualTo("--replay t: the file has no rows");
  }

  @Test
  void bytesThatAreNotUtf8AreRefusedAndAByteOrderMarkIsNot() throws Exception {
    byte[] good =
        "\uFEFF{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n"
            .getBytes(StandardCharsets.UTF_8);
    assertThat(new TraceReader("t", null, 0, LIMITS).read(new ByteArrayInputStream(good)).format())
        .isEqualTo(Replay.Format.MOONCAKE);
    byte[] bad =
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"x\": \"\u00e9\"}"
            .getBytes(StandardCharsets.ISO_8859_1);
    assertThatThrownBy(
            () ->
                new TraceReader("t", null, 0, LIMITS)
                    .read(new ByteArrayInputStream(concat(good, bad))))
        .hasMessage("--replay t:2: not UTF-8 text");
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] c = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, c, a.length, b.length);
    return c;
  }
}
