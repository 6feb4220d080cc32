package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.junit.FuzzTest;
import com.fasterxml.jackson.databind.JsonNode;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Context;
import io.phasemeter.core.NanoClock;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpVersion;
import java.lang.reflect.Proxy;
import java.util.Arrays;

/**
 * The request preparation (phase {@code prepare}: parse, validate, rewrite) under Jazzer. An input
 * is one control byte, then the body: bit 0 picks the route (chat or text completions), bits 1–2
 * the {@code Content-Type} (JSON, none, JSON with a charset, or text). Whatever the body, preparing
 * it either succeeds — and then the upstream body is a JSON object that asks for usage when it
 * streams — or fails with a {@link ProxyFailure} that is the client's fault; nothing else escapes
 * (no Jackson exception, no stack overflow, no {@code internal_error}).
 *
 * <p>Plain {@code mvn test} replays the corpus in {@code
 * src/test/resources/io/phasemeter/proxy/pipeline/PrepareFuzzTestInputs/}; with {@code
 * JAZZER_FUZZ=1} Jazzer fuzzes for {@code maxDuration} (the {@code fuzz} profile, README).
 */
class PrepareFuzzTest {
  private static final String[] CONTENT_TYPES = {
    "application/json", null, "application/json; charset=utf-8", "text/plain"
  };

  private final PreparePhase prepare = new PreparePhase(null, model -> 4096);

  @FuzzTest(maxDuration = "25s")
  void prepareSucceedsOrFailsAsTheClientsFault(byte[] input) throws Exception {
    if (input.length < 1) {
      return;
    }
    ApiRoute route = (input[0] & 1) == 0 ? ApiRoute.CHAT : ApiRoute.COMPLETIONS;
    String contentType = CONTENT_TYPES[(input[0] >> 1) & 3];
    RequestContext ctx =
        new RequestContext(
            NanoClock.system(),
            OpenTelemetry.noop().getTracer("fuzz"),
            new RequestObserver[0],
            request(contentType),
            route,
            Context.root(),
            0);
    ctx.received(Buffer.buffer(Arrays.copyOfRange(input, 1, input.length)));
    try {
      prepare.prepare(ctx, Span.getInvalid());
    } catch (ProxyFailure f) {
      assertThat(f.kind().outcome()).as(f.getMessage()).isEqualTo(Outcome.CLIENT_ERROR);
      assertThat(f.kind()).isNotEqualTo(ProxyFailure.Kind.INTERNAL);
      return;
    }
    assertThat(contentType).isNotEqualTo("text/plain");
    assertThat(ctx.model()).isNotBlank();
    JsonNode upstream = PreparePhase.JSON.readTree(ctx.upstreamBody().getBytes());
    assertThat(upstream.isObject()).isTrue();
    if (ctx.streaming()) {
      assertThat(upstream.path("stream_options").path("include_usage").asBoolean()).isTrue();
    }
    assertThat(PreparePhase.estimateInputTokens(route, upstream)).isNotNegative();
  }

  /**
   * A request that only answers {@code getHeader("content-type")} (all prepare reads) and its
   * version (the root span's).
   */
  private static HttpServerRequest request(String contentType) {
    return (HttpServerRequest)
        Proxy.newProxyInstance(
            PrepareFuzzTest.class.getClassLoader(),
            new Class<?>[] {HttpServerRequest.class},
            (self, method, args) -> {
              if (method.getName().equals("getHeader")
                  && args.length == 1
                  && "content-type".equals(String.valueOf(args[0]))) {
                return contentType;
              }
              // The root span's network.protocol.version and tls.protocol.version.
              if (method.getName().equals("version")) {
                return HttpVersion.HTTP_1_1;
              }
              if (method.getName().equals("isSSL")) {
                return false;
              }
              throw new UnsupportedOperationException(method.getName());
            });
  }
}
