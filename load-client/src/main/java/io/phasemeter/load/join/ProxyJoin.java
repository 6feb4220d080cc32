package io.phasemeter.load.join;

import io.phasemeter.load.http.HttpGet;
import io.vertx.core.Vertx;
import io.vertx.core.json.JsonObject;
import java.net.URI;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The run's side of the proxy: its record feed into the {@link Joiner}, what the proxy says of
 * itself, and how the join went. Without {@code --admin} there is no feed and every request pairs
 * alone.
 */
public final class ProxyJoin implements AutoCloseable {
  private final Vertx vertx;
  private final URI admin;
  private final String adminToken;
  private final Joiner joiner;
  private final Consumer<String> say;
  private RecordFeedClient feed;

  /**
   * @param admin the proxy's admin URL, or null for no join
   * @param say where a line for the user goes (a reconnect of the feed)
   */
  public ProxyJoin(Vertx vertx, URI admin, String adminToken, Joiner joiner, Consumer<String> say) {
    this.vertx = vertx;
    this.admin = admin;
    this.adminToken = adminToken;
    this.joiner = joiner;
    this.say = say;
  }

  /**
   * Connects to the proxy's record feed: waits up to {@value RecordFeedClient#FIRST_WAIT_SECONDS} s
   * for a place on it (429) or for its admin listener (refused), saying so once.
   *
   * @param sampledOnly join only the records whose trace the proxy exported
   */
  public void start(boolean sampledOnly) throws Exception {
    joiner.sampledOnly(sampledOnly);
    Duration wait = Duration.ofSeconds(RecordFeedClient.FIRST_WAIT_SECONDS);
    feed =
        new RecordFeedClient(
            vertx, admin, adminToken, r -> say.accept(r.line()), say, wait, System::nanoTime);
    // The feed's own wait ends first; this bounds a connection that never answers.
    feed.start(joiner::record).await(wait.toSeconds() + 10, TimeUnit.SECONDS);
  }

  /** Whether the run joins with the proxy's records. */
  public boolean joining() {
    return feed != null;
  }

  /** A finished measured request: waits for its record when joining, else pairs alone. */
  public void client(io.phasemeter.load.http.ClientResult r) {
    if (feed != null) {
      joiner.client(r);
    } else {
      joiner.alone(r);
    }
  }

  /** The proxy's version, sampling and record schema from {@code /admin/stats}, for conditions. */
  public Map<String, Object> proxyConditions() {
    Map<String, Object> c = new LinkedHashMap<>();
    try {
      HttpGet.Result r = HttpGet.get(vertx, admin.resolve("/admin/stats"), adminToken);
      if (r.status() == 200) {
        JsonObject stats = new JsonObject(r.body());
        c.put("proxy_version", stats.getValue("version"));
        c.put("proxy_sampling", stats.getValue("sampling"));
        c.put("record_schema", stats.getValue("record_schema"));
      }
    } catch (Exception e) {
      c.put("proxy_stats_error", e.getMessage());
    }
    return c;
  }

  /** The feed's reconnects and missed records; null without a feed. */
  public RecordFeedClient.Counts feedCounts() {
    return feed == null ? null : feed.counts();
  }

  /**
   * Waits up to {@code grace} for the records of requests still waiting, then ends the join: those
   * still waiting pair alone. A feed that dropped is waited for too: it may be back within it.
   */
  public void finish(Duration grace) throws InterruptedException {
    long joinDeadline = System.nanoTime() + grace.toNanos();
    while (feed != null
        && feed.following()
        && joiner.waiting() > 0
        && System.nanoTime() < joinDeadline) {
      Thread.sleep(20);
    }
    joiner.flush();
  }

  /**
   * Puts how the join went into {@code conditions} and returns the note on what the envelopes
   * describe, or null when every record was joined; nothing without a feed.
   *
   * @param coverage share of successful requests that joined a record
   */
  public String describe(
      List<Pair> pairs, Map<String, Object> conditions, boolean sampledOnly, double coverage) {
    if (feed == null) {
      return null;
    }
    String joinBasis = null;
    long exported = pairs.stream().filter(p -> p.joined() && p.server().sampled()).count();
    long joinedOk = pairs.stream().filter(p -> p.joined() && p.client().ok()).count();
    double exportedShare = pairs.isEmpty() ? 1.0 : (double) exported / pairs.size();
    Object sampling = conditions.get("proxy_sampling");
    if (sampledOnly) {
      joinBasis =
          String.format(
              Locale.ROOT,
              "envelopes and server phases come only from the requests whose traces the proxy"
                  + " exported (%s): %d of %d successful requests joined (%.1f%%). With"
                  + " keep_slower_than and a low ratio that share is the slow tail, so these"
                  + " quantiles describe the tail, not every request.",
              sampling,
              joinedOk,
              pairs.stream().filter(p -> p.client().ok()).count(),
              100 * coverage);
    } else if (exportedShare < 1.0) {
      joinBasis =
          String.format(
              Locale.ROOT,
              "every record was joined from the feed; the proxy exported the traces of %.1f%% of"
                  + " requests (%s)",
              100 * exportedShare,
              sampling);
    }
    conditions.put(
        "join_basis", joinBasis == null ? "every record from the proxy's feed" : joinBasis);
    conditions.put("join_unsampled_records_left_out", joiner.unsampled());
    conditions.put("join_foreign_records_ignored", joiner.foreign());
    conditions.put("feed_malformed_events", feed.malformed());
    return joinBasis;
  }

  @Override
  public void close() {
    if (feed != null) {
      feed.close();
    }
  }
}
