package io.phasemeter.load.report;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.RecordFeedClient;
import io.phasemeter.load.join.ServerRecord;
import org.junit.jupiter.api.Test;

/**
 * The engine's split of generation as the load client reads it from the record feed: rows for
 * {@code engine_queue}, {@code prefill} and {@code decode}, and the engine coverage; an external
 * pool's generation is never split.
 */
class EngineSplitStatsTest {
  private final RecordFeedClient feed =
      new RecordFeedClient(null, java.net.URI.create("http://127.0.0.1:1"), null);

  private ServerRecord record(long seq, String engine, boolean external) {
    String phases =
        "\"phases_ms\":{\"auth\":0.1,\"prepare\":0.3,\"route\":0.01,\"queue\":0.02,\"generation\":1210.0,\"write\":0.4"
            + (engine.equals("matched")
                ? ",\"engine_queue\":800.0,\"prefill\":10.0,\"decode\":390.0}"
                : "}");
    String tail =
        switch (engine) {
          case "matched" -> ",\"engine_status\":\"matched\",\"engine\":{\"e2e_ms\":1200.0}";
          case "missing" -> ",\"engine_status\":\"missing\",\"engine\":null";
          default -> "";
        };
    return feed.parse(
        "{\"v\":1,\"trace_id\":\""
            + Fixtures.traceId(seq)
            + "\",\"status\":200,\"outcome\":\"success\",\"root_ms\":1211.0,"
            + phases
            + (external ? ",\"external\":true" : "")
            + tail
            + "}");
  }

  private static Pair pair(long seq, ServerRecord s) {
    return new Pair(Fixtures.client(seq, 0, 0, 1212, 300, ErrorClass.NONE), s);
  }

  @Test
  void enginePhasesAndCoverageComeFromTheRecords() {
    PhaseStats stats = new PhaseStats();
    stats.add(pair(1, record(1, "matched", false)));
    stats.add(pair(2, record(2, "matched", false)));
    stats.add(pair(3, record(3, "missing", false)));
    // Neither waits for an engine span: engine spans off, and an external provider.
    stats.add(pair(4, record(4, "none", false)));
    stats.add(pair(5, record(5, "matched", true)));

    assertThat(record(1, "matched", false).engineStatus()).isEqualTo("matched");
    assertThat(record(5, "matched", true).external()).isTrue();
    assertThat(stats.summary("engine_queue").count()).isEqualTo(2);
    assertThat(stats.summary("engine_queue").max())
        .isCloseTo(800.0, org.assertj.core.data.Offset.offset(8.0));
    assertThat(stats.summary("decode").count()).isEqualTo(2);
    assertThat(stats.summary("generation").count()).as("generation stays as measured").isEqualTo(5);
    assertThat(stats.engineCoverage())
        .isCloseTo(2.0 / 3, org.assertj.core.data.Offset.offset(1e-9));
    PhaseStats merged = new PhaseStats();
    merged.merge(stats);
    assertThat(merged.engineCoverage()).isEqualTo(stats.engineCoverage());
  }

  @Test
  void withoutEngineSpansCoverageIsUnknownAndNoRowAppears() {
    PhaseStats stats = new PhaseStats();
    stats.add(pair(1, record(1, "none", false)));
    assertThat(stats.engineCoverage()).isNaN();
    assertThat(stats.summary("engine_queue").count()).isZero();
  }
}
