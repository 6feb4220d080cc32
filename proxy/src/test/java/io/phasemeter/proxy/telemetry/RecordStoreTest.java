package io.phasemeter.proxy.telemetry;

import static org.assertj.core.api.Assertions.assertThat;

import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.engine.EngineSpans;
import io.phasemeter.proxy.engine.EngineTimings;
import io.phasemeter.proxy.pipeline.FinishedRequests;
import io.phasemeter.proxy.pipeline.SloJudgement;
import io.vertx.core.json.JsonObject;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/** The record store at its bound keeps exactly the newest records. */
class RecordStoreTest {
  private static final SdkTracerProvider TRACING = SdkTracerProvider.builder().build();
  private static final Tracer TRACER = TRACING.get("test");

  @AfterAll
  static void closeTracing() {
    TRACING.close();
  }

  /** A record whose output token count says which one it is. */
  private static RequestRecord record(String traceId, long n) {
    return RequestRecord.of(
        FinishedRequests.streamed(TRACER, traceId, n, 1, 1, 1, 1, 1, 1, 1), true);
  }

  /** A store of {@code size} records kept for {@code ttl}, exporting every trace. */
  private static RecordStore store(int size, Duration ttl, EngineSpans engine) {
    return new RecordStore(
        size,
        ttl,
        RecordFeed.ofRecords(16, Duration.ofSeconds(30), System::nanoTime, () -> {}, () -> {}),
        new ExportPolicy(1.0, true, Duration.ofSeconds(1)),
        engine);
  }

  private static String traceId(int i) {
    return String.format("%032x", i + 1);
  }

  private static long outputTokens(String json) {
    return new JsonObject(json).getJsonObject("tokens").getLong("output");
  }

  @Test
  void keepsExactlyTheNewestAtTheBound() {
    // 10,000 places span three column chunks (4,096, 4,096 and a short last one of 1,808).
    int size = 10_000;
    RecordStore store = store(size, Duration.ofMinutes(10), null);
    int puts = 25_000;
    for (int i = 0; i < puts; i++) {
      store.put(record(traceId(i), i), System.nanoTime());
    }
    assertThat(store.size()).isEqualTo(size);
    for (int i = 0; i < puts - size; i++) {
      assertThat(store.get(traceId(i))).as(traceId(i)).isNull();
    }
    for (int i = puts - size; i < puts; i++) {
      assertThat(outputTokens(store.get(traceId(i)))).isEqualTo(i);
    }
  }

  @Test
  void recordsOlderThanTheTtlAreGone() {
    RecordStore store = store(10, Duration.ofMillis(1), null);
    String old = traceId(1);
    String reused = traceId(2);
    store.put(record(old, 1), System.nanoTime() - Duration.ofSeconds(1).toNanos());
    store.put(record(reused, 1), System.nanoTime());
    store.put(record(reused, 2), System.nanoTime());
    assertThat(store.get(old)).isNull();
    assertThat(outputTokens(store.get(reused))).isEqualTo(2);
  }

  @Test
  void aRecordIsRenderedFromItsNumbersWhenRead() {
    String id = traceId(7);
    RequestRecord r =
        RequestRecord.of(
            FinishedRequests.streamed(TRACER, id, 64, 1, 2, 3, 4, 500, 1200, 5), false);
    JsonObject json = new JsonObject(r.json());
    assertThat(json.getString("trace_id")).isEqualTo(id);
    assertThat(json.getJsonObject("phases_ms").getMap())
        .containsEntry("auth", 1.0)
        .containsEntry("queue", 500.0)
        .containsEntry("generation", 1200.0)
        .containsEntry("write", 5.0);
    assertThat(json.getDouble("root_ms")).isEqualTo(1715.0);
    assertThat(json.getDouble("gateway_ms")).as("auth + prepare + route").isEqualTo(8.0);
    assertThat(json.getDouble("unattributed_ms")).isEqualTo(0.0);
    assertThat(json.getBoolean("sampled")).isFalse();
    assertThat(json.containsKey("engine_status")).isFalse();
    // A request fixture without a connection: HTTP/1.1, plaintext (the field is there, null).
    assertThat(json.getString("network_protocol_version")).isEqualTo("1.1");
    assertThat(json.containsKey("tls_protocol_version")).isTrue();
    assertThat(json.getString("tls_protocol_version")).isNull();
  }

