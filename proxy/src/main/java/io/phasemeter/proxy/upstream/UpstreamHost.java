package io.phasemeter.proxy.upstream;

import io.phasemeter.proxy.config.ProxyConfig;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One upstream of a pool and what the proxy knows about it: requests in flight, the verdict of the
 * active health checks, and passive ejection after connection failures in a row (with a backoff
 * that doubles on each ejection in a row). Every event loop reads it, so state is guarded by the
 * instance's lock; {@link #inFlight} is atomic because it changes on every request.
 */
public final class UpstreamHost {
  private final ProxyConfig.Upstream address;
  private final ProxyConfig.Ejection ejection;
  private final AtomicInteger inFlight = new AtomicInteger();
  private boolean healthy = true;
  private int failedChecks;
  private int connectFailures;
  private int ejectionsInRow;
  private long ejectedUntil;
  private boolean ejected;

  UpstreamHost(ProxyConfig.Upstream address, ProxyConfig.Ejection ejection) {
    this.address = address;
    this.ejection = ejection;
  }

  /** The upstream's address. */
  public ProxyConfig.Upstream address() {
    return address;
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

  /** A response arrived: the upstream is reachable, so the failure streak and backoff reset. */
  synchronized void reachable() {
    connectFailures = 0;
    ejectionsInRow = 0;
    ejected = false;
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
