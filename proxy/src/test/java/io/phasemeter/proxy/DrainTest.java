package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.phasemeter.proxy.DrainScenario.Seen;
import io.phasemeter.proxy.pipeline.Phase;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.json.JsonObject;
import java.net.ConnectException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * Graceful drain, in process: during 50 streams every stream either completes or ends {@code
 * cancelled}, and no slot, span or record is lost.
 */
class DrainTest extends ProxyTestBase {
  private static final int STREAMS = 50;
  private static final Duration DRAIN = Duration.ofMillis(1500);

  private static boolean held(int i) {
    return i % 5 == 0;
  }

  @Test
  void drainDuringFiftyStreamsFinishesOrCancelsEachAndLosesNoSlotSpanOrRecord() throws Exception {
    Promise<Void> release = Promise.promise();
    AtomicInteger upstreamCut = new AtomicInteger();
    int port = startBackend(DrainScenario.backend(vertx, release.future(), upstreamCut));
    startProxy(config(port, 64, null));
    HttpClient streams =
        vertx.createHttpClient(
            new HttpClientOptions().setKeepAlive(false), new PoolOptions().setHttp1MaxSize(64));
    Context context = vertx.getOrCreateContext();

    // The record feed, subscribed before anything happens.
    Seen feed =
        Seen.open(
            streams,
            context,
            HttpMethod.GET,
            proxy.adminPort(),
            "/admin/records/stream",
            null,
            null);
    feed.firstBytes.future().await(10, TimeUnit.SECONDS);
    assertThat(proxy.records().feed().subscribers()).isEqualTo(1);

    List<Seen> calls = new ArrayList<>();
    for (int i = 0; i < STREAMS; i++) {
      calls.add(
          Seen.open(
              streams,
              context,
              HttpMethod.POST,
              proxy.port(),
              "/v1/chat/completions",
              DrainScenario.chat(i, held(i)),
              DrainScenario.traceparent(i)));
    }
    // Every stream has its first token: all 50 are in generation.
    Awaitility.await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> calls.stream().allMatch(Seen::started) && proxy.inFlight() == STREAMS);
    int heldCount = (int) java.util.stream.IntStream.range(0, STREAMS).filter(i -> held(i)).count();

    Future<PhasemeterProxy.DrainResult> drain = proxy.drain(DRAIN);
    release.complete();

    // While draining: not ready, and nothing new gets in.
    assertThat(admin("/health/ready").status()).isEqualTo(503);
    Object late =
        callAsync("/v1/chat/completions", chat("late", true))
            .map(r -> (Object) r)
            .otherwise(t -> t)
            .await(10, TimeUnit.SECONDS);
    if (late instanceof Response r) {
      // A connection accepted just before the listener closed: the pipeline refuses the request.
      assertThat(r.status()).isEqualTo(503);
      assertThat(r.headers().get("connection")).isEqualTo("close");
      assertThat(new JsonObject(r.text()).getJsonObject("error").getString("code"))
          .isEqualTo("shutting_down");
      System.out.println("drain: a new request got 503 shutting_down");
    } else {
      // server.shutdown() unbound the listener: a new connection is refused by the kernel.
      assertThat((Throwable) late).isInstanceOf(ConnectException.class);
      System.out.println("drain: a new connection was refused (" + late + ")");
    }
    assertThat(drain.isComplete()).as("held streams keep the drain open").isFalse();

    PhasemeterProxy.DrainResult result =
        drain.await(DRAIN.toMillis() + 10_000, TimeUnit.MILLISECONDS);
    System.out.printf(
        "drain: took %d ms, %d in flight at start, %d cancelled at the deadline%n",
        result.took().toMillis(), result.inFlightAtStart(), result.cancelled());
    assertThat(result.inFlightAtStart()).isEqualTo(STREAMS);
    assertThat(result.cancelled()).isEqualTo(heldCount);
    assertThat(result.took()).isGreaterThanOrEqualTo(DRAIN);

    // The drain completes once every request has ended with its record and spans: no waiting.
    assertThat(finished).hasSize(STREAMS);
    assertThat(proxy.records().size()).isEqualTo(STREAMS);
    assertThat(openSpans).as("spans started and never ended").isEmpty();
    assertIdle();