  @Test
  void theIndexAgreesWithAPlainModelThroughEvictionsAndReusedIds() {
    int size = 64;
    RecordStore store = store(size, Duration.ofMinutes(10), null);
    // The model: which trace id each ring place holds, and what the newest put of an id carried.
    String[] ring = new String[size];
    java.util.Map<String, Long> newest = new java.util.HashMap<>();
    java.util.Random random = new java.util.Random(42);
    int next = 0;
    for (int n = 0; n < 5_000; n++) {
      // Ids that collide in the table's buckets too: few distinct values, many reuses.
      String id = String.format("%016x%016x", random.nextInt(8), random.nextInt(40));
      for (int k = 0; k < size; k++) {
        if (id.equals(ring[k])) {
          ring[k] = null;
        }
      }
      ring[next] = id;
      next = (next + 1) % size;
      newest.put(id, (long) n);
      store.put(record(id, n), System.nanoTime());

      if (n % 97 == 0 || n > 4_900) {
        java.util.Set<String> held = new java.util.HashSet<>(java.util.Arrays.asList(ring));
        for (String known : newest.keySet()) {
          String json = store.get(known);
          if (held.contains(known)) {
            assertThat(json).as(known + " after " + n).isNotNull();
            assertThat(outputTokens(json)).isEqualTo(newest.get(known));
          } else {
            assertThat(json).as(known + " after " + n).isNull();
          }
        }
      }
    }
    assertThat(store.get("not a trace id")).isNull();
    assertThat(store.get("zz" + "0".repeat(30))).isNull();
  }

  @Test
  void aRecordReadBackFromTheColumnsIsTheRecordThatWasPut() {
    int size = 50;
    EngineSpans engine =
        new EngineSpans(
            new ProxyConfig.EngineSpans(true, Duration.ofSeconds(1), 16),
            System::nanoTime,
            java.util.List.of());
    RecordStore store = store(size, Duration.ofMinutes(10), engine);
    java.util.Random random = new java.util.Random(7);
    java.util.List<RequestRecord> kept = new java.util.ArrayList<>();
    for (int n = 0; n < 3 * size; n++) {
      RequestRecord r = randomRecord(random, n);
      store.put(r, System.nanoTime());
      kept.add(r);
    }
    // The ring has wrapped twice: the newest `size` are held, each exactly as it was put.
    for (RequestRecord r : kept.subList(2 * size, 3 * size)) {
      assertThat(store.get(r.traceId())).isEqualTo(r.json());
    }
    assertThat(store.get(kept.get(0).traceId())).isNull();
  }

  /** A record with every field drawn at random, absent values (-1, null) included. */
  private static RequestRecord randomRecord(java.util.Random random, int n) {
    long[] phases = new long[io.phasemeter.proxy.pipeline.Phase.all().length];
    for (int i = 0; i < phases.length; i++) {
      phases[i] = maybeAbsent(random);
    }
    String engineStatus = pick(random, null, "matched", "missing");
    EngineTimings timings =
        "matched".equals(engineStatus)
            ? new EngineTimings(
                maybeAbsent(random),
                maybeAbsent(random),
                maybeAbsent(random),
                maybeAbsent(random),
                maybeAbsent(random))
            : null;
    return new RequestRecord(
        random.nextLong(),
        n,
        random.nextLong(),
        pick(random, "sim-llama", "other"),
        pick(random, "default", "none"),
        pick(random, "/v1/chat/completions", "/v1/completions", "/tokenize"),
        pick(random, "chat", "text_completion", null),
        random.nextBoolean(),
        pick(random, 200, 400, 429, 503),
        pick(random, "success", "client_error", "upstream_error", "cancelled"),
        pick(random, null, "invalid_request_error", "upstream_404"),
        maybeAbsent(random),
        maybeAbsent(random),
        phases,
        maybeAbsent(random),
        random.nextLong() % 1_000_000_000L,
        maybeAbsent(random),
        maybeAbsent(random),
        maybeAbsent(random),
        pick(random, null, "stop", "length", "an engine's own reason"),
        pick(random, "high", "normal", "low"),
        random.nextInt(4),
        pick(random, null, "least_loaded", "engine_load", "engine_load_fallback"),
        maybeAbsent(random),
        pick(random, "1.0", "1.1", "2"),
        pick(random, null, "1.2", "1.3"),
        random.nextBoolean(),
        pick(random, null, "team-a"),
        pick(random, "other", "team-a"),
        random.nextBoolean(),
        engineStatus,
        timings,
        pick(random, null, MET, MISSED));
  }

  private static final io.phasemeter.core.slo.Objectives OBJECTIVES =
      io.phasemeter.core.slo.Objectives.parse("test", "server_ttft=500ms,tpot=12.5ms");
  private static final SloJudgement MET =
      new SloJudgement(
          "chat", 0, true, "none", OBJECTIVES, java.util.List.of(), java.util.List.of());
  private static final SloJudgement MISSED =
      new SloJudgement(
          null,
          -1,
          false,
          "tpot",
          OBJECTIVES,
          java.util.List.of("tpot"),
          java.util.List.of("server_ttft", "tpot"));

  private static long maybeAbsent(java.util.Random random) {
    return random.nextInt(4) == 0 ? -1 : (long) random.nextInt(Integer.MAX_VALUE) * 1_000L;
  }

  @SafeVarargs
  private static <T> T pick(java.util.Random random, T... values) {
    return values[random.nextInt(values.length)];
  }
}
