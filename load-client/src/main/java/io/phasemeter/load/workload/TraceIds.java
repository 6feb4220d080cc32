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
    return hex16(instanceId) + hex16(Workload.mix64(seq));
  }

  /** The 16-hex span id of request {@code seq}'s client span: non-zero. */
  public String spanId(long seq) {
    long span = Workload.mix64(instanceId ^ Workload.mix64(~seq));
    return hex16(span == 0 ? 1 : span);
  }

  /** {@code 00-<trace id>-<span id>-01}: version 0, sampled. */
  public String traceparent(long seq) {
    return "00-" + traceId(seq) + "-" + spanId(seq) + "-01";
  }

  private static String hex16(long v) {
    String s = Long.toHexString(v);
    return "0".repeat(16 - s.length()) + s;
  }
}
