package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Prompts, completions and keys never reach spans or logs: a canary string is sent in every place a
 * user can put text — prompt, completion, API key, model name, malformed JSON, an upstream error
 * body, a traceparent, a tracestate, a user agent — through success and failure paths, then
 * searched for in every span attribute, span name, event and status, in every record, in the
 * metrics (text and OpenMetrics) and the stats, and in everything logged (SLF4J to stderr and JUL).
 */
class PrivacyTest extends ProxyTestBase {
  private static final String CANARY = "CANARY-7f3a9c-secret";

  private final ByteArrayOutputStream stderr = new ByteArrayOutputStream();
  private final List<String> julLines = new ArrayList<>();
  private PrintStream originalErr;
  private Handler julHandler;

  @BeforeEach
  void captureLogs() {
    originalErr = System.err;
    System.setErr(
        new PrintStream(new TeeStream(stderr, originalErr), true, StandardCharsets.UTF_8));
    julHandler =
        new Handler() {
          @Override
          public void publish(LogRecord r) {
            julLines.add(r.getMessage() + " " + r.getParameters() + " " + r.getThrown());
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        };
    Logger.getLogger("").addHandler(julHandler);
  }

  @AfterEach
  void restoreLogs() {
    System.setErr(originalErr);
    Logger.getLogger("").removeHandler(julHandler);
  }

  @Test
  void canaryNeverReachesSpansOrLogs() throws Exception {
    String completionWithCanary =
        VllmScript.ROLE
            + VllmScript.content(CANARY)
            + VllmScript.FINISH
            + VllmScript.USAGE
            + VllmScript.DONE;
    int port =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        body -> {
                          String text = body.toString();
                          if (text.contains("\"fail\"")) {
                            req.response()
                                .setStatusCode(500)
                                .end("{\"error\":\"upstream saw " + CANARY + "\"}");
                          } else if (text.contains("\"stream\":true")) {
                            req.response()
                                .setChunked(true)
                                .putHeader("content-type", "text/event-stream")
                                .end(completionWithCanary);
                          } else {
                            req.response()
                                .putHeader("content-type", "application/json")
                                .end(VllmScript.COMPLETION.replace("Hello", CANARY));
                          }
                        }));
    startProxy(config(port, 2, null));
    MultiMap h =
        MultiMap.caseInsensitiveMultiMap()
            .add("authorization", "Bearer sk-" + CANARY)
            .add("x-api-key", CANARY)
            .add("traceparent", "00-" + CANARY + "-01")
            .add("tracestate", "pm=" + CANARY)
            .add("user-agent", CANARY);

    Response streamed = call(HttpMethod.POST, "/v1/chat/completions", chat(CANARY, true), h);
    assertThat(streamed.text()).as("the client does get the completion").contains(CANARY);
    Response whole = call(HttpMethod.POST, "/v1/chat/completions", chat(CANARY, false), h);
    assertThat(whole.text()).contains(CANARY);
    call(
        HttpMethod.POST,
        "/v1/chat/completions",
        "{\"model\":\"sim-llama\",\"fail\":1,\"messages\":[{\"role\":\"user\",\"content\":\""
            + CANARY
            + "\"}]}",
        h);
    call(
        HttpMethod.POST,
        "/v1/chat/completions",
        "{\"model\":\"" + CANARY + "\",\"messages\":[1]}",
        h);
    call(HttpMethod.POST, "/v1/chat/completions", "{\"model\":\"sim-llama\", " + CANARY, h);
    call(
        HttpMethod.POST,
        "/v1/completions",
        "{\"model\":\"sim-llama\",\"prompt\":\"" + CANARY + "\",\"stream\":true}",
        h);
    call(HttpMethod.GET, "/v1/" + CANARY, null, h);

