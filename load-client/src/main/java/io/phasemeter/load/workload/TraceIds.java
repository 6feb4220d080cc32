package io.phasemeter.load.workload;

import java.security.SecureRandom;

/**
 * W3C trace ids for the requests of one generator: the generator's 64-bit instance id in the high
 * half, the request number in the low half. Ids of one generator never repeat, and generators with
 * different instance ids never collide, however many run at once.
 *
 * <p>The low half is the request number passed through a bijection of 64-bit values (SplitMix64's
 * finaliser): still unique per number, but it looks random. This matters downstream: the
 * OpenTelemetry ratio sampler (used by the proxy's export ratio) keeps a trace when the low 64 bits
 * of its id are below {@code ratio × 2^63}, so raw small counters would all be kept.
 *
 * <p>Immutable and thread-safe.
 */
public final class TraceIds {
  private static final char[] HEX = "0123456789abcdef".toCharArray();

  private final long instanceId;

  private TraceIds(long instanceId) {
    this.instanceId = instanceId;
  }

  /** A generator with a random non-zero instance id. */
  public static TraceIds random() {
    SecureRandom rng = new SecureRandom();
    long id;
    do {
      id = rng.nextLong();
    } while (id == 0);
    return new TraceIds(id);
  }

  /**
   * A generator with a given instance id (e.g. one per machine of a distributed run).
   *
   * @throws IllegalArgumentException when {@code instanceId} is 0 (it keeps every id non-zero)
   */
  public static TraceIds of(long instanceId) {
    if (instanceId == 0) {
      throw new IllegalArgumentException("trace id instance must not be 0");
    }
    return new TraceIds(instanceId);
  }

  /** The instance id in the high half of every trace id. */
  public long instanceId() {
    return instanceId;
  }

  /** The 32-hex trace id of request {@code seq}. */
  public String traceId(long seq) {
    return traceId(instanceId, Workload.mix64(seq));
  }

  /** A 32-hex trace id from its high and low halves, as {@link #traceId(long)} writes them. */
  public static String traceId(long high, long low) {
    char[] c = new char[32];
    hex16(high, c, 0);
    hex16(low, c, 16);
    return new String(c);
  }

  /** The 16-hex span id of request {@code seq}'s client span: non-zero. */
  public String spanId(long seq) {
    char[] c = new char[16];
    hex16(span(seq), c, 0);
    return new String(c);
  }

  /** {@code 00-<trace id>-<span id>-01}: version 0, sampled. */
  public String traceparent(long seq) {
    char[] c = new char[55];
    c[0] = '0';
    c[1] = '0';
    c[2] = '-';
    hex16(instanceId, c, 3);
    hex16(Workload.mix64(seq), c, 19);
    c[35] = '-';
    hex16(span(seq), c, 36);
    c[52] = '-';
    c[53] = '0';
    c[54] = '1';
    return new String(c);
  }

  private long span(long seq) {
    long span = Workload.mix64(instanceId ^ Workload.mix64(~seq));
    return span == 0 ? 1 : span;
  }

  /** {@code v} as 16 lowercase hex digits at {@code c[at]}: one per request, so no formatter. */
  private static void hex16(long v, char[] c, int at) {
    for (int i = 15; i >= 0; i--) {
      c[at + i] = HEX[(int) (v & 0xf)];
      v >>>= 4;
    }
  }
}
