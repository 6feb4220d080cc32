package io.phasemeter.load.join;

import java.net.URI;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One proxy replica the run joins with: its admin address, its record feed, and what it contributed
 * (requests joined with its records, of which fetched by trace id at the end). A replica's name is
 * {@code host:port} of its admin address ({@link Admins#replicaName}).
 */
public final class Replica {
  private final String name;
  private final URI admin;
  private final AtomicLong joined = new AtomicLong();
  private final AtomicLong fetched = new AtomicLong();
  // Reconnects and missed records of feed clients this replica had before its current one.
  private final AtomicLong earlierReconnects = new AtomicLong();
  private final AtomicLong earlierMissed = new AtomicLong();
  private volatile RecordFeedClient feed;
  private volatile boolean unreachable;
  private volatile boolean left;

  public Replica(URI admin) {
    this.admin = admin;
    this.name = Admins.replicaName(admin);
  }

  /** {@code host:port} of the admin address. */
  public String name() {
    return name;
  }

  /** The admin listener's base URL. */
  public URI admin() {
    return admin;
  }

  /** Requests joined with this replica's records, fetched ones included. */
  public long joined() {
    return joined.get();
  }

  /** Requests joined with a record fetched from this replica by trace id. */
  public long fetched() {
    return fetched.get();
  }

  /** One request joined with this replica's record (by the {@link Joiner}, under its lock). */
  void joinedOne(boolean byFetch) {
    joined.incrementAndGet();
    if (byFetch) {
      fetched.incrementAndGet();
    }
  }

  /** The feed client now following this replica; null before one is made. */
  RecordFeedClient feed() {
    return feed;
  }

  /** Follows this replica with {@code next}, keeping what an earlier client counted. */
  void feed(RecordFeedClient next) {
    RecordFeedClient before = feed;
    if (before != null) {
      RecordFeedClient.Counts c = before.counts();
      earlierReconnects.addAndGet(c.reconnects());
      earlierMissed.addAndGet(c.recordsMissed());
      before.close();
    }
    feed = next;
  }

  /** Whether its feed is open now. */
  public boolean up() {
    RecordFeedClient f = feed;
    return f != null && f.connected() && !unreachable;
  }

  /** The end-of-run fetch could not reach it: asked no more. */
  void unreachable() {
    unreachable = true;
  }

  /** The name it was found by no longer resolves to it, and its feed is closed (or it is back). */
  void left(boolean gone) {
    left = gone;
  }

  /** Whether it left the name it was found by, its feed closed. */
  boolean hasLeft() {
    return left;
  }

  /** Whether the end-of-run fetch found it unreachable. */
  boolean isUnreachable() {
    return unreachable;
  }

  /** What it contributed, its share taken of {@code totalJoined}. */
  public ReplicaCounts counts(long totalJoined) {
    RecordFeedClient f = feed;
    RecordFeedClient.Counts c = f == null ? new RecordFeedClient.Counts(0, 0) : f.counts();
    // fetched before joined: joinedOne counts joined first, so fetched never reads above joined.
    long byFetch = fetched.get();
    long j = joined.get();
    return new ReplicaCounts(
        name,
        j,
        byFetch,
        totalJoined == 0 ? Double.NaN : (double) j / totalJoined,
        earlierReconnects.get() + c.reconnects(),
        earlierMissed.get() + c.recordsMissed(),
        up() ? ReplicaCounts.UP : ReplicaCounts.DOWN);
  }

  @Override
  public String toString() {
    return name;
  }
}
