package io.phasemeter.load.report;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.junit.jupiter.api.Test;

/**
 * {@code load merge} of instances that followed the same fleet: replicas summed by name, shares
 * taken again of the merged total, a replica up only when every instance saw it up.
 */
class ReplicaMergeTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static JsonNode join(String json) throws Exception {
    return JSON.readTree(json);
  }

  @Test
  void replicasAreSummedByNameAndTheirSharesTakenOfTheMergedTotal() throws Exception {
    ReplicaMerge m = new ReplicaMerge();
    m.add(
        join(
            "{\"joined\":30,\"feed_reconnects\":1,\"records_missed\":2,\"fetched\":2,\"replicas\":["
                + "{\"replica\":\"a:9464\",\"joined\":20,\"fetched\":2,\"share\":0.667,"
                + "\"feed_reconnects\":1,\"records_missed\":2,\"state\":\"up\"},"
                + "{\"replica\":\"b:9464\",\"joined\":10,\"fetched\":0,\"share\":0.333,"
                + "\"feed_reconnects\":0,\"records_missed\":0,\"state\":\"up\"}]}"));
    m.add(
        join(
            "{\"joined\":30,\"feed_reconnects\":0,\"records_missed\":0,\"fetched\":0,\"replicas\":["
                + "{\"replica\":\"b:9464\",\"joined\":20,\"fetched\":0,\"share\":0.667,"
                + "\"feed_reconnects\":0,\"records_missed\":0,\"state\":\"down\"},"
                + "{\"replica\":\"c:9464\",\"joined\":10,\"fetched\":0,\"share\":0.333,"
                + "\"feed_reconnects\":0,\"records_missed\":0,\"state\":\"up\"}]}"));
    ObjectNode out = JSON.createObjectNode();
    m.write(out);
    assertThat(out.get("feed_reconnects").asLong()).isEqualTo(1);
    assertThat(out.get("records_missed").asLong()).isEqualTo(2);
    assertThat(out.get("fetched").asLong()).isEqualTo(2);
    JsonNode r = out.get("replicas");
    assertThat(r).hasSize(3);
    assertThat(r.get(0).get("replica").asText()).isEqualTo("a:9464");
    assertThat(r.get(0).get("joined").asLong()).isEqualTo(20);
    assertThat(r.get(0).get("fetched").asLong()).isEqualTo(2);
    assertThat(r.get(1).get("joined").asLong()).isEqualTo(30);
    assertThat(r.get(1).get("share").asDouble()).isEqualTo(0.5);
    assertThat(r.get(1).get("state").asText()).as("down in one instance").isEqualTo("down");
    assertThat(r.get(2).get("state").asText()).isEqualTo("up");
  }

  @Test
  void runsWithoutAFeedAddNothing() throws Exception {
    ReplicaMerge m = new ReplicaMerge();
    m.add(join("{\"joined\":0,\"ok\":5}"));
    ObjectNode out = JSON.createObjectNode();
    m.write(out);
    assertThat(out.isEmpty()).isTrue();
  }
}
