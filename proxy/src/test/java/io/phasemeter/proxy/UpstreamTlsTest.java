package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.sdk.trace.data.EventData;
import io.phasemeter.core.SpanAttributes;
import io.phasemeter.core.testing.TestPki;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.phasemeter.sim.SimulatorTls;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.json.JsonObject;
import io.vertx.core.net.NetSocket;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The proxy in front of a simulator serving HTTPS (vLLM's --ssl-* flags) with a test CA made here:
 * mTLS, a CA or host name that does not fit, spares and engine scrapes over TLS, and the new
 * connection's set-up timed apart from the engine.
 */
class UpstreamTlsTest extends ProxyTestBase {
  @TempDir Path dir;
  private TestPki pki;
  private TestPki.Issued simCert;
  private TestPki.Issued proxyCert;

  @BeforeEach
  void pki() {
    pki = TestPki.create(dir.resolve("pki"), "ca");
    simCert = pki.server("sim", "localhost", "127.0.0.1");
    proxyCert = pki.client("proxy", "phasemeter-proxy");
  }

  private Simulator simulator(TestPki.Issued cert, int certReqs) throws Exception {
    return Simulator.start(
            vertx,
            SimulatorConfig.defaults()
                .withPort(0)
                .withSlots(16)
                .withDecodeStepMs(1)
                .withPrefillTokensPerSecond(1_000_000),
            new SimulatorTls(cert.certFile(), cert.keyFile(), pki.caFile(), certReqs))
        .await(10, TimeUnit.SECONDS);
  }

  private static String yaml(String upstream, String poolExtra) {
    return "listen: {host: 127.0.0.1, port: 0}\n"
        + "admin: {host: 127.0.0.1, port: 0}\n"
        + "pools:\n"
        + "  - name: default\n"
        + "    models: [sim-llama]\n"
        + "    upstreams: ["
        + upstream
        + "]\n"
        + "    health: {path: null}\n"
        + "    retries: 0\n"
        + poolExtra;
  }

  private String mtls() {
    return "    tls: {ca_file: '"
        + pki.caFile()
        + "', cert_file: '"
        + proxyCert.certFile()
        + "', key_file: '"
        + proxyCert.keyFile()
        + "'}\n";
  }

  private JsonObject record(String traceId) throws Exception {
    Awaitility.await()
        .atMost(java.time.Duration.ofSeconds(10))
        .until(() -> admin("/admin/records/" + traceId).status() == 200);
    return new JsonObject(admin("/admin/records/" + traceId).text());
  }

  private Optional<EventData> connectEvent(String traceId) {
    return spans.getFinishedSpanItems().stream()
        .filter(s -> s.getTraceId().equals(traceId))
        .filter(s -> s.getName().equals(Phase.GENERATION.spanName()))
        .flatMap(s -> s.getEvents().stream())
        .filter(e -> e.getName().equals("upstream.connect"))
        .findFirst();
  }

  private static String chatExact(boolean stream) {
    return "{\"model\":\"sim-llama\",\"stream\":"
        + stream
        + ",\"max_tokens\":4,\"ignore_eos\":true,"
        + "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  }

  @Test
  void mtlsRequestsAreServedAndOnlyANewConnectionIsTimed() throws Exception {
    int port = simulator(simCert, 2).port();
    startProxy(ConfigLoader.parse(yaml("https://localhost:" + port, mtls()), "t.yaml"));

    Response first = call("/v1/chat/completions", chatExact(false));
    assertThat(first.status()).as(first.text()).isEqualTo(200);
    Response second = call("/v1/chat/completions", chatExact(true));
    assertThat(second.status()).as(second.text()).isEqualTo(200);
    assertThat(second.text()).contains("data: [DONE]");
    List<Finished> done = awaitFinished(2);
    awaitRoots(2);

    JsonObject r1 = record(done.get(0).traceId());
    assertThat(r1.getDouble("upstream_connect_ms")).isPositive();
    EventData e1 = connectEvent(done.get(0).traceId()).orElseThrow();
    assertThat(e1.getAttributes().get(SpanAttributes.UPSTREAM_CONNECT_MS))
        .isEqualTo(
            r1.getDouble("upstream_connect_ms"), org.assertj.core.api.Assertions.within(0.01));
    assertThat(e1.getAttributes().get(SpanAttributes.TLS_PROTOCOL_VERSION)).isIn("1.2", "1.3");
    // The connect is inside generation: the phase starts when the proxy asks for a connection.
    assertThat(done.get(0).phaseMs(Phase.GENERATION))
        .isGreaterThanOrEqualTo(r1.getDouble("upstream_connect_ms"));

    // The second request went out on the pooled connection: nothing to time.
    JsonObject r2 = record(done.get(1).traceId());
    assertThat(r2.containsKey("upstream_connect_ms")).isTrue();
    assertThat(r2.getValue("upstream_connect_ms")).isNull();
    assertThat(connectEvent(done.get(1).traceId())).isEmpty();

    String metrics = admin("/metrics").text();
    assertThat(metrics)
        .contains("llm_upstream_connect_seconds_count{llm_pool=\"default\",tls=\"true\"} 1")
        .contains("llm_upstream_connect_seconds_count{llm_pool=\"default\",tls=\"false\"} 0");
    // The client certificate's expiry, as the listeners' own.
    assertThat(metrics)
        .contains(
            "llm_tls_certificate_expiry_timestamp_seconds{listener=\"upstream:default\"} "
                + (double) proxyCert.certificate().getNotAfter().toInstant().getEpochSecond());
    assertIdle();
  }

  /** A request that fails TLS: 502 naming TLS, nothing held, the record says upstream_error. */
  private void assertTlsFailure(String tls, String says) throws Exception {
    int port = simulator(simCert, 2).port();
    startProxy(ConfigLoader.parse(yaml("https://localhost:" + port, tls), "t.yaml"));
    for (int i = 0; i < 2; i++) {
      Response r = call("/v1/chat/completions", chatExact(i == 1));
      assertThat(r.status()).as(r.text()).isEqualTo(502);
      JsonObject error = new JsonObject(r.text()).getJsonObject("error");
      assertThat(error.getString("code")).isEqualTo("upstream_unavailable");
      assertThat(error.getString("message")).contains("TLS").contains(says);
    }
    List<Finished> done = awaitFinished(2);
    assertThat(done).extracting(Finished::outcome).containsOnly("upstream_error");
    assertThat(record(done.get(0).traceId()).getString("outcome")).isEqualTo("upstream_error");
    assertIdle();
  }

  @Test
  void noClientCertificateIsA502SayingTls() throws Exception {
    assertTlsFailure("    tls: {ca_file: '" + pki.caFile() + "'}\n", "client certificate");
  }

  @Test
  void anUpstreamSignedByAnotherCaIsA502SayingTls() throws Exception {
    TestPki other = TestPki.create(dir.resolve("other"), "other-ca");
    assertTlsFailure(
        "    tls: {ca_file: '"
            + other.caFile()
            + "', cert_file: '"
            + proxyCert.certFile()
            + "', key_file: '"
            + proxyCert.keyFile()
            + "'}\n",
        "trusted CA");
  }

  @Test
  void hostNameIsCheckedUnlessVerifyHostnameIsFalse() throws Exception {
    TestPki.Issued elsewhere = pki.server("elsewhere", "elsewhere.example");
    int port = simulator(elsewhere, 2).port();
    startProxy(ConfigLoader.parse(yaml("https://127.0.0.1:" + port, mtls()), "t.yaml"));
    Response refused = call("/v1/chat/completions", chatExact(false));
    assertThat(refused.status()).as(refused.text()).isEqualTo(502);
    assertThat(refused.text()).contains("TLS").contains("does not name its host");
    proxy.close().await(10, TimeUnit.SECONDS);

    String off = mtls().replace("'}\n", "', verify_hostname: false}\n");
    startProxy(ConfigLoader.parse(yaml("https://127.0.0.1:" + port, off), "t.yaml"));
    Response ok = call("/v1/chat/completions", chatExact(false));
    assertThat(ok.status()).as(ok.text()).isEqualTo(200);
  }

  @Test
  void sparesAndEngineScrapesGoOverTheSameTls() throws Exception {
    int port = simulator(simCert, 2).port();
    startProxy(
        ConfigLoader.parse(
            yaml(
                "https://localhost:" + port,
                mtls()
                    + "    routing: engine_load\n"
                    + "    scrape_interval: 50ms\n"
                    + "    connections: {reuse: 'off', preconnect: 2}\n"),
            "t.yaml"));
    Awaitility.await()
        .atMost(java.time.Duration.ofSeconds(20))
        .untilAsserted(
            () -> {
              String m = admin("/metrics").text();
              assertThat(m)
                  .containsPattern("llm_upstream_scrapes_total\\{[^}]*result=\"ok\"[^}]*\\} [1-9]");
              assertThat(m).contains("llm_upstream_connections_spare{llm_pool=\"default\"} 2.0");
            });
    Response r = call("/v1/chat/completions", chatExact(true));
    assertThat(r.status()).as(r.text()).isEqualTo(200);
    Finished f = awaitFinished(1).get(0);
    // It went out on a spare opened ahead of demand: no set-up on its way.
    assertThat(record(f.traceId()).getValue("upstream_connect_ms")).isNull();
    assertThat(admin("/metrics").text())
        .containsPattern("llm_upstream_connections_spare_taken_total\\{llm_pool=\"default\"\\} 1");
  }

  @Test
  void aSlowHandshakeIsConnectTimeNotTheEngines() throws Exception {
    long holdMs = 1000;
    Simulator sim = simulator(simCert, 2);
    int relay = handshakeDelayingRelay(sim.port(), holdMs);
    startProxy(ConfigLoader.parse(yaml("https://localhost:" + relay, mtls()), "t.yaml"));
    assertThat(call("/v1/chat/completions", chatExact(true)).status()).isEqualTo(200);
    assertThat(call("/v1/chat/completions", chatExact(true)).status()).isEqualTo(200);
    List<Finished> done = awaitFinished(2);
    double connectMs = record(done.get(0).traceId()).getDouble("upstream_connect_ms");
    // The relay held the handshake that long: the connect carries the hold.
    assertThat(connectMs).isGreaterThanOrEqualTo(holdMs);
    // The control: the same request on the connection already open has no connect, and its
    // generation lacks the hold (a margin of half the hold, not a speed). No upper bound on the
    // first: it also pays the fresh proxy's class loading and first handshake.
    assertThat(record(done.get(1).traceId()).getValue("upstream_connect_ms")).isNull();
    double first = done.get(0).phaseMs(Phase.GENERATION);
    double second = done.get(1).phaseMs(Phase.GENERATION);
    assertThat(first - second).isGreaterThan(holdMs / 2.0);
  }

  /**
   * A TCP relay to {@code port} that holds the upstream's first bytes (its ServerHello) for {@code
   * holdMs}: a handshake that takes that much longer, and nothing else.
   */
  private int handshakeDelayingRelay(int port, long holdMs) throws Exception {
    io.vertx.core.net.NetClient out = vertx.createNetClient();
    return vertx
        .createNetServer()
        .connectHandler(
            in -> {
              in.pause();
              out.connect(port, "127.0.0.1")
                  .onFailure(t -> in.close())
                  .onSuccess(
                      up -> {
                        in.handler(up::write);
                        in.closeHandler(v -> up.close());
                        up.closeHandler(v -> in.close());
                        up.handler(new Holder(in, holdMs)::accept);
                        in.resume();
                      });
            })
        .listen(0, "127.0.0.1")
        .await(10, TimeUnit.SECONDS)
        .actualPort();
  }

  private final class Holder {
    private final NetSocket to;
    private final long holdMs;
    private List<Buffer> held = new ArrayList<>();

    Holder(NetSocket to, long holdMs) {
      this.to = to;
      this.holdMs = holdMs;
    }

    void accept(Buffer b) {
      if (held == null) {
        to.write(b);
        return;
      }
      if (held.isEmpty()) {
        vertx.setTimer(
            holdMs,
            id -> {
              held.forEach(to::write);
              held = null;
            });
      }
      held.add(b);
    }
  }
}
