package io.phasemeter.load.join;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.workload.TraceIds;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Pairs kept as columns come back equal to what was kept, in order, across chunks. */
class PairColumnsTest {

  private static ClientResult result(long seq, String traceId, String reason, String timing) {
    return new ClientResult(
        seq,
        traceId,
        seq % 2 == 0 ? "16-8" : "1k",
        (int) (seq % 3),
        seq * 1_000,
        seq * 1_000 + 7,
        -1,
        seq + 11,
        seq + 12,
        seq + 13,
        seq % 5 == 0 ? -1 : seq + 14,
        seq % 4,
        seq % 7 == 0 ? 502 : 200,
        seq % 7 == 0 ? ErrorClass.HTTP_5XX : reason != null ? ErrorClass.INVALID : ErrorClass.NONE,
        reason,
        16,
        8,
        seq % 6 == 0 ? -1 : 16,
        8,
        timing,
        seq % 13 == 0);
  }

  @Test
  void everyFieldComesBackAcrossChunkBoundaries() {
    PairColumns columns = new PairColumns();
    List<Pair> kept = new ArrayList<>();
    int n = 2 * PairColumns.CHUNK + 5;
    for (long seq = 1; seq <= n; seq++) {
      String traceId =
          seq % 1000 == 0
              ? "not-a-hex-trace-id-" + seq
              : TraceIds.traceId(0x0123456789abcdefL ^ seq, -seq);
      ClientResult c =
          result(
              seq,
              traceId,
              seq % 9 == 0 ? "usage differs " + seq : null,
              seq % 11 == 0 ? "total;dur=" + seq : null);
      ServerRecord s = seq % 3 == 0 ? JoinerTest.record(traceId, seq / 10.0) : null;
      columns.add(c, s);
      kept.add(new Pair(c, s));
    }
    assertThat(columns.size()).isEqualTo(n);
    assertThat(columns.pairs()).isEqualTo(kept);
  }

  @Test
  void onlyLowercaseThirtyTwoHexDigitsAreKeptAsNumbers() {
    assertThat(PairColumns.isHex32("0123456789abcdef0123456789abcdef")).isTrue();
    assertThat(PairColumns.isHex32("0123456789ABCDEF0123456789abcdef")).isFalse();
    assertThat(PairColumns.isHex32("0123456789abcdef0123456789abcde")).isFalse();
    assertThat(PairColumns.isHex32(null)).isFalse();
    assertThat(TraceIds.traceId(-1L, 0L)).isEqualTo("ffffffffffffffff0000000000000000");
  }
}
