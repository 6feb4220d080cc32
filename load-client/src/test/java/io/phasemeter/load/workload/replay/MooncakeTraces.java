package io.phasemeter.load.workload.replay;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Writes synthetic traces in Mooncake's format for tests (no real trace is downloaded): {@code
 * rows} requests over {@code spanMs}, the first at 0 and the last at {@code spanMs}, each starting
 * with one of {@code prefixes} shared prefixes of {@code prefixBlocks} 512-token blocks (hash ids
 * {@code k × prefixBlocks …}), then blocks of its own (hash ids from {@code prefixes ×
 * prefixBlocks} up, never repeated) and a partial last block. Deterministic from {@code seed}.
 */
public final class MooncakeTraces {
  /**
   * The shape of a synthetic trace.
   *
   * @param rows requests
   * @param spanMs the last request's timestamp (the first is at 0)
   * @param prefixes shared prefixes (at least 1)
   * @param prefixBlocks 512-token blocks of each shared prefix
   * @param ownBlocks most whole blocks of its own a request adds after its prefix (0 or more)
   * @param maxOutput output lengths are drawn from 1 to this
   * @param seed seed of the draws
   */
  public record Shape(
      int rows,
      long spanMs,
      int prefixes,
      int prefixBlocks,
      int ownBlocks,
      int maxOutput,
      long seed) {}

  /** One row as written. */
  public record Row(long timestampMs, int inputLength, int outputLength, long[] hashIds) {
    /** The row as a Mooncake JSON line. */
    public String json() {
      StringBuilder sb =
          new StringBuilder("{\"timestamp\": ")
              .append(timestampMs)
              .append(", \"input_length\": ")
              .append(inputLength)
              .append(", \"output_length\": ")
              .append(outputLength)
              .append(", \"hash_ids\": [");
      for (int i = 0; i < hashIds.length; i++) {
        sb.append(i > 0 ? ", " : "").append(hashIds[i]);
      }
      return sb.append("]}").toString();
    }
  }

  private MooncakeTraces() {}

  /** The rows of {@code shape}, in time order. */
  public static List<Row> rows(Shape shape) {
    SplittableRandom rng = new SplittableRandom(shape.seed());
    long[] times = new long[shape.rows()];
    for (int i = 1; i < times.length - 1; i++) {
      times[i] = rng.nextLong(shape.spanMs() + 1);
    }
    if (times.length > 1) {
      times[times.length - 1] = shape.spanMs();
    }
    Arrays.sort(times);
    long nextOwn = (long) shape.prefixes() * shape.prefixBlocks();
    List<Row> rows = new ArrayList<>(shape.rows());
    for (int i = 0; i < shape.rows(); i++) {
      int k = rng.nextInt(shape.prefixes());
      int own = shape.ownBlocks() == 0 ? 0 : rng.nextInt(shape.ownBlocks() + 1);
      // A partial block at the end: 1 to 511 tokens unique to the row.
      int tail = 1 + rng.nextInt(Trace.BLOCK_TOKENS - 1);
      int blocks = shape.prefixBlocks() + own + 1;
      long[] ids = new long[blocks];
      for (int b = 0; b < shape.prefixBlocks(); b++) {
        ids[b] = (long) k * shape.prefixBlocks() + b;
      }
      for (int b = shape.prefixBlocks(); b < blocks; b++) {
        ids[b] = nextOwn++;
      }
      int input = (shape.prefixBlocks() + own) * Trace.BLOCK_TOKENS + tail;
      int output = 1 + rng.nextInt(shape.maxOutput());
      rows.add(new Row(times[i], input, output, ids));
    }
    return rows;
  }

  /** Writes {@code shape}'s rows to {@code file}, one JSON object a line. */
  public static Path write(Path file, Shape shape) throws IOException {
    List<String> lines = rows(shape).stream().map(Row::json).toList();
    Files.write(file, lines, StandardCharsets.UTF_8);
    return file;
  }
}