    // The unknown path is passed through, so it is a measured request too: seven in all.
    List<SpanData> all = awaitRoots(7);
    awaitFinished(7);
    assertThat(all).hasSizeGreaterThan(30);
    for (SpanData s : all) {
      assertThat(s.getName()).doesNotContain(CANARY);
      s.getAttributes()
          .forEach(
              (k, v) ->
                  assertThat(String.valueOf(v)).as(s.getName() + " " + k).doesNotContain(CANARY));
      assertThat(String.valueOf(s.getStatus())).doesNotContain(CANARY);
      s.getEvents().forEach(e -> assertThat(e.toString()).doesNotContain(CANARY));
    }
    // Records, the live feed's content, metrics (text and OpenMetrics) and stats.
    List<String> published = new ArrayList<>();
    for (Finished f : finished) {
      published.add(proxy.records().get(f.traceId()));
    }
    assertThat(published).hasSize(7).doesNotContainNull();
    published.add(admin("/metrics").text());
    published.add(
        admin("/metrics", "accept", "application/openmetrics-text; version=1.0.0").text());
    published.add(admin("/admin/stats").text());
    assertThat(String.join("\n", published)).contains("sim-llama").doesNotContain(CANARY);
    System.err.flush();
    String logged = stderr.toString(StandardCharsets.UTF_8) + String.join("\n", julLines);
    assertThat(logged).as("something was logged at all").contains("upstream failure");
    assertThat(logged).doesNotContain(CANARY);
  }

  @Test
  void keysNeverReachSpansRecordsMetricsOrLogsWithAuthOn(
      @org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws Exception {
    String goodKey = "pm-" + CANARY + "-good";
    String hash = io.phasemeter.proxy.gateway.HashKeyMain.hash(goodKey);
    java.nio.file.Path keys = dir.resolve("keys.yaml");
    java.nio.file.Files.writeString(
        keys, "keys:\n  - {name: team-a, sha256: \"" + hash + "\", rpm: 2, tpm: 1000}\n...\n");
    int port =
        startBackend(
            req ->
                req.body()
                    .onSuccess(
                        b ->
                            req.response()
                                .putHeader("content-type", "application/json")
                                .end(VllmScript.COMPLETION)));
    ProxyConfig cfg =
        config(port, 2, "    external: true\n    api_key_env: PROVIDER\n")
            .withAuth(new ProxyConfig.Auth(true, keys.toString()));
    proxy =
        PhasemeterProxy.builder(vertx, cfg)
            .openTelemetry(otel)
            .environment(java.util.Map.of("PROVIDER", "sk-provider-" + CANARY))
            .observer(ctx -> finished.add(snapshot(ctx)))
            .start()
            .await(10, java.util.concurrent.TimeUnit.SECONDS);

    for (String key : List.of(goodKey, goodKey, goodKey, "pm-" + CANARY + "-wrong")) {
      call(
          HttpMethod.POST,
          "/v1/chat/completions",
          chat("hi", false),
          MultiMap.caseInsensitiveMultiMap().add("authorization", "Bearer " + key));
    }
    call(
        HttpMethod.POST,
        "/v1/chat/completions",
        chat("hi", false),
        MultiMap.caseInsensitiveMultiMap().add("x-api-key", goodKey + "x"));

    awaitFinished(5);
    List<SpanData> all = awaitRoots(5);
    List<String> seen = new ArrayList<>();
    for (SpanData s : all) {
      seen.add(s.getName());
      s.getAttributes().forEach((k, v) -> seen.add(k + "=" + v));
      s.getEvents().forEach(e -> seen.add(e.toString()));
    }
    for (Finished f : finished) {
      seen.add(proxy.records().get(f.traceId()));
    }
    seen.add(admin("/metrics").text());
    seen.add(admin("/admin/stats").text());
    System.err.flush();
    seen.add(stderr.toString(StandardCharsets.UTF_8));
    seen.addAll(julLines);
    String everything = String.join("\n", seen);
    assertThat(everything).as("the key was verified at all").contains("team-a");
    assertThat(everything).doesNotContain(CANARY).doesNotContain(hash);
  }

  /** Writes to the capture and still to the real stderr. */
  private static final class TeeStream extends java.io.OutputStream {
    private final java.io.OutputStream a;
    private final java.io.OutputStream b;

    TeeStream(java.io.OutputStream a, java.io.OutputStream b) {
      this.a = a;
      this.b = b;
    }

    @Override
    public synchronized void write(int c) throws java.io.IOException {
      a.write(c);
      b.write(c);
    }

    @Override
    public synchronized void write(byte[] buf, int off, int len) throws java.io.IOException {
      a.write(buf, off, len);
      b.write(buf, off, len);
    }
  }
}
