package io.phasemeter.proxy.upstream;

import java.nio.charset.StandardCharsets;

/**
 * Reads the three gauges {@code routing: engine_load} scores an engine by from vLLM's Prometheus
 * text ({@code GET /metrics}): {@code vllm:num_requests_waiting}, {@code vllm:num_requests_running}
 * and {@code vllm:kv_cache_usage_perc} (vLLM before its V1 engine: {@code
 * vllm:gpu_cache_usage_perc}). Every other line is skipped by its first bytes, so a body of
 * histograms costs a scan, not a parse.
 *
 * <p>One server may expose several series of a gauge: one per model name, or one per engine of a
 * data-parallel server ({@code engine="0"}, {@code engine="1"}). Waiting and running are summed
 * over them (requests are requests, whichever engine holds them); KV-cache use, a fraction of each
 * engine's own cache, is the largest of them, so it stays within 0..1 and reports the engine
 * nearest to full.
 */
public final class EngineMetricsText {
  private static final byte[] PREFIX = "vllm:".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] WAITING = "num_requests_waiting".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] RUNNING = "num_requests_running".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] KV = "kv_cache_usage_perc".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] GPU_KV = "gpu_cache_usage_perc".getBytes(StandardCharsets.US_ASCII);

  private EngineMetricsText() {}

  /**
   * What one scrape said: requests waiting and running (sums over series) and KV-cache use (0..1,
   * the largest over series; NaN when the engine exposes neither KV gauge).
   */
  public record Reading(double waiting, double running, double kvCacheUsage) {
    public Reading {
      if (!(waiting >= 0) || !(running >= 0)) {
        throw new IllegalArgumentException(
            "waiting and running must be counts (got " + waiting + ", " + running + ")");
      }
      if (!Double.isNaN(kvCacheUsage) && !(kvCacheUsage >= 0)) {
        throw new IllegalArgumentException(
            "kv_cache_usage must be 0..1 (got " + kvCacheUsage + ")");
      }
      // vLLM reports a fraction; clamp what a rounding or another engine says past 1.
      kvCacheUsage = Double.isNaN(kvCacheUsage) ? kvCacheUsage : Math.min(1.0, kvCacheUsage);
    }
  }

  /**
   * Parses {@code body} (Prometheus text format 0.0.4, or OpenMetrics text: both lines look the
   * same for gauges).
   *
   * @throws IllegalArgumentException when the body has no {@code vllm:num_requests_waiting} or no
   *     {@code vllm:num_requests_running} series (not a vLLM engine's metrics), or a value of one
   *     of the three gauges is not a non-negative number
   */
  public static Reading parse(byte[] body) {
    return parse(body, 0, body.length);
  }

  /** As {@link #parse(byte[])}, over {@code body[from, to)}. */
  public static Reading parse(byte[] body, int from, int to) {
    double waiting = 0;
    double running = 0;
    double kv = Double.NaN;
    double gpuKv = Double.NaN;
    boolean sawWaiting = false;
    boolean sawRunning = false;
    int i = from;
    while (i < to) {
      int end = i;
      while (end < to && body[end] != '\n') {
        end++;
      }
      int lineEnd = end > i && body[end - 1] == '\r' ? end - 1 : end;
      if (startsWith(body, i, lineEnd, PREFIX)) {
        int name = i + PREFIX.length;
        int which = metric(body, name, lineEnd);
        if (which != NONE) {
          double v = value(body, name + length(which), lineEnd);
          switch (which) {
            case W -> {
              waiting += v;
              sawWaiting = true;
            }
            case R -> {
              running += v;
              sawRunning = true;
            }
            case K -> kv = Double.isNaN(kv) ? v : Math.max(kv, v);
            default -> gpuKv = Double.isNaN(gpuKv) ? v : Math.max(gpuKv, v);
          }
        }
      }
      i = end + 1;
    }
    if (!sawWaiting || !sawRunning) {
      throw new IllegalArgumentException(
          "not a vLLM engine's metrics: no vllm:num_requests_"
              + (sawWaiting ? "running" : "waiting")
              + " series");
    }
    return new Reading(waiting, running, Double.isNaN(kv) ? gpuKv : kv);
  }

  private static final int NONE = -1;
  private static final int W = 0;
  private static final int R = 1;
  private static final int K = 2;
  private static final int G = 3;

  private static int length(int which) {
    return switch (which) {
      case W -> WAITING.length;
      case R -> RUNNING.length;
      case K -> KV.length;
      default -> GPU_KV.length;
    };
  }

  /** Which of the gauges the name at {@code at} is: the whole name, followed by '{' or a blank. */
  private static int metric(byte[] b, int at, int end) {
    if (nameIs(b, at, end, WAITING)) {
      return W;
    }
    if (nameIs(b, at, end, RUNNING)) {
      return R;
    }
    if (nameIs(b, at, end, KV)) {
      return K;
    }
    if (nameIs(b, at, end, GPU_KV)) {
      return G;
    }
    return NONE;
  }

  private static boolean nameIs(byte[] b, int at, int end, byte[] name) {
    if (!startsWith(b, at, end, name)) {
      return false;
    }
    int next = at + name.length;
    // vllm:num_requests_waiting_by_reason, a histogram's _bucket: another metric.
    return next < end && (b[next] == '{' || b[next] == ' ' || b[next] == '\t');
  }

  /** The sample value after the name at {@code at}: past the label set (quotes honoured). */
  private static double value(byte[] b, int at, int end) {
    int i = at;
    if (i < end && b[i] == '{') {
      boolean quoted = false;
      for (i++; i < end; i++) {
        byte c = b[i];
        if (quoted) {
          if (c == '\\') {
            i++; // an escaped quote or backslash inside a label value
          } else if (c == '"') {
            quoted = false;
          }
        } else if (c == '"') {
          quoted = true;
        } else if (c == '}') {
          break;
        }
      }
      if (i >= end) {
        throw new IllegalArgumentException("a vLLM gauge's label set is not closed");
      }
      i++;
    }
    while (i < end && (b[i] == ' ' || b[i] == '\t')) {
      i++;
    }
    int start = i;
    while (i < end && b[i] != ' ' && b[i] != '\t') {
      i++; // a timestamp may follow the value
    }
    String text = new String(b, start, i - start, StandardCharsets.US_ASCII);
    double v;
    try {
      v = Double.parseDouble(text);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("a vLLM gauge's value is not a number: '" + text + "'");
    }
    if (!(v >= 0) || Double.isInfinite(v)) {
      throw new IllegalArgumentException("a vLLM gauge's value is not a count or share: " + text);
    }
    return v;
  }

  private static boolean startsWith(byte[] b, int at, int end, byte[] prefix) {
    if (end - at < prefix.length) {
      return false;
    }
    for (int k = 0; k < prefix.length; k++) {
      if (b[at + k] != prefix[k]) {
        return false;
      }
    }
    return true;
  }
}
