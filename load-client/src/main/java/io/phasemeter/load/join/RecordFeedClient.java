package io.phasemeter.load.join;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.http.SseParser;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import java.net.URI;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Subscribes to the proxy's record feed ({@code GET /admin/records/stream}, Server-Sent Events) and
 * hands each record to a consumer, parsed. This HTTP feed is the load client's whole contract with
 * the proxy (the same one users see): no proxy class is used.
 */
public final class RecordFeedClient {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** A record is well under a kilobyte; anything near this is not one. */
  private static final int MAX_RECORD_BYTES = 1 << 20;

  private final Vertx vertx;
  private final URI admin;
  private final String token;
  private HttpClient client;
  private volatile boolean connected;
  private volatile String lastError;
  private long malformed;

  public RecordFeedClient(Vertx vertx, URI admin, String token) {
    this.vertx = vertx;
    this.admin = admin;
    this.token = token;
  }

  /** Connects; completes once the feed answered 200 (records then flow to {@code sink}). */
  public Future<Void> start(Consumer<ServerRecord> sink) {
    Promise<Void> ready = Promise.promise();
    Context ctx = vertx.getOrCreateContext();
    client = vertx.createHttpClient();
    ctx.runOnContext(
        v -> {
          RequestOptions o =
              new RequestOptions()
                  .setMethod(HttpMethod.GET)
                  .setHost(admin.getHost())
                  .setSsl("https".equalsIgnoreCase(admin.getScheme()))
                  .setPort(
                      admin.getPort() > 0
                          ? admin.getPort()
                          : "https".equalsIgnoreCase(admin.getScheme()) ? 443 : 80)
                  .setURI(basePath() + "/admin/records/stream")
                  .putHeader("accept", "text/event-stream");
          if (token != null && !token.isBlank()) {
            o.putHeader("authorization", "Bearer " + token);
          }
          client
              .request(o)
              .compose(r -> r.send())
              .onSuccess(resp -> onResponse(resp, sink, ready))
              .onFailure(
                  t -> {
                    lastError = t.toString();
                    ready.tryFail(
                        "cannot reach the proxy's record feed at "
                            + admin
                            + " ("
                            + t.getMessage()
                            + ")");
                  });
        });
    return ready.future();
  }

  private void onResponse(
      HttpClientResponse resp, Consumer<ServerRecord> sink, Promise<Void> ready) {
    if (resp.statusCode() != 200) {
      ready.tryFail(
          "the proxy's record feed at "
              + admin
              + " answered "
              + resp.statusCode()
              + (resp.statusCode() == 401 ? " (set --admin-token)" : ""));
      return;
    }
    connected = true;
    SseParser events = new SseParser(MAX_RECORD_BYTES);
    resp.handler(
        b -> {
          try {
            events.feed(
                b,
                data -> {
                  ServerRecord r = parse(data);
                  if (r != null) {
                    sink.accept(r);
                  }
                });
          } catch (IllegalStateException tooLong) {
            lastError = "a feed event exceeded " + MAX_RECORD_BYTES + " bytes";
            resp.request().reset();
          }
        });
    resp.endHandler(v -> connected = false);
    resp.exceptionHandler(
        t -> {
          connected = false;
          lastError = t.toString();
        });
    ready.tryComplete();
  }

  private String basePath() {
    String p = admin.getRawPath() == null ? "" : admin.getRawPath();
    return p.endsWith("/") ? p.substring(0, p.length() - 1) : p;
  }

  /** Parses one record; null (and counted) when it is not a v1 record. */
  public ServerRecord parse(String json) {
    try {
      JsonNode n = JSON.readTree(json);
      if (n == null || n.path("v").asInt() != 1 || !n.hasNonNull("trace_id")) {
        malformed++;
        return null;
      }
      Map<String, Double> phases = new HashMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = n.path("phases_ms").fields();
          it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        phases.put(e.getKey(), e.getValue().asDouble());
      }
      return new ServerRecord(
          n.get("trace_id").asText(),
          n.path("model").asText(null),
          n.path("pool").asText(null),
          n.path("stream").asBoolean(),
          n.path("status").asInt(),
          n.path("outcome").asText(null),
          n.path("root_ms").asDouble(),
          n.hasNonNull("server_ttft_ms") ? n.get("server_ttft_ms").asDouble() : null,
          phases,
          n.hasNonNull("unattributed_ms") ? n.get("unattributed_ms").asDouble() : null,
          n.hasNonNull("tpot_ms") ? n.get("tpot_ms").asDouble() : null,
          n.path("tokens").hasNonNull("input") ? n.path("tokens").get("input").asLong() : null,
          n.path("tokens").hasNonNull("output") ? n.path("tokens").get("output").asLong() : null,
          n.path("sampled").asBoolean(true),
          n.hasNonNull("engine_status") ? n.get("engine_status").asText() : null,
          n.path("external").asBoolean(false),
          n.hasNonNull("route") ? n.get("route").asText() : null,
          n.hasNonNull("operation") ? n.get("operation").asText() : null);
    } catch (Exception e) {
      malformed++;
      return null;
    }
  }

  /** Whether the feed is still open. */
  public boolean connected() {
    return connected;
  }

  /** The last transport error, or null. */
  public String lastError() {
    return lastError;
  }

  /** Feed events that were not v1 records. */
  public long malformed() {
    return malformed;
  }

  public Future<Void> close() {
    return client == null ? Future.succeededFuture() : client.close();
  }
}
