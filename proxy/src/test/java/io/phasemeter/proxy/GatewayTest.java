package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.gateway.HashKeyMain;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The gateway's admission through the whole proxy: API keys (missing, wrong, revoked, reloaded),
 * per-key request and token rates with {@code Retry-After} and OpenAI's {@code x-ratelimit-*}
 * headers, and the priority a key may choose. The proxy runs on a hand-advanced clock so every
 * refill is exact.
 */
class GatewayTest extends ProxyTestBase {
  private static final String TEAM_A = "pm-team-a-key";
  private static final String BATCH = "pm-batch-key";
  private static final String VIP = "pm-vip-key";

  @TempDir Path dir;
  private Path keysFile;
  private final AtomicLong now = new AtomicLong(1_000_000_000L);
  private final List<MultiMap> upstreamHeaders = new CopyOnWriteArrayList<>();
  private int backend;

  private final NanoClock clock =
      new NanoClock() {
        @Override
        public long nanoTime() {
          return now.get();
        }

        @Override
        public long toEpochNanos(long nanoTime) {
          return 1_700_000_000_000_000_000L + nanoTime;
        }
      };

  @BeforeEach
  void keysAndBackend() throws Exception {
    keysFile = dir.resolve("keys.yaml");
    writeKeys(
        key("team-a", TEAM_A, 3, 0, "normal", false),
        key("batch", BATCH, 0, 100, "low", false),
        key("vip", VIP, 0, 0, "normal", true));
    backend =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b -> {
                          upstreamHeaders.add(
                              MultiMap.caseInsensitiveMultiMap().addAll(req.headers()));
                          req.response()
                              .putHeader("content-type", "application/json")
                              .end(VllmScript.COMPLETION);
                        }));
  }

  private static String key(
      String name, String key, long rpm, long tpm, String priority, boolean header) {
    return "  - {name: "
        + name
        + ", sha256: \""
        + HashKeyMain.hash(key)
        + "\", rpm: "
        + rpm
        + ", tpm: "
        + tpm
        + ", priority: "
        + priority
        + ", allow_priority_header: "
        + header
        + "}\n";
  }

  private void writeKeys(String... entries) throws Exception {
    Path tmp = dir.resolve("keys.tmp");
    Files.writeString(tmp, "keys:\n" + String.join("", entries) + "...\n");
    Files.move(tmp, keysFile, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
  }

  private void start() throws Exception {
    ProxyConfig cfg = config(backend, 4, null);
    cfg =
        cfg.withAuth(
            new ProxyConfig.Auth(
                true, keysFile.toString(), Duration.ofMillis(50), Duration.ofMinutes(5), 100));
    proxy =
        PhasemeterProxy.builder(vertx, cfg)
            .openTelemetry(otel)
            .clock(clock)
            .observer(ctx -> finished.add(snapshot(ctx)))
            .start()
            .await(10, TimeUnit.SECONDS);
  }

  private Response send(String key, String body, String... headers) throws Exception {
    MultiMap h = MultiMap.caseInsensitiveMultiMap();
    if (key != null) {
      h.add("authorization", "Bearer " + key);
    }
    for (int i = 0; i + 1 < headers.length; i += 2) {
      h.add(headers[i], headers[i + 1]);
    }
    return call(HttpMethod.POST, "/v1/chat/completions", body, h);
  }

  private static String chatWithMaxTokens(int maxTokens) {
    return "{\"model\":\"sim-llama\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
        + "\"max_tokens\":"
        + maxTokens
        + "}";
  }

  private static JsonObject error(Response r) {
    return new JsonObject(r.text()).getJsonObject("error");
  }

  private JsonObject record(int i) {
    List<Finished> all = awaitFinished(i + 1);
    return new JsonObject(proxy.records().get(all.get(i).traceId()));
  }

  @Test
  void aMissingOrWrongKeyIsRefusedWith401AndAValidOneIsNotForwarded() throws Exception {
    start();

    Response missing = send(null, chat("hi", false));
    Response wrong = send("pm-not-a-key", chat("hi", false));
    Response basic =
        call(
            HttpMethod.POST,
            "/v1/chat/completions",
            chat("hi", false),
            MultiMap.caseInsensitiveMultiMap().add("authorization", "Basic " + TEAM_A));
    Response ok = send(TEAM_A, chat("hi", false));
    Response viaHeader =
        call(
            HttpMethod.POST,
            "/v1/chat/completions",
            chat("hi", false),
            MultiMap.caseInsensitiveMultiMap().add("api-key", VIP));

    for (Response r : List.of(missing, wrong, basic)) {
      assertThat(r.status()).isEqualTo(401);
      assertThat(error(r).getString("code")).isEqualTo("invalid_api_key");
      assertThat(error(r).getString("type")).isEqualTo("invalid_request_error");
      assertThat(r.text()).doesNotContain("pm-");
    }
    assertThat(error(missing).getString("message")).contains("didn't provide an API key");
    assertThat(error(wrong).getString("message")).contains("Incorrect API key");
    assertThat(ok.status()).isEqualTo(200);
    assertThat(viaHeader.status()).isEqualTo(200);
    assertThat(upstreamHeaders).hasSize(2);
    for (MultiMap h : upstreamHeaders) {
      assertThat(h.get("authorization")).as("the gateway's key stays at the gateway").isNull();
      assertThat(h.get("api-key")).isNull();
    }
    awaitFinished(5);
    assertThat(finished.stream().map(Finished::outcome))
        .containsExactlyInAnyOrder(
            "client_error", "client_error", "client_error", "success", "success");
    JsonObject rec =
        new JsonObject(
            proxy
                .records()
                .get(
                    finished.stream()
                        .filter(f -> f.status() == 200)
                        .findFirst()
                        .orElseThrow()
                        .traceId()));
    assertThat(rec.getString("key_name")).isIn("team-a", "vip");
    List<SpanData> spans = awaitRoots(5);
    assertThat(spans.stream().filter(s -> s.getName().equals("auth.check")))
        .extracting(
            s ->
                s.getAttributes()
                    .get(io.opentelemetry.api.common.AttributeKey.stringKey("llm.auth")))
        .containsExactlyInAnyOrder("missing", "invalid", "invalid", "verified", "verified");
  }

  @Test
  void aRevokedKeyIsRefusedOnceTheFileIsReReadAndANewKeyIsAccepted() throws Exception {
    start();
    assertThat(send(TEAM_A, chat("hi", false)).status()).isEqualTo(200);
    assertThat(send("pm-new-key", chat("hi", false)).status()).isEqualTo(401);

    writeKeys(key("newcomer", "pm-new-key", 0, 0, "normal", false));

    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> send("pm-new-key", chat("hi", false)).status() == 200);
    assertThat(send(TEAM_A, chat("hi", false)).status())
        .as("revoked despite the verified-key cache")
        .isEqualTo(401);
  }

  @Test
  void aBrokenKeysFileKeepsThePreviousKeys() throws Exception {
    start();
    Files.writeString(keysFile, "keys: [{name: broken, sha256: nothex}]\n...\n");

    Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                admin("/metrics").text().contains("llm_auth_reloads_total{result=\"failed\"} 1.0"));
    assertThat(admin("/metrics").text()).contains("llm_auth_keys 3.0");
    assertThat(send(TEAM_A, chat("hi", false)).status()).isEqualTo(200);
  }

  @Test
  void requestsPerMinuteRefuseWithRetryAfterAndRecoverAfterIt() throws Exception {
    start();
    for (int i = 0; i < 3; i++) {
      Response r = send(TEAM_A, chat("hi", false));
      assertThat(r.status()).isEqualTo(200);
      assertThat(r.headers().get("x-ratelimit-limit-requests")).isEqualTo("3");
      assertThat(r.headers().get("x-ratelimit-remaining-requests"))
          .isEqualTo(String.valueOf(2 - i));
    }

    Response refused = send(TEAM_A, chat("hi", false));

    assertThat(refused.status()).isEqualTo(429);
    // 3 per minute refill one every 20 s; none has refilled on the frozen clock.
    assertThat(refused.headers().get("retry-after")).isEqualTo("20");
    assertThat(refused.headers().get("x-ratelimit-remaining-requests")).isEqualTo("0");
    assertThat(refused.headers().get("x-ratelimit-reset-requests")).isEqualTo("1m0s");
    assertThat(error(refused).getString("type")).isEqualTo("requests");
    assertThat(error(refused).getString("code")).isEqualTo("rate_limit_exceeded");
    assertThat(upstreamHeaders).as("refused before the upstream").hasSize(3);
    assertThat(record(3).getString("outcome")).isEqualTo("rejected");

    now.addAndGet(Duration.ofSeconds(19).toNanos());
    assertThat(send(TEAM_A, chat("hi", false)).status()).isEqualTo(429);
    now.addAndGet(Duration.ofSeconds(1).toNanos());
    assertThat(send(TEAM_A, chat("hi", false)).status()).isEqualTo(200);
  }

  @Test
  void tokensPerMinuteTakeTheEstimateAndSettleWithTheUsage() throws Exception {
    start();
    // "hi" in one message: 4 + ceil(2/4) = 5 input tokens estimated, + max_tokens 60 = 65.
    Response first = send(BATCH, chatWithMaxTokens(60));
    assertThat(first.status()).isEqualTo(200);
    assertThat(first.headers().get("x-ratelimit-limit-tokens")).isEqualTo("100");
    assertThat(first.headers().get("x-ratelimit-remaining-tokens")).isEqualTo("35");
    assertThat(first.headers().get("x-ratelimit-limit-requests")).as("rpm unlimited").isNull();
    awaitFinished(1);

    // The upstream used 7 + 2 = 9: 56 come back, so 91 are left and a second 65 fits.
    Response second = send(BATCH, chatWithMaxTokens(60));
    assertThat(second.status()).as("admitted only thanks to the settlement").isEqualTo(200);
    assertThat(second.headers().get("x-ratelimit-remaining-tokens")).isEqualTo("26");
    awaitFinished(2);

    Response tooLarge = send(BATCH, chatWithMaxTokens(200));
    assertThat(tooLarge.status()).isEqualTo(429);
    assertThat(tooLarge.headers().get("retry-after")).as("waiting cannot help").isNull();
    assertThat(error(tooLarge).getString("type")).isEqualTo("tokens");
    assertThat(error(tooLarge).getString("message")).contains("Request too large");

    // 82 left; 95 needed: 13 tokens at 100/min refill in 7.8 s, so Retry-After says 8.
    Response wait = send(BATCH, chatWithMaxTokens(90));
    assertThat(wait.status()).isEqualTo(429);
    assertThat(wait.headers().get("retry-after")).isEqualTo("8");
    assertThat(wait.headers().get("x-ratelimit-remaining-tokens")).isEqualTo("82");
    now.addAndGet(Duration.ofSeconds(8).toNanos());
    assertThat(send(BATCH, chatWithMaxTokens(90)).status()).isEqualTo(200);
    assertThat(upstreamHeaders).hasSize(3);
  }

  @Test
  void aKeyMayLowerItsPriorityAndRaiseItOnlyWhenAllowed() throws Exception {
    start();
    send(TEAM_A, chat("hi", false), "x-priority", "high");
    send(TEAM_A, chat("hi", false), "x-priority", "low");
    send(VIP, chat("hi", false), "x-priority", "high");
    send(BATCH, chat("hi", false));
    Response bad = send(VIP, chat("hi", false), "x-priority", "urgent");

    assertThat(bad.status()).isEqualTo(400);
    assertThat(error(bad).getString("code")).isEqualTo("invalid_priority");
    assertThat(error(bad).getString("param")).isEqualTo("x-priority");
    assertThat(record(0).getString("priority")).as("normal key asking high").isEqualTo("normal");
    assertThat(record(1).getString("priority")).isEqualTo("low");
    assertThat(record(2).getString("priority")).as("allowed to choose").isEqualTo("high");
    assertThat(record(3).getString("priority")).as("the keys file's").isEqualTo("low");
    List<SpanData> spans = awaitRoots(5);
    assertThat(
            spans.stream()
                .filter(s -> s.getName().equals("inference.acquire_slot"))
                .map(
                    s ->
                        s.getAttributes()
                            .get(
                                io.opentelemetry.api.common.AttributeKey.stringKey(
                                    "llm.priority"))))
        .containsExactlyInAnyOrder("normal", "low", "high", "low");
  }

  @Test
  void theModelListNeedsAKeyToo() throws Exception {
    start();

    Response without = call(HttpMethod.GET, "/v1/models", null, MultiMap.caseInsensitiveMultiMap());
    Response with =
        call(
            HttpMethod.GET,
            "/v1/models",
            null,
            MultiMap.caseInsensitiveMultiMap().add("authorization", "Bearer " + VIP));

    assertThat(without.status()).isEqualTo(401);
    assertThat(error(without).getString("code")).isEqualTo("invalid_api_key");
    assertThat(with.status()).isEqualTo(200);
    assertThat(with.text()).contains("sim-llama");
  }
}
