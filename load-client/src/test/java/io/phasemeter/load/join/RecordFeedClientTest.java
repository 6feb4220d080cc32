package io.phasemeter.load.join;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The feed's records are read by their published schema (v1), not by proxy classes. */
class RecordFeedClientTest {

  @Test
  void parsesAV1Record() {
    RecordFeedClient c =
        new RecordFeedClient(null, java.net.URI.create("http://127.0.0.1:1"), null);
    ServerRecord r =
        c.parse(
            "{\"v\":1,\"trace_id\":\"0000000000000007000000000000012f\",\"span_id\":\"aa\",\"model\":\"m\",\"pool\":\"p\","
                + "\"stream\":true,\"status\":200,\"outcome\":\"success\",\"root_ms\":1691.2,\"server_ttft_ms\":640.3,"
                + "\"phases_ms\":{\"auth\":0.1,\"receive\":0.2,\"prepare\":0.3,\"route\":0.01,\"queue\":428.0,\"generation\":1210.0,\"write\":0.4},"
                + "\"unattributed_ms\":52.2,\"tpot_ms\":19.1,\"tokens\":{\"input\":4096,\"output\":300},\"finish_reason\":\"length\",\"sampled\":false}");
    assertThat(r.traceId()).isEqualTo("0000000000000007000000000000012f");
    assertThat(r.rootMs()).isEqualTo(1691.2);
    assertThat(r.serverTtftMs()).isEqualTo(640.3);
    assertThat(r.phasesMs()).containsEntry("queue", 428.0);
    assertThat(r.gatewayMs()).isCloseTo(0.41, org.assertj.core.data.Offset.offset(1e-9));
    assertThat(r.outputTokens()).isEqualTo(300);
    assertThat(r.sampled()).isFalse();
  }

  @Test
  void otherEventsAreCountedNotFatal() {
    RecordFeedClient c =
        new RecordFeedClient(null, java.net.URI.create("http://127.0.0.1:1"), null);
    assertThat(c.parse("{not json")).isNull();
    assertThat(c.parse("{\"v\":2,\"trace_id\":\"x\"}")).isNull();
    assertThat(c.parse("{\"v\":1,\"server_ttft_ms\":null}")).isNull();
    assertThat(c.malformed()).isEqualTo(3);
    ServerRecord nulls =
        c.parse(
            "{\"v\":1,\"trace_id\":\"t\",\"root_ms\":1.0,\"server_ttft_ms\":null,\"tokens\":{\"input\":null,\"output\":null}}");
    assertThat(nulls.serverTtftMs()).isNull();
    assertThat(nulls.inputTokens()).isNull();
  }

  @Test
  void operationAndRouteAreReadWhenPresentAndNullWhenAbsent() {
    RecordFeedClient c =
        new RecordFeedClient(null, java.net.URI.create("http://127.0.0.1:1"), null);
    ServerRecord old =
        c.parse("{\"v\":1,\"trace_id\":\"t\",\"route\":\"/v1/completions\",\"root_ms\":1.0}");
    assertThat(old.operation()).isNull();
    assertThat(old.route()).isEqualTo("/v1/completions");

    // An embeddings record: no TTFT, no TPOT, no output tokens.
    ServerRecord embeddings =
        c.parse(
            "{\"v\":1,\"trace_id\":\"0000000000000007000000000000012f\",\"model\":\"m\","
                + "\"pool\":\"p\",\"route\":\"/v1/embeddings\",\"operation\":\"embeddings\","
                + "\"stream\":false,\"status\":200,\"outcome\":\"success\",\"root_ms\":12.5,"
                + "\"server_ttft_ms\":null,\"phases_ms\":{\"auth\":0.1,\"receive\":0.2,"
                + "\"prepare\":0.3,\"route\":0.01,\"queue\":0.1,\"generation\":11.0,"
                + "\"write\":0.4},\"gateway_ms\":0.41,\"unattributed_ms\":0.2,\"tpot_ms\":null,"
                + "\"tokens\":{\"input\":1024,\"output\":null},\"finish_reason\":null,"
                + "\"sampled\":true}");
    assertThat(embeddings.operation()).isEqualTo("embeddings");
    assertThat(embeddings.route()).isEqualTo("/v1/embeddings");
    assertThat(embeddings.serverTtftMs()).isNull();
    assertThat(embeddings.tpotMs()).isNull();
    assertThat(embeddings.inputTokens()).isEqualTo(1024);
    assertThat(embeddings.outputTokens()).isNull();
    assertThat(embeddings.rootMs()).isEqualTo(12.5);

    ServerRecord responses =
        c.parse(
            "{\"v\":1,\"trace_id\":\"t\",\"route\":\"/v1/responses\","
                + "\"operation\":\"responses\",\"root_ms\":100.0,\"server_ttft_ms\":20.0,"
                + "\"tpot_ms\":5.0}");
    assertThat(responses.operation()).isEqualTo("responses");
    assertThat(responses.serverTtftMs()).isEqualTo(20.0);
    assertThat(c.malformed()).isZero();
  }
}