    // What the clients saw.
    for (int i = 0; i < STREAMS; i++) {
      Seen s = calls.get(i);
      boolean ended = s.ended.future().await(10, TimeUnit.SECONDS);
      assertThat(s.status).as("stream %d status", i).isEqualTo(200);
      if (held(i)) {
        assertThat(ended).as("held stream %d is cut", i).isFalse();
        assertThat(s.text()).as("held stream %d", i).doesNotContain("[DONE]");
      } else {
        assertThat(ended).as("finite stream %d ends (%s)", i, s.failure).isTrue();
        assertThat(s.text()).as("finite stream %d", i).endsWith(VllmScript.DONE);
      }
    }
    assertThat(upstreamCut).as("held upstream streams cancelled").hasValue(heldCount);

    // What the proxy observed.
    Map<String, Finished> byTrace =
        finished.stream().collect(Collectors.toMap(Finished::traceId, Function.identity()));
    assertThat(byTrace).hasSize(STREAMS);
    for (int i = 0; i < STREAMS; i++) {
      Finished f = byTrace.get(DrainScenario.traceId(i));
      assertThat(f).as("request %d finished", i).isNotNull();
      if (held(i)) {
        assertThat(f.outcome()).isEqualTo("cancelled");
        assertThat(f.errorType()).isEqualTo("shutting_down");
      } else {
        assertThat(f.outcome()).isEqualTo("success");
        assertThat(f.errorType()).isNull();
      }
    }

    // Spans: one root per request, each with its phases, all ended and exported.
    List<SpanData> all = awaitRoots(STREAMS);
    assertThat(spansStarted).hasValue(all.size());
    List<SpanData> roots = all.stream().filter(s -> s.getParentSpanContext().isRemote()).toList();
    assertThat(roots).hasSize(STREAMS);
    Set<String> rootIds = roots.stream().map(SpanData::getSpanId).collect(Collectors.toSet());
    assertThat(all)
        .filteredOn(s -> !s.getParentSpanContext().isRemote())
        .allSatisfy(s -> assertThat(rootIds).contains(s.getParentSpanId()));
    for (SpanData root : roots) {
      int i = Integer.parseInt(root.getTraceId().substring(24), 16) - 0x5eed_0000;
      Map<String, SpanData> children = StreamingRelayTest.childrenByName(all, root);
      String outcome = root.getAttributes().get(AttributeKey.stringKey("llm.outcome"));
      if (held(i)) {
        assertThat(outcome).isEqualTo("cancelled");
        assertThat(root.getAttributes().get(AttributeKey.stringKey("error.type")))
            .isEqualTo("shutting_down");
        assertThat(children.keySet())
            .as("held %d: every phase up to generation", i)
            .containsExactlyInAnyOrderElementsOf(
                Arrays.stream(Phase.values())
                    .filter(p -> p != Phase.WRITE)
                    .map(Phase::spanName)
                    .toList());
        assertThat(
                children
                    .get(Phase.GENERATION.spanName())
                    .getAttributes()
                    .get(AttributeKey.stringKey("error.type")))
            .isEqualTo("shutting_down");
      } else {
        assertThat(outcome).isEqualTo("success");
        assertThat(children.keySet())
            .as("finite %d: every phase", i)
            .containsExactlyInAnyOrderElementsOf(
                Arrays.stream(Phase.values()).map(Phase::spanName).toList());
      }
    }

    // Records: in the store, and on the feed before it ended at close().
    for (int i = 0; i < STREAMS; i++) {
      JsonObject rec = new JsonObject(proxy.records().get(DrainScenario.traceId(i)));
      assertThat(rec.getString("outcome")).isEqualTo(held(i) ? "cancelled" : "success");
    }
    assertThat(feed.ended.future().isComplete()).as("the feed runs until close").isFalse();
    proxy.close().await(10, TimeUnit.SECONDS);
    assertThat(feed.ended.future().await(10, TimeUnit.SECONDS))
        .as("the feed ends cleanly (%s)", feed.failure)
        .isTrue();
    List<JsonObject> fed = DrainScenario.records(feed.text());
    assertThat(fed).hasSize(STREAMS);
    Map<String, JsonObject> fedByTrace =
        fed.stream().collect(Collectors.toMap(r -> r.getString("trace_id"), Function.identity()));
    for (int i = 0; i < STREAMS; i++) {
      JsonObject rec = fedByTrace.get(DrainScenario.traceId(i));
      assertThat(rec).as("record %d on the feed", i).isNotNull();
      if (held(i)) {
        assertThat(rec.getString("outcome")).isEqualTo("cancelled");
        assertThat(rec.getString("error_type")).isEqualTo("shutting_down");
      } else {
        assertThat(rec.getString("outcome")).isEqualTo("success");
      }
    }
  }
}
