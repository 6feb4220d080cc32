package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.http.RequestOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The admin port's guard and bind, keys kept as hashes only, and metric series that do not grow
 * with what clients send. (The canary scans are in {@link PrivacyTest}, random model names in
 * {@link TelemetryTest}.)
 */
class SecurityTest extends ProxyTestBase {
  private static final String TOKEN = "adm-7c1e-s3cret";

  private int okBackend() throws Exception {
    return startBackend(
        req ->
            req.body()
                .onSuccess(
                    b ->
                        req.response()
                            .putHeader("content-type", "application/json")
                            .end(VllmScript.COMPLETION)));
  }

  @Test
  void adminBindsLoopbackByDefaultAndInTheShippedConfig() {
    assertThat(ConfigLoader.defaults().admin().host()).isEqualTo("127.0.0.1");
    assertThat(ConfigLoader.defaults().admin().token()).isEmpty();
    Path shipped = Path.of("..", "config", "proxy.yaml");
    assertThat(ConfigLoader.load(shipped, java.util.Map.of()).admin().host())
        .isEqualTo("127.0.0.1");
  }

  @Test
  void adminTokenGuardsMetricsStatsRecordsAndTheFeed() throws Exception {
    ProxyConfig cfg = config(okBackend(), 2, null);
    startProxy(
        new ProxyConfig(
            cfg.listen(),
            new ProxyConfig.Admin("127.0.0.1", 0, TOKEN),
            cfg.limits(),
            cfg.auth(),
            cfg.pools(),
            cfg.telemetry(),
            cfg.budgets(),
            cfg.drain()));
    assertThat(call("/v1/chat/completions", chat("x", false)).status()).isEqualTo(200);
    String traceId = awaitFinished(1).get(0).traceId();
    List<String> paths =
        List.of(
            "/metrics",
            "/admin/stats",
            "/admin/records/" + traceId,
            "/admin/records/stream",
            "/admin/unknown");
    List<String[]> refused =
        List.of(
            new String[0],
            new String[] {"authorization", "Bearer wrong"},
            new String[] {"authorization", "Bearer " + TOKEN.substring(0, TOKEN.length() - 1)},
            new String[] {"authorization", "Bearer " + TOKEN + "x"},
            new String[] {"authorization", "Basic " + TOKEN},
            new String[] {"authorization", TOKEN},
            new String[] {"x-api-key", TOKEN});
    for (String path : paths) {
      for (String[] h : refused) {
        Response r = admin(path, h);
        assertThat(r.status()).as(path + " " + String.join(" ", h)).isEqualTo(401);
        assertThat(r.headers().get("www-authenticate")).isEqualTo("Bearer");
        assertThat(r.text()).doesNotContain(traceId);
      }
    }
    String[] good = {"authorization", "Bearer " + TOKEN};
    assertThat(admin("/metrics", good).status()).isEqualTo(200);
    assertThat(admin("/admin/stats", good).status()).isEqualTo(200);
    assertThat(admin("/admin/records/" + traceId, good).text()).contains(traceId);
    assertThat(admin("/admin/records/" + traceId, "authorization", "bearer  " + TOKEN).status())
        .as("the scheme is case-insensitive, surrounding space ignored")
        .isEqualTo(200);
    int feed =
        onClientContext(
                () ->
                    client
                        .request(
                            new RequestOptions()
                                .setHost("127.0.0.1")
                                .setPort(proxy.adminPort())
                                .setURI("/admin/records/stream")
                                .putHeader("authorization", "Bearer " + TOKEN))
                        .compose(req -> req.send())
                        .map(
                            resp -> {
                              resp.request().reset();
                              return resp.statusCode();
                            }))
            .await(10, TimeUnit.SECONDS);
    assertThat(feed).isEqualTo(200);
    assertThat(admin("/health/live").status()).isEqualTo(200);
    assertThat(admin("/health/ready").status()).isEqualTo(200);
  }

  @Test
  void theShippedKeysFileAndConfigHoldHashesNeverKeys() throws Exception {
    String example = Files.readString(Path.of("..", "config", "keys.example.yaml"));
    assertThat(example).containsPattern("sha256: \"?[0-9a-f]{64}");
    assertThat(example).doesNotContainPattern("(?i)\\b(sk|pm)-[A-Za-z0-9_-]{16,}");
    String config = Files.readString(Path.of("..", "config", "proxy.yaml"));
    assertThat(config).doesNotContainPattern("(?i)\\b(sk|pm)-[A-Za-z0-9_-]{16,}");
  }

  @Test
  void randomPathsAndHeaderValuesKeepTheSeriesBounded() throws Exception {
    startProxy(config(okBackend(), 8, null));
    HttpClient pooled =
        vertx.createHttpClient(
            new HttpClientOptions().setKeepAlive(true), new PoolOptions().setHttp1MaxSize(16));
    Random random = new Random(7);
    // One of each kind first: the series they make are the ones that may exist.
    for (int kind = 0; kind < 5; kind++) {
      send(pooled, kind, random).await(10, TimeUnit.SECONDS);
    }
    awaitFinished(4);
    Set<String> before = series(admin("/metrics").text());
    int total = 1000;
    for (int batch = 0; batch < total / 100; batch++) {
      List<Future<Integer>> sent = new ArrayList<>();
      for (int i = 0; i < 100; i++) {
        sent.add(send(pooled, random.nextInt(5), random));
      }
      Future.all(sent).await(30, TimeUnit.SECONDS);
    }
    assertIdle();
    Set<String> after = series(admin("/metrics").text());
    assertThat(after).isEqualTo(before);
  }

  /**
   * One request of {@code kind}: 0 a random path, 1 a random {@code x-priority}, 2 a random {@code
   * traceparent} and {@code tracestate}, 3 a random {@code Content-Type}, 4 random other headers
   * (user agent, a random header name, a random bearer key with auth off).
   */
  private Future<Integer> send(HttpClient pooled, int kind, Random random) {
    String junk = Long.toHexString(random.nextLong()) + Integer.toString(random.nextInt(), 36);
    RequestOptions o =
        new RequestOptions()
            .setMethod(HttpMethod.POST)
            .setHost("127.0.0.1")
            .setPort(proxy.port())
            .setURI(kind == 0 ? "/v1/" + junk + "/completions?x=" + junk : "/v1/chat/completions")
            .setHeaders(MultiMap.caseInsensitiveMultiMap());
    o.putHeader("content-type", kind == 3 ? "text/" + junk : "application/json");
    switch (kind) {
      case 1 -> o.putHeader("x-priority", junk);
      case 2 -> {
        o.putHeader("traceparent", "00-" + junk + junk + "-" + junk + "-0" + random.nextInt(9));
        o.putHeader("tracestate", junk + "=" + junk);
      }
      case 4 -> {
        o.putHeader("user-agent", junk);
        o.putHeader("x-" + junk, junk);
        o.putHeader("authorization", "Bearer sk-" + junk);
      }
      default -> {}
    }
    String body = chat("x", false);
    return onClientContext(
        () ->
            pooled
                .request(o)
                .compose(r -> r.send(body))
                .compose(r -> r.body().map(b -> r.statusCode())));
  }

  /** The proxy's own series (name and labels, without values); JVM and process series vary. */
  private static Set<String> series(String text) {
    Set<String> out = new TreeSet<>();
    for (String line : text.split("\n")) {
      if (!line.isEmpty()
          && !line.startsWith("#")
          && !line.startsWith("jvm_")
          && !line.startsWith("process_")
          && !line.startsWith("system_")) {
        out.add(line.substring(0, line.lastIndexOf(' ')));
      }
    }
    return out;
  }
}
