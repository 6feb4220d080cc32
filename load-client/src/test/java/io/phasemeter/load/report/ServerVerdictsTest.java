package io.phasemeter.load.report;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.join.ServerSlo;
import io.phasemeter.load.schedule.StepInfo;
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The client's verdicts beside the proxy's (the record's {@code slo}) on scripted records, the
 * figures known exactly: agreement, a miss the envelope alone made, a miss on an objective only the
 * proxy had, limits that differ, and records without {@code slo} or {@code tenant} (a proxy before
 * them): summary.json, pairs.csv and report.html.
 */
class ServerVerdictsTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path dir;

  private static Goodput slo(String text) {
    return new Goodput(Objectives.parse("--slo", text), Goodput.FLAG);
  }

  private static ServerSlo met(Map<String, Double> limits) {
    return new ServerSlo(true, "none", "chat", limits, List.of(), List.of());
  }

  private static ServerSlo missed(String objective, Map<String, Double> limits, boolean header) {
    return new ServerSlo(
        false,
        objective,
        null,
        limits,
        List.of(objective),
        header ? List.of(objective) : List.of());
  }

  /** A joined request: the client saw TTFT {@code clientTtft}, the proxy {@code serverTtft}. */
  private static Pair pair(
      long seq, double clientTtft, double serverTtft, String tenant, ServerSlo s) {
    return new Pair(
        Fixtures.client(seq, 0, seq, 1000, clientTtft, ErrorClass.NONE),
        Fixtures.server(seq, 850, 1, serverTtft).with(tenant, s));
  }

  @Test
  void theEnvelopeAloneTookItOverTheClientsLimit() {
    Goodput g = slo("ttft=500ms");
    Pair p = pair(1, 538, 388, "team-a", met(Map.of("server_ttft", 500.0)));
    Disagreement d = Disagreement.of(g, p, g.judge(p));
    assertThat(d.cause()).isEqualTo(Disagreement.Cause.ENVELOPE);
    assertThat(d.envelopeAccounts()).isTrue();
    assertThat(d.envelopeMs()).isEqualTo(150, org.assertj.core.data.Offset.offset(1e-6));
    assertThat(d.client()).isEqualTo(new Disagreement.Side(false, "client_ttft", 538, 500));
    assertThat(d.server()).isEqualTo(new Disagreement.Side(true, "server_ttft", 388, 500));
    assertThat(d.explanation())
        .isEqualTo(
            "client_ttft missed by 38 ms while server_ttft met with 112 ms to spare: the network"
                + " envelope (ttft_envelope = client_ttft \u2212 server_ttft), 150 ms, took it over"
                + " the client's limit");
  }

  @Test
  void theProxyMissedAnObjectiveOnlyItHadOrALimitOfItsOwn() {
    // x-slo-ttft-ms: 200 on the request; the client judges only e2el.
    ServerSlo header = missed("server_ttft", Map.of("server_ttft", 200.0), true);
    Goodput e2el = slo("e2el=10s");
    Pair p = pair(2, 300, 250, "team-b", header);
    Disagreement d = Disagreement.of(e2el, p, e2el.judge(p));
    assertThat(d.cause()).isEqualTo(Disagreement.Cause.ONE_SIDE);
    assertThat(d.envelopeAccounts()).isFalse();
    assertThat(d.explanation())
        .isEqualTo(
            "the client set no objective on client_ttft (it was 300 ms) while server_ttft missed by"
                + " 50 ms: an objective only the proxy set (set by the request's x-slo-ttft-ms)");
    // The client judges TTFT too, on a looser limit.
    Goodput ttft = slo("ttft=500ms");
    d = Disagreement.of(ttft, p, ttft.judge(p));
    assertThat(d.cause()).isEqualTo(Disagreement.Cause.LIMITS);
    assertThat(d.explanation())
        .isEqualTo(
            "client_ttft met with 200 ms to spare while server_ttft missed by 50 ms: the limits"
                + " differ: the client's 500 ms against the proxy's 200 ms (set by the request's"
                + " x-slo-ttft-ms)");
  }

  @Test
  void summaryPairsAndReportShowBothVerdicts() throws Exception {
    Goodput g = slo("ttft=500ms");
    Map<String, Double> limits = new LinkedHashMap<>();
    limits.put("server_ttft", 500.0);
    List<Pair> pairs = new ArrayList<>();
    pairs.add(pair(1, 300, 290, "team-a", met(limits))); // agree: both good
    pairs.add(pair(2, 538, 388, "team-a", met(limits))); // the envelope
    pairs.add(
        pair(3, 300, 250, "team-b", missed("server_ttft", Map.of("server_ttft", 200.0), true)));
    pairs.add(pair(4, 700, 650, "team-b", missed("server_ttft", limits, false))); // agree: missed
    pairs.add(pair(5, 300, 290, "team-b", null)); // not judged by the proxy
    pairs.add(new Pair(Fixtures.client(6, 0, 6, 1000, 250, ErrorClass.TIMEOUT), null));
    write(g, pairs, 7);

    JsonNode s = JSON.readTree(dir.resolve("summary.json").toFile()).path("goodput").path("server");
    assertThat(s.path("judged").asLong()).isEqualTo(4);
    assertThat(s.path("met").asLong()).isEqualTo(2);
    assertThat(s.path("attainment").asDouble()).isEqualTo(0.5);
    assertThat(s.path("agree").asLong()).isEqualTo(2);
    assertThat(s.path("client_good_server_missed").asLong()).isEqualTo(1);
    assertThat(s.path("client_missed_server_met").asLong()).isEqualTo(1);
    assertThat(s.path("causes").path("envelope").asLong()).isEqualTo(1);
    assertThat(s.path("causes").path("limits").asLong()).isEqualTo(1);
    JsonNode d = s.path("disagreements");
    assertThat(d).hasSize(2);
    assertThat(d.get(0).path("trace_id").asText()).isEqualTo(Fixtures.traceId(2));
    assertThat(d.get(0).path("tenant").asText()).isEqualTo("team-a");
    assertThat(d.get(0).path("client").path("verdict").asText()).isEqualTo("missed");
    assertThat(d.get(0).path("client").path("value_ms").asDouble()).isEqualTo(538);
    assertThat(d.get(0).path("server").path("verdict").asText()).isEqualTo("met");
    assertThat(d.get(0).path("server").path("limit_ms").asDouble()).isEqualTo(500);
    assertThat(d.get(0).path("envelope_ms").asDouble()).isEqualTo(150, within());
    assertThat(d.get(0).path("envelope_accounts").asBoolean()).isTrue();
    assertThat(d.get(1).path("cause").asText()).isEqualTo("limits");

    JsonNode t = JSON.readTree(dir.resolve("summary.json").toFile()).path("goodput");
    List<String> tenants = new ArrayList<>();
    t.path("by_tenant").fieldNames().forEachRemaining(tenants::add);
    assertThat(tenants).containsExactly("team-a", "team-b");
    assertThat(t.at("/by_tenant/team-b/sent").asLong()).isEqualTo(3);
    assertThat(t.at("/by_tenant/team-b/good").asLong()).isEqualTo(2);
    assertThat(t.at("/by_tenant/team-b/server_judged").asLong()).isEqualTo(2);
    assertThat(t.at("/by_tenant/team-b/server_attainment").asDouble()).isZero();
    // Sent 7: the failed request has no record, and one never finished.
    assertThat(t.path("by_tenant_unattributed").asLong()).isEqualTo(2);

    // The live table's line gives the proxy's attainment beside the client's.
    assertThat(GoodputCounts.of(g, pairs).liveLine(Double.NaN))
        .endsWith("; proxy: 50.0% met (2 of 4 judged), 2 verdicts differ (envelope 1, limits 1)");

    List<String> rows =
        Files.readAllLines(dir.resolve("pairs.csv")).stream()
            .map(ServerVerdictsTest::throughServerSlo)
            .toList();
    assertThat(rows.get(0)).endsWith(",good,slo_missed,tenant,server_slo,server_slo_missed");
    assertThat(rows.get(2)).endsWith(",false,client_ttft,team-a,met,");
    assertThat(rows.get(3)).endsWith(",true,,team-b,missed,server_ttft");
    assertThat(rows.get(5)).endsWith(",true,,team-b,,");
    assertThat(rows.get(6)).endsWith(",false,error,,,");

    String html = Files.readString(dir.resolve("report.html"));
    DocumentBuilderFactory.newInstance()
        .newDocumentBuilder()
        .parse(new ByteArrayInputStream(html.getBytes(StandardCharsets.UTF_8)));
    assertThat(html)
        .contains("Client and proxy verdicts")
        .contains("server_ttft met with 112 ms to spare: the network envelope")
        .contains("Goodput per tenant");
  }

  @Test
  void recordsWithoutSloOrTenantLeaveBothOut() throws Exception {
    Goodput g = slo("ttft=500ms");
    write(g, List.of(Fixtures.joined(1, 0, 100, 2), Fixtures.joined(2, 1, 100, 2)), 2);
    JsonNode goodput = JSON.readTree(dir.resolve("summary.json").toFile()).path("goodput");
    assertThat(goodput.path("good").asLong()).isEqualTo(2);
    assertThat(goodput.has("server")).isFalse();
    assertThat(goodput.has("by_tenant")).isFalse();
    assertThat(throughServerSlo(Files.readAllLines(dir.resolve("pairs.csv")).get(1)))
        .endsWith(",true,,,,");
    assertThat(Files.readString(dir.resolve("report.html")))
        .doesNotContain("Client and proxy verdicts")
        .doesNotContain("Goodput per tenant");
  }

  /** A pairs.csv line up to its server_slo_missed column (columns after it are others'). */
  private static String throughServerSlo(String line) {
    List<String> fields = RunMerge.splitCsv(line);
    return String.join(",", fields.subList(0, PairsCsv.HEADER.indexOf("server_slo_missed") + 1));
  }

  private void write(Goodput g, List<Pair> pairs, long sent) throws Exception {
    long ok = pairs.stream().filter(p -> p.client().ok()).count();
    ReportWriter.write(
        dir,
        new ReportInput(
            pairs,
            List.of(new StepInfo(0, -1, 4, 0, Fixtures.ns(2000), sent, 0)),
            0,
            Fixtures.ns(2000),
            Map.of("model", "m"),
            sent,
            ok,
            sent - ok,
            0,
            0,
            sent / 2.0,
            List.of(),
            null,
            null,
            null,
            null,
            g));
  }

  private static org.assertj.core.data.Offset<Double> within() {
    return org.assertj.core.data.Offset.offset(1e-6);
  }
}
