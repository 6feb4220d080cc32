package io.phasemeter.load.join;

import io.phasemeter.load.http.Transport;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * One record feed per proxy replica, all into one {@link Joiner}: the admin URLs given, and every
 * address a name resolves to ({@code --admin-discover dns://NAME:PORT}), resolved again every
 * {@link #RESOLVE_EVERY} so that replicas that appear (a scale-up, a pod restarted elsewhere) are
 * followed too. A replica that leaves the name keeps its feed while the feed is up, and is followed
 * no more once it is down too ({@link #leave}); a feed that drops is reconnected with back-off
 * ({@link RecordFeedClient}). At most {@value #MAX_REPLICAS} replicas: the rest are ignored, said
 * once and counted.
 *
 * <p>Names are resolved by the JDK ({@link InetAddress#getAllByName}) on a worker thread, never on
 * an event loop: it honours {@code -Djdk.net.hosts.file} and the JVM's DNS cache, which {@code
 * LoadMain} lowers so that a resolution every 10 s sees the Service's endpoints change.
 */
public final class ReplicaFeeds implements AutoCloseable {
  /** The most replicas followed: a fleet larger than this is not one run's join. */
  public static final int MAX_REPLICAS = 256;

  /** How often the name is resolved again. */
  public static final Duration RESOLVE_EVERY = Duration.ofSeconds(10);

  /** Resolves a name to every address it has (the JDK's, or a test's). */
  @FunctionalInterface
  public interface Resolver {
    List<InetAddress> resolve(String host) throws UnknownHostException;
  }

  /** The JDK's resolver: every address of the name. */
  public static final Resolver JDK = host -> List.of(InetAddress.getAllByName(host));

  private final Vertx vertx;
  private final Admins admins;
  private final String token;
  private final Joiner joiner;
  private final Consumer<String> say;
  private final Resolver resolver;
  private final Duration firstWait;
  private final LongSupplier nanoTime;
  private final Duration resolveEvery;
  private final Transport transport;
  private final List<Replica> replicas = new CopyOnWriteArrayList<>();
  private final Map<String, Replica> byName = new ConcurrentHashMap<>();
  // Replicas whose first subscription failed: tried again when the name still resolves to them.
  private final Map<String, Replica> notFollowed = new ConcurrentHashMap<>();
  private final AtomicLong ignored = new AtomicLong();
  private final AtomicLong resolveFailures = new AtomicLong();
  private volatile boolean closed;
  private volatile boolean resolving;
  private long timer = -1;

  /**
   * @param say where a line for the user goes (a reconnect, a replica found or not followed)
   * @param resolver resolves {@code admins}' name ({@link #JDK} but in tests)
   * @param firstWait how long a first subscription, and the first resolution, may wait
   */
  public ReplicaFeeds(
      Vertx vertx,
      Admins admins,
      String token,
      Joiner joiner,
      Consumer<String> say,
      Resolver resolver,
      Duration firstWait,
      LongSupplier nanoTime,
      Transport transport) {
    this(
        vertx, admins, token, joiner, say, resolver, firstWait, nanoTime, RESOLVE_EVERY, transport);
  }

  /** As the public constructor, resolving every {@code resolveEvery} (tests). */
  ReplicaFeeds(
      Vertx vertx,
      Admins admins,
      String token,
      Joiner joiner,
      Consumer<String> say,
      Resolver resolver,
      Duration firstWait,
      LongSupplier nanoTime,
      Duration resolveEvery) {
    this(
        vertx,
        admins,
        token,
        joiner,
        say,
        resolver,
        firstWait,
        nanoTime,
        resolveEvery,
        Transport.DEFAULT);
  }

  private ReplicaFeeds(
      Vertx vertx,
      Admins admins,
      String token,
      Joiner joiner,
      Consumer<String> say,
      Resolver resolver,
      Duration firstWait,
      LongSupplier nanoTime,
      Duration resolveEvery,
      Transport transport) {
    this.transport = transport;
    this.resolveEvery = resolveEvery;
    this.vertx = vertx;
    this.admins = admins;
    this.token = token;
    this.joiner = joiner;
    this.say = say;
    this.resolver = resolver;
    this.firstWait = firstWait;
    this.nanoTime = nanoTime;
  }

  /**
   * Subscribes to every replica and returns once each first subscription is settled. Every admin
   * URL given must answer (as one {@code --admin} always had to); of a name's addresses, at least
   * one: the others are said and tried again at the next resolution.
   *
   * @throws Exception naming the admin that failed, or the name that did not resolve
   */
  public void start() throws Exception {
    List<Replica> fixed = new ArrayList<>();
    for (URI u : admins.urls()) {
      Replica r = add(u);
      if (r != null) {
        fixed.add(r);
      }
    }
    List<Replica> found = new ArrayList<>();
    if (admins.discovers()) {
      for (InetAddress a : firstResolution()) {
        Replica r = add(uri(a));
        if (r != null) {
          found.add(r);
        }
      }
    }
    List<Future<Void>> fixedStarts = fixed.stream().map(this::follow).toList();
    List<Future<Void>> foundStarts = found.stream().map(this::follow).toList();
    long waitSeconds = firstWait.toSeconds() + 10;
    // The feed's own wait ends first; this bounds a connection that never answers.
    try {
      Future.join(new ArrayList<Future<?>>(concat(fixedStarts, foundStarts)))
          .otherwiseEmpty()
          .await(waitSeconds, TimeUnit.SECONDS);
    } catch (java.util.concurrent.TimeoutException e) {
      // Said below, per feed.
    }
    for (Future<Void> f : fixedStarts) {
      if (f.failed()) {
        throw new IllegalStateException(f.cause().getMessage(), f.cause());
      }
      if (!f.succeeded()) {
        throw new IllegalStateException("the record feed did not answer in " + waitSeconds + " s");
      }
    }
    if (admins.discovers()) {
      if (foundStarts.stream().noneMatch(Future::succeeded) && fixed.isEmpty()) {
        String why =
            foundStarts.stream()
                .filter(Future::failed)
                .map(f -> f.cause().getMessage())
                .findFirst()
                .orElse("no record feed answered");
        throw new IllegalStateException(
            "no replica of " + admins.discoverText() + " could be followed: " + why);
      }
      timer = vertx.setPeriodic(resolveEvery.toMillis(), id -> resolveAgain());
    }
  }

  private static <T> List<T> concat(List<T> a, List<T> b) {
    List<T> all = new ArrayList<>(a);
    all.addAll(b);
    return all;
  }

  /**
   * The name's addresses, waiting up to the first wait for it to have one (a Job may start before
   * the Service's pods are ready), saying so once.
   */
  private List<InetAddress> firstResolution() throws Exception {
    long deadline = nanoTime.getAsLong() + firstWait.toNanos();
    boolean told = false;
    while (true) {
      String why;
      try {
        List<InetAddress> all = resolve();
        if (!all.isEmpty()) {
          return all;
        }
        why = "it has no address";
      } catch (UnknownHostException e) {
        why = "it does not resolve";
      }
      if (nanoTime.getAsLong() >= deadline) {
        throw new IllegalStateException(
            "--admin-discover "
                + admins.discoverText()
                + ": "
                + why
                + (firstWait.isZero() ? "" : " (tried for " + firstWait.toSeconds() + " s)"));
      }
      if (!told) {
        told = true;
        say.accept(
            "record feed: "
                + admins.discoverHost()
                + " "
                + why
                + " yet; trying again for up to "
                + firstWait.toSeconds()
                + " s");
      }
      Thread.sleep(Math.min(1000, Math.max(1, firstWait.toMillis())));
    }
  }

  private List<InetAddress> resolve() throws UnknownHostException {
    return resolver.resolve(admins.discoverHost());
  }

  /** Resolves the name again on a worker thread; follows addresses not seen before. */
  private void resolveAgain() {
    if (closed || resolving) {
      return;
    }
    resolving = true;
    vertx
        .executeBlocking(this::resolve, false)
        .onComplete(
            ar -> {
              resolving = false;
              if (closed) {
                return;
              }
              if (ar.failed()) {
                // The name may come back: the replicas already followed keep their feeds.
                resolveFailures.incrementAndGet();
                return;
              }
              java.util.Set<String> resolved = new java.util.HashSet<>();
              for (InetAddress a : ar.result()) {
                resolved.add(Admins.replicaName(uri(a)));
              }
              leave(resolved);
              for (InetAddress a : ar.result()) {
                URI u = uri(a);
                Replica again = notFollowed.remove(Admins.replicaName(u));
                if (again != null) {
                  follow(again);
                  continue;
                }
                if (!byName.containsKey(Admins.replicaName(u))) {
                  Replica r = add(u);
                  if (r != null) {
                    say.accept("record feed: replica " + r.name() + " appeared; following it");
                    follow(r);
                  }
                }
              }
            });
  }

  /**
   * Stops following the replicas found by the name that it no longer resolves to and whose feed is
   * down (a deleted pod: reconnecting would only time out against its address, or follow another
   * pod that takes the address later): their counts stay, state {@code down}, and the end-of-run
   * fetch does not ask them. One that comes back in a later resolution is followed again. A replica
   * whose feed is still up keeps it until it drops.
   */
  private void leave(java.util.Set<String> resolved) {
    for (Replica r : replicas()) {
      RecordFeedClient f = r.feed();
      if (f == null
          || f.connected()
          || admins.urls().contains(r.admin())
          || resolved.contains(r.name())
          || notFollowed.containsKey(r.name())) {
        continue;
      }
      r.feed(null);
      r.left(true);
      notFollowed.put(r.name(), r);
      say.accept(
          label(r)
              + "no longer in "
              + admins.discoverHost()
              + " and its feed is down: not followed any more");
    }
  }

  /** Replicas the end-of-run fetch may ask: not those that left the name with their feed down. */
  public List<Replica> fetchable() {
    return replicas().stream().filter(r -> !r.hasLeft()).toList();
  }

  /** A new replica, or null when it is already followed or the limit is reached. */
  private synchronized Replica add(URI admin) {
    String name = Admins.replicaName(admin);
    if (byName.containsKey(name)) {
      return null;
    }
    if (replicas.size() >= MAX_REPLICAS) {
      if (ignored.getAndIncrement() == 0) {
        say.accept(
            "record feed: more than "
                + MAX_REPLICAS
                + " replicas; "
                + name
                + " and any after it are not followed (counted: join_replicas_ignored)");
      }
      return null;
    }
    Replica r = new Replica(admin);
    replicas.add(r);
    byName.put(name, r);
    return r;
  }

  /** Subscribes to {@code r}'s feed; a failed first subscription is said, and tried again later. */
  private Future<Void> follow(Replica r) {
    r.left(false);
    RecordFeedClient feed =
        new RecordFeedClient(
            vertx,
            r.admin(),
            token,
            c -> say.accept(label(r) + c.line()),
            line -> say.accept(label(r) + line),
            firstWait,
            nanoTime,
            transport);
    r.feed(feed);
    if (closed) {
      return Future.failedFuture("closed");
    }
    return feed.start(s -> joiner.record(s, r))
        .onFailure(
            t -> {
              if (closed) {
                return;
              }
              if (admins.discovers() && !admins.urls().contains(r.admin())) {
                notFollowed.put(r.name(), r);
                say.accept(
                    label(r)
                        + "not followed: "
                        + t.getMessage()
                        + "; tried again while "
                        + admins.discoverHost()
                        + " resolves to it");
              }
            });
  }

  /** The line's prefix naming the replica, when there can be several. */
  private String label(Replica r) {
    return admins.urls().size() + (admins.discovers() ? 2 : 0) > 1
        ? "replica " + r.name() + ": "
        : "";
  }

  /** The admin URL of a resolved address on the name's port. */
  private URI uri(InetAddress a) {
    String host = a.getHostAddress();
    if (a instanceof Inet6Address) {
      int zone = host.indexOf('%');
      host = "[" + (zone < 0 ? host : host.substring(0, zone)) + "]";
    }
    return URI.create("http://" + host + ":" + admins.discoverPort());
  }

  /** Every replica found so far, in the order found. */
  public List<Replica> replicas() {
    return List.copyOf(replicas);
  }

  /** Whether any feed is still followed (until {@link #close()}). */
  public boolean following() {
    for (Replica r : replicas) {
      RecordFeedClient f = r.feed();
      if (f != null && f.following()) {
        return true;
      }
    }
    return false;
  }

  /** Whether every replica's feed is open now. */
  public boolean allConnected() {
    for (Replica r : replicas) {
      RecordFeedClient f = r.feed();
      if (f == null || !f.connected()) {
        return false;
      }
    }
    return true;
  }

  /** Replicas beyond {@value #MAX_REPLICAS}, not followed. */
  public long ignored() {
    return ignored.get();
  }

  /** Resolutions of the name that failed after the first (its replicas kept their feeds). */
  public long resolveFailures() {
    return resolveFailures.get();
  }

  /** Feed events of every replica that were not v1 records. */
  public long malformed() {
    long n = 0;
    for (Replica r : replicas) {
      RecordFeedClient f = r.feed();
      n += f == null ? 0 : f.malformed();
    }
    return n;
  }

  /** Parses a record as a feed does (a fetched record is the same JSON). */
  public ServerRecord parse(String json) {
    for (Replica r : replicas) {
      RecordFeedClient f = r.feed();
      if (f != null) {
        return f.parse(json);
      }
    }
    return null;
  }

  /** Each replica's part, shares of the total joined. */
  public List<ReplicaCounts> counts() {
    List<Replica> all = replicas();
    long total = 0;
    for (Replica r : all) {
      total += r.joined();
    }
    List<ReplicaCounts> out = new ArrayList<>(all.size());
    for (Replica r : all) {
      out.add(r.counts(total));
    }
    return out;
  }

  /** Stops resolving and following: no reconnect after this. */
  @Override
  public void close() {
    closed = true;
    if (timer >= 0) {
      vertx.cancelTimer(timer);
    }
    for (Replica r : replicas) {
      RecordFeedClient f = r.feed();
      if (f != null) {
        f.close();
      }
    }
  }
}
