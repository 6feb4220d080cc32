package io.phasemeter.proxy.upstream;

import io.phasemeter.proxy.config.ProxyConfig;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One upstream of a pool and what the proxy knows about it: its slots, requests in flight, the
 * verdict of the active health checks, and passive ejection after connection failures in a row
 * (with a backoff that doubles on each ejection in a row). Every event loop reads it, so state is
 * guarded by the instance's lock; {@link #inFlight} is atomic because it changes on every request.
 */
public final class UpstreamHost {
  private final ProxyConfig.Upstream address;
  private final int slots;
  private final ProxyConfig.Ejection ejection;
  private final AtomicInteger inFlight = new AtomicInteger();
  private final ProxyConfig.Reuse reuse;
  private final java.util.concurrent.atomic.AtomicLong closedAfterResponse =
      new java.util.concurrent.atomic.AtomicLong();
  // The last RECENT responses on pooled connections, a bit each: 1 = the upstream closed the
  // connection after it (the lowest bit is the newest).
  private int recent;
  private volatile boolean closesAfterResponses;
  private boolean healthy = true;
  private int failedChecks;
  private int connectFailures;
  private int ejectionsInRow;
  private long ejectedUntil;
  private boolean ejected;

  /** Responses looked at to tell whether the upstream closes its connections after them. */
  static final int RECENT = 8;

  /**
   * Of the last {@link #RECENT}, how many followed by the upstream's close make it one that does.
   */
  static final int CLOSED_OF_RECENT = 4;

  UpstreamHost(
      ProxyConfig.Upstream address,
      int slots,
      ProxyConfig.Ejection ejection,
      ProxyConfig.Reuse reuse) {
    if (slots < 1) {
      throw new IllegalArgumentException("slots: must be at least 1 (got " + slots + ")");
    }
    this.address = address;
    this.slots = slots;
    this.ejection = ejection;
    this.reuse = reuse;
  }

  /**
   * Whether a request that holds a slot goes on a connection of its own (with {@code Connection:
   * close}) rather than a pooled one: {@code connections.reuse: off}, or {@code auto} once the
   * upstream was seen closing its connections after its responses.
   */
  public boolean singleUse() {
    return reuse == ProxyConfig.Reuse.OFF
        || (reuse == ProxyConfig.Reuse.AUTO && closesAfterResponses);
  }

  /** Whether the upstream was seen closing its connections after its responses. */
  public boolean closesAfterResponses() {
    return closesAfterResponses;
  }

  /** Responses on pooled connections that the upstream followed by closing the connection. */
  public long closedAfterResponse() {
    return closedAfterResponse.get();
  }

  /**
   * What followed a response on a pooled connection: the upstream closed it ({@code closed}), or it
   * carried the next request. Returns true when this makes the upstream one that closes its
   * connections after its responses ({@link #CLOSED_OF_RECENT} of the last {@link #RECENT}), once.
   */
  synchronized boolean afterResponse(boolean closed) {
    if (closed) {
      closedAfterResponse.incrementAndGet();
    }
    recent = ((recent << 1) | (closed ? 1 : 0)) & ((1 << RECENT) - 1);
    if (closesAfterResponses || Integer.bitCount(recent) < CLOSED_OF_RECENT) {
      return false;
    }
    closesAfterResponses = true;
    return true;
  }

  /** The upstream's address. */
  public ProxyConfig.Upstream address() {
    return address;
  }

  /**
   * The upstream's configured slots (its own {@code slots}, or its share of the pool's): what it
   * adds to the pool's capacity while it is available.
   */
  public int slots() {
    return slots;
  }

  /** Requests running on it now. */
  public int inFlight() {
    return inFlight.get();
  }

  /** Whether a request may be sent to it at {@code now} (healthy and not ejected). */
  public synchronized boolean available(long now) {
    return healthy && (!ejected || now >= ejectedUntil);
  }

  /** Whether the last active health checks found it up. */
  public synchronized boolean healthy() {
    return healthy;
  }

  /** Whether it is ejected at {@code now}. */
  public synchronized boolean ejected(long now) {
    return ejected && now < ejectedUntil;
  }

  void started() {
    inFlight.incrementAndGet();
  }

  void ended() {
    inFlight.decrementAndGet();
  }

  /**
   * A response arrived: the upstream is reachable, so the failure streak and backoff reset. Returns
   * true when this lifted an ejection: one whose backoff had not yet run out (a request sent before
   * the ejection answered), which makes it available again, or a half-open one (the probe after the
   * backoff answered), which gives back all its slots ({@link #slotsNow}).
   */
  synchronized boolean reachable(long now) {
    boolean lifted = ejected;
    connectFailures = 0;
    ejectionsInRow = 0;
    ejected = false;
    return lifted;
  }

  /**
   * The slots it gives its pool's capacity at {@code now}: none while unavailable; one while
   * half-open (its ejection's backoff has run out and nothing has answered since: the next request
   * is the probe, and a pool that admitted all its slots again would send the ones racing the probe
   * to an engine still down, retried onto the others above their slots); all once it answers.
   */
  synchronized int slotsNow(long now) {
    if (!available(now)) {
      return 0;
    }
    return ejected ? Math.min(1, slots) : slots;
  }

  /** When the current ejection's backoff runs out (meaningful while {@link #ejected} is true). */
  synchronized long ejectedUntil() {
    return ejectedUntil;
  }

  /**
   * A connection to it failed; returns true when this failure ejected it: after {@code after}
   * failures in a row, or at the first failure of the probe that follows an ejection (half-open),
   * for a backoff that doubles with each ejection in a row.
   */
  synchronized boolean connectFailed(long now) {
    if (ejected && now < ejectedUntil) {
      return false; // A request that raced the ejection; it is out already.
    }
    connectFailures++;
    if (connectFailures < ejection.after() && ejectionsInRow == 0) {
      return false;
    }
    connectFailures = 0;
    long base = ejection.backoff().toNanos();
    long max = ejection.maxBackoff().toNanos();
    long backoff = ejectionsInRow >= 30 ? max : Math.min(max, base << ejectionsInRow);
    ejectionsInRow++;
    ejected = true;
    ejectedUntil = now + backoff;
    return true;
  }

  /**
   * Records an active health check; {@code failuresToDown} failures in a row mark it down, one
   * success marks it up and lifts an ejection (it answers again). Returns true when the verdict
   * changed.
   */
  synchronized boolean checked(boolean ok, int failuresToDown) {
    boolean before = healthy;
    if (ok) {
      failedChecks = 0;
      healthy = true;
      ejected = false;
      connectFailures = 0;
    } else if (++failedChecks >= failuresToDown) {
      healthy = false;
    }
    return before != healthy;
  }

  @Override
  public String toString() {
    return address.authority();
  }
}
