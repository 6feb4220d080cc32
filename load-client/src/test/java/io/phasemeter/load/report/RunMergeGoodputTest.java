package io.phasemeter.load.report;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.MissingNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@code load merge}'s goodput from hand-written summaries: the sums known in advance. */
class RunMergeGoodputTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static JsonNode goodput(String objectives, String source, long sent, long good)
      throws Exception {
    return JSON.readTree(
        "{\"objectives_ms\":"
            + objectives
            + ",\"source\":\""
            + source
            + "\",\"sent\":"
            + sent
            + ",\"good\":"
            + good
            + ",\"failed\":2,\"judged\":"
            + (sent - 1)
            + ",\"attainment\":"
            + ((double) good / sent)
            + ",\"request_goodput\":"
            + good / 10.0
            + ",\"output_token_goodput\":"
            + good * 5.0
            + ",\"missed\":{\"client_total\":3,\"queue\":1},"
            + "\"first_missed\":{\"client_total\":3,\"queue\":1,\"error\":2},"
            + "\"unjudged\":{\"queue\":1}}");
  }

  private static ObjectNode merge(List<JsonNode> goodputs) {
    ObjectNode root = JsonNodeFactory.instance.objectNode();
    RunMerge.mergeGoodput(root, goodputs);
    return root;
  }

  private static final String E2EL_QUEUE = "{\"client_total\":600.0,\"queue\":250.0}";

  @Test
  void theSameObjectivesAreSummedAndAttainmentTakenOverTheSummedRequestsSent() throws Exception {
    ObjectNode r =
        merge(
            List.of(
                goodput(E2EL_QUEUE, "--slo", 40, 30),
                goodput(E2EL_QUEUE, "budgets: chat", 60, 30)));
    JsonNode g = r.path("goodput");
    assertThat(r.has("goodput_note")).isFalse();
    assertThat(g.path("objectives_ms").toString()).isEqualTo(E2EL_QUEUE);
    assertThat(g.path("source").asText()).as("the sources differ").isEqualTo("merged");
    assertThat(g.path("sent").asLong()).isEqualTo(100);
    assertThat(g.path("good").asLong()).isEqualTo(60);
    assertThat(g.path("failed").asLong()).isEqualTo(4);
    assertThat(g.path("judged").asLong()).isEqualTo(98);
    // 60 / 100, not the mean of 0.75 and 0.5.
    assertThat(g.path("attainment").asDouble()).isEqualTo(0.6);
    // Summed as achieved_rate: the instances ran at the same time.
    assertThat(g.path("request_goodput").asDouble()).isEqualTo(6.0);
    assertThat(g.path("output_token_goodput").asDouble()).isEqualTo(300.0);
    assertThat(g.path("missed").toString()).isEqualTo("{\"client_total\":6,\"queue\":2}");
    assertThat(g.path("first_missed").toString())
        .isEqualTo("{\"client_total\":6,\"queue\":2,\"error\":4}");
    assertThat(g.path("unjudged").toString()).isEqualTo("{\"queue\":2}");

    JsonNode same =
        merge(List.of(goodput(E2EL_QUEUE, "--slo", 40, 30), goodput(E2EL_QUEUE, "--slo", 60, 30)))
            .path("goodput");
    assertThat(same.path("source").asText()).isEqualTo("--slo");
  }

  @Test
  void theSameObjectivesInAnotherOrderAreNotMerged() throws Exception {
    // The first missed objective depends on the order: another definition.
    ObjectNode r =
        merge(
            List.of(
                goodput(E2EL_QUEUE, "--slo", 40, 30),
                goodput("{\"queue\":250.0,\"client_total\":600.0}", "--slo", 60, 30)));
    assertThat(r.path("goodput").isNull()).isTrue();
    assertThat(r.path("goodput_note").asText()).startsWith("not merged: the runs' goodput");
  }

  @Test
  void oneRunWithoutObjectivesLeavesGoodputNullWithANoteAndNoneWithout() throws Exception {
    ObjectNode one = merge(List.of(goodput(E2EL_QUEUE, "--slo", 40, 30), NullNode.getInstance()));
    assertThat(one.path("goodput").isNull()).isTrue();
    assertThat(one.path("goodput_note").asText()).contains("only some runs had any");
    ObjectNode none = merge(List.of(NullNode.getInstance(), MissingNode.getInstance()));
    assertThat(none.path("goodput").isNull()).isTrue();
    assertThat(none.has("goodput_note")).isFalse();
  }
}
