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

  @Test
  void theProxysVerdictsAndTenantsAreSummedOverTheRunsThatHaveThem() throws Exception {
    ObjectNode a = (ObjectNode) goodput(E2EL_QUEUE, "--slo", 40, 30);
    a.set(
        "server",
        JSON.readTree(
            "{\"judged\":30,\"met\":27,\"attainment\":0.9,\"agree\":25,"
                + "\"client_good_server_missed\":2,\"client_missed_server_met\":3,"
                + "\"causes\":{\"envelope\":3,\"limits\":2},"
                + "\"disagreements\":[{\"trace_id\":\"a1\"}]}"));
    a.set(
        "by_tenant",
        JSON.readTree(
            "{\"team-a\":{\"sent\":20,\"good\":18,\"server_judged\":20,\"server_met\":19},"
                + "\"other\":{\"sent\":10,\"good\":5,\"server_judged\":10,\"server_met\":8}}"));
    ObjectNode b = (ObjectNode) goodput(E2EL_QUEUE, "--slo", 60, 30);
    b.set(
        "server",
        JSON.readTree(
            "{\"judged\":10,\"met\":5,\"agree\":9,\"client_good_server_missed\":1,"
                + "\"client_missed_server_met\":0,\"causes\":{\"one_side\":1},"
                + "\"disagreements\":[{\"trace_id\":\"b1\"}]}"));
    b.set(
        "by_tenant",
        JSON.readTree(
            "{\"team-a\":{\"sent\":50,\"good\":25,\"server_judged\":10,\"server_met\":5}}"));
    // A run whose records carried neither (an older proxy) adds nothing to either.
    JsonNode g = merge(List.of(a, b, goodput(E2EL_QUEUE, "--slo", 10, 10))).path("goodput");
    JsonNode s = g.path("server");
    assertThat(s.path("judged").asLong()).isEqualTo(40);
    assertThat(s.path("met").asLong()).isEqualTo(32);
    assertThat(s.path("attainment").asDouble()).isEqualTo(0.8);
    assertThat(s.path("agree").asLong()).isEqualTo(34);
    assertThat(s.path("client_good_server_missed").asLong()).isEqualTo(3);
    assertThat(s.path("client_missed_server_met").asLong()).isEqualTo(3);
    assertThat(s.path("causes").toString())
        .isEqualTo("{\"envelope\":3,\"limits\":2,\"one_side\":1}");
    assertThat(s.path("disagreements").findValuesAsText("trace_id")).containsExactly("a1", "b1");
    JsonNode t = g.path("by_tenant");
    assertThat(t.at("/team-a/sent").asLong()).isEqualTo(70);
    assertThat(t.at("/team-a/attainment").asDouble()).isEqualTo(43.0 / 70);
    assertThat(t.at("/team-a/server_attainment").asDouble()).isEqualTo(24.0 / 30);
    assertThat(t.at("/other/sent").asLong()).isEqualTo(10);
    assertThat(g.path("by_tenant_unattributed").asLong()).isEqualTo(110 - 80);

    JsonNode none =
        merge(List.of(goodput(E2EL_QUEUE, "--slo", 10, 10), goodput(E2EL_QUEUE, "--slo", 10, 10)))
            .path("goodput");
    assertThat(none.has("server")).isFalse();
    assertThat(none.has("by_tenant")).isFalse();
  }
}
