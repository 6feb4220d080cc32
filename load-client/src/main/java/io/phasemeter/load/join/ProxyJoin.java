package io.phasemeter.load.join;

import io.phasemeter.load.http.HttpGet;
import io.phasemeter.load.http.Transport;
import io.vertx.core.Vertx;
import io.vertx.core.json.JsonObject;
import java.net.URI;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The run's side of the proxies: their record feeds into the {@link Joiner} (one per replica,
 * {@link ReplicaFeeds}), what a proxy says of itself, the end-of-run lookup of records still
 * unjoined ({@link RecordFetch}), and how the join went. Without {@code --admin} there is no feed
 * and every request pairs alone.
 */
public final class ProxyJoin implements AutoCloseable {
  private final Vertx vertx;
  private final Admins admins;
  private final String adminToken;
  private final Joiner joiner;
  private final Consumer<String> say;
  private final Consumer<String> progress;
  private final Duration fetchTimeout;
  private final ReplicaFeeds.Resolver resolver;
  private final Transport transport;
  private ReplicaFeeds feeds;
  // What the join came to, taken before the feeds are closed (their state is then "down").
  private volatile JoinCounts finalCounts;
  private RecordFetch.Result fetched;

  /**
   * @param admins the proxies' admin addresses, or null for no join
   * @param say where a line for the user goes (a reconnect of a feed)
   */
  public ProxyJoin(
      Vertx vertx, Admins admins, String adminToken, Joiner joiner, Consumer<String> say) {
    this(
        vertx,
        admins,
        adminToken,
        joiner,
        say,
        say,
        Duration.ZERO,
        ReplicaFeeds.JDK,
        Transport.DEFAULT);
  }

  /**
   * @param admins the proxies' admin addresses, or null for no join
   * @param say where a line for the user goes (a reconnect of a feed)
   * @param progress where the end-of-run fetch's progress goes (stderr)
   * @param fetchTimeout how long the end-of-run fetch may take ({@code --join-fetch-timeout}; zero:
   *     no fetch)
   * @param resolver resolves {@code --admin-discover}'s name
   * @param transport the run's trust over https ({@code --ca-file}, {@code --insecure}): the feeds,
   *     the stats and the fetch reach an https admin listener with it
   */
  public ProxyJoin(
      Vertx vertx,
      Admins admins,
      String adminToken,
      Joiner joiner,
      Consumer<String> say,
      Consumer<String> progress,
      Duration fetchTimeout,
      ReplicaFeeds.Resolver resolver,
      Transport transport) {
    this.transport = transport;
    this.vertx = vertx;
    this.admins = admins;
    this.adminToken = adminToken;
    this.joiner = joiner;
    this.say = say;
    this.progress = progress;
    this.fetchTimeout = fetchTimeout;
    this.resolver = resolver;
  }

  /**
   * Connects to every replica's record feed: waits up to {@value
   * RecordFeedClient#FIRST_WAIT_SECONDS} s for a place on each (429) or for its admin listener
   * (refused), saying so once.
   *
   * @param sampledOnly join only the records whose trace the proxy exported
   */
  public void start(boolean sampledOnly) throws Exception {
    joiner.sampledOnly(sampledOnly);
    feeds =
        new ReplicaFeeds(
            vertx,
            admins,
            adminToken,
            joiner,
            say,
            resolver,
            Duration.ofSeconds(RecordFeedClient.FIRST_WAIT_SECONDS),
            System::nanoTime,
            transport);
    feeds.start();
  }

  /** Whether the run joins with the proxy's records. */
  public boolean joining() {
    return feeds != null;
  }

  /** A finished measured request: waits for its record when joining, else pairs alone. */
  public void client(io.phasemeter.load.http.ClientResult r) {
    if (feeds != null) {
      joiner.client(r);
    } else {
      joiner.alone(r);
    }
  }

  /**
   * The proxy's version, sampling and record schema from {@code /admin/stats} of the first replica
   * whose feed is open, for conditions; the replicas' names beside them.
   */
  public Map<String, Object> proxyConditions() {
    Map<String, Object> c = new LinkedHashMap<>();
    List<Replica> all = feeds == null ? List.of() : feeds.replicas();
    URI admin =
        all.stream().filter(Replica::up).map(Replica::admin).findFirst().orElse(admins.any());
    try {
      HttpGet.Result r = HttpGet.get(vertx, admin.resolve("/admin/stats"), adminToken, transport);
      if (r.status() == 200) {
        JsonObject stats = new JsonObject(r.body());
        c.put("proxy_version", stats.getValue("version"));
        c.put("proxy_sampling", stats.getValue("sampling"));
        c.put("record_schema", stats.getValue("record_schema"));
      }
    } catch (Exception e) {
      c.put("proxy_stats_error", e.getMessage());
    }
    c.put("join_replicas_at_start", all.stream().map(Replica::name).toList());
    return c;
  }

  /** Each replica's part so far (the live table's lines); empty without a feed. */
  public List<ReplicaCounts> replicaCounts() {
    JoinCounts done = finalCounts;
    return done != null ? done.replicas() : feeds == null ? List.of() : feeds.counts();
  }

  /** The feeds' reconnects and missed records, per replica and in total; null without a feed. */
  public JoinCounts feedCounts() {
    if (feeds == null) {
      return null;
    }
    JoinCounts done = finalCounts;
    return done != null ? done : JoinCounts.of(feeds.counts());
  }

  /**
   * Waits up to {@code grace} for the records of requests still waiting (a feed that dropped is
   * waited for too: it may be back within it), then looks up those still unjoined on every replica
   * ({@link RecordFetch}, up to the fetch timeout), then ends the join: those still waiting pair
   * alone.
   */
  public void finish(Duration grace) throws InterruptedException {
    long joinDeadline = System.nanoTime() + grace.toNanos();
    while (feeds != null
        && feeds.following()
        && joiner.waiting() > 0
        && System.nanoTime() < joinDeadline) {
      Thread.sleep(20);
    }
    if (feeds != null && joiner.waiting() > 0 && !fetchTimeout.isZero()) {
      fetched =
          new RecordFetch(
                  vertx,
                  adminToken,
                  joiner,
                  feeds::parse,
                  line -> progress.accept(line),
                  System::nanoTime,
                  transport)
              .fetch(feeds.fetchable(), fetchTimeout);
    }
    joiner.flush();
    if (feeds != null) {
      // After the flush no request can join any more (a lookup answered late finds none
      // waiting), so these counts and the run's join.joined describe the same pairs; before the
      // feeds close, so that each replica's state is the one it ended the run in.
      finalCounts = JoinCounts.of(feeds.counts());
    }
  }

  /**
   * Puts how the join went into {@code conditions} and returns the note on what the envelopes
   * describe, or null when every record was joined; nothing without a feed.
   *
   * @param coverage share of successful requests that joined a record
   */
  public String describe(
      List<Pair> pairs, Map<String, Object> conditions, boolean sampledOnly, double coverage) {
    if (feeds == null) {
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
    conditions.put("feed_malformed_events", feeds.malformed());
    conditions.put("join_replicas_ignored", feeds.ignored());
    if (admins.discovers()) {
      conditions.put("join_resolve_failures", feeds.resolveFailures());
    }
    if (fetched != null) {
      conditions.put("join_fetch_asked", fetched.asked());
      conditions.put("join_fetch_errors", fetched.errors());
      conditions.put("join_fetch_timed_out", fetched.timedOut());
    }
    return joinBasis;
  }

  @Override
  public void close() {
    if (feeds != null) {
      feeds.close();
    }
  }
}
