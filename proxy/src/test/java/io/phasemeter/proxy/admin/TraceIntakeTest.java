package io.phasemeter.proxy.admin;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.engine.OtlpTraceDecoder;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.RequestOptions;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.handler.BodyHandler;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The bound on exports read at once: a place is held from the head until the decode is done, even
 * when the client leaves, so that leaving cannot queue more decodes (each holding its body) than
 * {@link TraceIntake#MAX_RECEIVING}. Decodes are held open by hand here.
 */
class TraceIntakeTest {
  private final Vertx vertx = Vertx.vertx();
  private final List<Promise<OtlpTraceDecoder.Decoded>> decodes = new CopyOnWriteArrayList<>();

  @AfterEach
  void close() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  @Test
  void aPlaceIsHeldUntilTheDecodeEndsEvenWhenTheClientLeaves() throws Exception {
    ProxyConfig.EngineSpans config = new ProxyConfig.EngineSpans(true, Duration.ofSeconds(1), 16);
    EngineSpans engine = new EngineSpans(config, System::nanoTime, List.of());
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    TraceIntake intake =
        new TraceIntake(
            engine,
            config,
            registry,
            task -> {
              Promise<OtlpTraceDecoder.Decoded> p = Promise.promise();
              decodes.add(p);
              return p.future();
            });
    Router router = Router.router(vertx);
    router
        .post("/v1/traces")
        .handler(
            rc -> {
              if (intake.accepts(rc)) {
                rc.next();
              }
            });
    router
        .post("/v1/traces")
        .handler(BodyHandler.create(false).setBodyLimit(intake.maxBodyBytes()))
        .handler(intake::handle);
    HttpServer server =
        vertx.createHttpServer().requestHandler(router).listen(0, "127.0.0.1").await();
    HttpClient client = vertx.createHttpClient();
    RequestOptions post =
        new RequestOptions()
            .setMethod(HttpMethod.POST)
            .setHost("127.0.0.1")
            .setPort(server.actualPort())
            .setURI("/v1/traces")
            .putHeader("content-type", "application/x-protobuf");

    // Four exports (empty ones: OTLP allows them) whose decodes are held open; their clients then
    // leave.
    List<HttpClientRequest> held = new CopyOnWriteArrayList<>();
    for (int i = 0; i < TraceIntake.MAX_RECEIVING; i++) {
      HttpClientRequest r = client.request(post).await();
      r.end(io.vertx.core.buffer.Buffer.buffer(new byte[0]));
      held.add(r);
    }
    Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> decodes.size() == 4);
    for (HttpClientRequest r : held) {
      r.connection().close();
    }
    // Gone or not, their decodes still run: a fifth is told to retry, and nothing more is decoded.
    assertThat(status(client, post)).isEqualTo(503);
    assertThat(decodes).hasSize(4);
    // One decode done: one place again.
    decodes.get(0).complete(new OtlpTraceDecoder.Decoded(List.of(), 0, 0));
    Future<Integer> next = client.request(post).compose(r -> r.send()).map(r -> r.statusCode());
    Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> decodes.size() == 5);
    decodes.get(4).complete(new OtlpTraceDecoder.Decoded(List.of(), 0, 0));
    assertThat(next.await(10, TimeUnit.SECONDS)).isEqualTo(200);
    assertThat(registry.get("llm.engine.span.exports").tag("result", "busy").counter().count())
        .isEqualTo(1.0);
  }

  private static int status(HttpClient client, RequestOptions post) throws Exception {
    return client
        .request(post)
        .compose(r -> r.send())
        .map(r -> r.statusCode())
        .await(10, TimeUnit.SECONDS);
  }
}
