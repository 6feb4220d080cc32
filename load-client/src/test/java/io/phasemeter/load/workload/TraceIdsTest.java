package io.phasemeter.load.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashSet;
import java.util.Set;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class TraceIdsTest {
  // W3C Trace Context, version 00: lowercase hex, trace id and parent id not all zero.
  private static final Pattern TRACEPARENT = Pattern.compile("00-([0-9a-f]{32})-([0-9a-f]{16})-01");

  @Test
  void idsAreUniqueWithinAndAcrossInstancesAndValid() {
    TraceIds a = TraceIds.random();
    TraceIds b = TraceIds.random();
    assertThat(a.instanceId()).isNotEqualTo(b.instanceId());
    Set<String> seen = new HashSet<>();
    for (long seq = 0; seq < 100_000; seq++) {
      for (TraceIds ids : new TraceIds[] {a, b}) {
        String tp = ids.traceparent(seq);
        var m = TRACEPARENT.matcher(tp);
        assertThat(m.matches()).as(tp).isTrue();
        assertThat(m.group(1)).isEqualTo(ids.traceId(seq)).isNotEqualTo("0".repeat(32));
        assertThat(m.group(2)).isNotEqualTo("0".repeat(16));
        assertThat(seen.add(m.group(1))).as("duplicate %s", m.group(1)).isTrue();
      }
    }
    assertThat(seen).hasSize(200_000);
  }

  @Test
  void instanceIdIsTheHighHalf() {
    TraceIds ids = TraceIds.of(7);
    assertThat(ids.traceId(0)).startsWith("0000000000000007").isNotEqualTo("0".repeat(32));
    assertThat(ids.traceId(5)).isEqualTo(TraceIds.of(7).traceId(5));
  }

  @Test
  void lowHalfIsSpreadSoRatioSamplersStillWork() {
    // OpenTelemetry's ratio sampler keeps a trace when |low 64 bits| < ratio * Long.MAX_VALUE:
    // about half of the ids must pass at ratio 0.5, not all of them.
    TraceIds ids = TraceIds.of(1);
    int kept = 0;
    for (long seq = 0; seq < 10_000; seq++) {
      long low = Long.parseUnsignedLong(ids.traceId(seq).substring(16), 16);
      if (Math.abs(low) < Long.MAX_VALUE / 2) {
        kept++;
      }
    }
    assertThat(kept).isBetween(4_500, 5_500);
  }

  @Test
  void digitsAreTheZeroPaddedLowercaseHexOfBothHalves() {
    java.util.SplittableRandom rng = new java.util.SplittableRandom(3);
    for (int i = 0; i < 10_000; i++) {
      long instance = i == 0 ? -1 : i == 1 ? 1 : rng.nextLong();
      long seq = i < 3 ? i : rng.nextLong();
      TraceIds ids = TraceIds.of(instance == 0 ? 1 : instance);
      String id = ids.traceId(seq);
      assertThat(id).isEqualTo(hex(ids.instanceId()) + hex(Workload.mix64(seq)));
      assertThat(ids.traceparent(seq)).isEqualTo("00-" + id + "-" + ids.spanId(seq) + "-01");
    }
  }

  private static String hex(long v) {
    return String.format("%016x", v);
  }

  @Test
  void instanceZeroIsRefused() {
    assertThatThrownBy(() -> TraceIds.of(0)).isInstanceOf(IllegalArgumentException.class);
  }
}
