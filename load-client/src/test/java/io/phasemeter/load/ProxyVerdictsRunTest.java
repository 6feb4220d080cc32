package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.report.RunMerge;
import io.phasemeter.proxy.PhasemeterProxy;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The client's verdicts beside the proxy's own, end to end: the proxy judges {@code server_root ≤
 * 300 ms} (its budget's {@code slo_ms}), the client {@code e2el ≤ 600 ms}, and the simulator
 * decodes 10 ms per token with an instant prefill, so a request of 2 output tokens (~10 ms) meets
 * both, one of 40 (~390 ms) only the client's, one of 120 (~1.19 s) neither, with ~90 ms or more
 * either side of every limit. The proxy's records carry its verdict ({@code slo}) and tenant
 * ({@code other}: no {@code tenants:} block), which summary.json, pairs.csv, the report and the
 * final line show.
 */
class ProxyVerdictsRunTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Vertx servers;
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @TempDir Path dir;

  @AfterEach
  void stop() throws Exception {
    if (servers != null) {
      servers.close().await(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void theClientAndTheProxyJudgeTheSameRequestsAndTheLimitsExplainTheDifference() throws Exception {
    servers = Vertx.vertx();
    Simulator sim =
        Simulator.start(
                servers,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(64)
                    .withDecodeStepMs(10)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(10_000_000)
                    .withSeed(7))
            .await(10, TimeUnit.SECONDS);
    Path budgets = dir.resolve("budgets.yaml");
    Files.writeString(
        budgets,
        "budgets:\n  - name: chat\n    model: \"*\"\n    quantile: 0.95\n    window: 1m\n"
            + "    limits_ms: {total: 60000}\n    slo_ms: {server_root: 300}\n"
            + "    max_error_rate: 1\n    min_join_coverage: 0\n");
    PhasemeterProxy proxy =
        PhasemeterProxy.builder(
                servers,
                ConfigLoader.parse(
                    "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                        + "budgets: "
                        + budgets
                        + "\npools:\n  - name: default\n    models: [sim-llama]\n    upstreams:"
                        + " [http://127.0.0.1:"
                        + sim.port()
                        + "]\n    slots: 64\n",
                    "test.yaml"))
            // As phasemeter proxy does with the configuration's budgets file.
            .budgets(Budgets.load(budgets))
            .start()
            .await(10, TimeUnit.SECONDS);
    Path run = dir.resolve("run");
    int code =
        LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
            .execute(
                RunArgs.quiet(
                    "run",
                    "--url",
                    "http://127.0.0.1:" + proxy.port(),
                    "--admin",
                    "http://127.0.0.1:" + proxy.adminPort(),
                    "--model",
                    "sim-llama",
                    "--rate",
                    "15",
                    "--arrival",
                    "constant",
                    "--duration",
                    "2s",
                    "--mix",
                    "16:2=0.5,16:40=0.5",
                    "--slo",
                    "e2el=5s",
                    "--out",
                    run.toString()));
    assertThat(code).as(out + "\n" + err).isZero();

    List<List<String>> rows = new ArrayList<>();
    for (String line : Files.readAllLines(run.resolve("pairs.csv"))) {
      rows.add(RunMerge.splitCsv(line));
    }
    List<String> h = rows.get(0);
    int bucket = h.indexOf("bucket");
    int joined = h.indexOf("joined");
    int good = h.indexOf("good");
    int tenant = h.indexOf("tenant");
    int serverSlo = h.indexOf("server_slo");
    int serverMissed = h.indexOf("server_slo_missed");
    // Recounted from pairs.csv: the summary's counts are these, whatever a busy machine did to
    // a request's timing; the 40-token requests are the disagreements the limits explain.
    long judged = 0;
    long met = 0;
    long clientGoodServerMissed = 0;
    long clientMissedServerMet = 0;
    long clientGood = 0;
    long fortyOnlyClientGood = 0;
    for (List<String> r : rows.subList(1, rows.size())) {
      if (!r.get(joined).equals("true")) {
        assertThat(r.subList(tenant, tenant + 3)).containsOnly("");
        continue;
      }
      judged++;
      assertThat(r.get(tenant)).isEqualTo("other");
      boolean clientOk = r.get(good).equals("true");
      boolean serverOk = r.get(serverSlo).equals("met");
      assertThat(r.get(serverSlo)).isIn("met", "missed");
      assertThat(r.get(serverMissed)).isEqualTo(serverOk ? "" : "server_root");
      met += serverOk ? 1 : 0;
      clientGood += clientOk ? 1 : 0;
      clientGoodServerMissed += clientOk && !serverOk ? 1 : 0;
      clientMissedServerMet += !clientOk && serverOk ? 1 : 0;
      fortyOnlyClientGood += clientOk && !serverOk && r.get(bucket).endsWith("-40") ? 1 : 0;
    }
    assertThat(fortyOnlyClientGood).as(out.toString()).isPositive();

    JsonNode g = JSON.readTree(run.resolve("summary.json").toFile()).path("goodput");
    JsonNode s = g.path("server");
    assertThat(s.path("judged").asLong()).isEqualTo(judged);
    assertThat(s.path("met").asLong()).isEqualTo(met);
    assertThat(s.path("agree").asLong())
        .isEqualTo(judged - clientGoodServerMissed - clientMissedServerMet);
    assertThat(s.path("client_good_server_missed").asLong()).isEqualTo(clientGoodServerMissed);
    assertThat(s.path("client_missed_server_met").asLong()).isEqualTo(clientMissedServerMet);
    assertThat(s.path("causes").path("limits").asLong())
        .isGreaterThanOrEqualTo(fortyOnlyClientGood);
    JsonNode d = null;
    for (JsonNode x : s.path("disagreements")) {
      d = d == null && x.path("cause").asText().equals("limits") ? x : d;
    }
    assertThat(d).as(s.toString()).isNotNull();
    assertThat(d.path("client").path("objective").asText()).isEqualTo("client_total");
    assertThat(d.path("client").path("limit_ms").asDouble()).isEqualTo(5000);
    assertThat(d.path("server").path("objective").asText()).isEqualTo("server_root");
    assertThat(d.path("server").path("limit_ms").asDouble()).isEqualTo(300);
    assertThat(d.path("explanation").asText())
        .contains("the limits differ: the client's 5000 ms against the proxy's 300 ms");
    assertThat(g.at("/by_tenant/other/sent").asLong()).isEqualTo(judged);
    assertThat(g.at("/by_tenant/other/good").asLong()).isEqualTo(clientGood);
    assertThat(g.at("/by_tenant/other/server_met").asLong()).isEqualTo(met);
    assertThat(Files.readString(run.resolve("report.html"))).contains("Client and proxy verdicts");
    assertThat(out.toString()).contains("; proxy: ");
  }
}
