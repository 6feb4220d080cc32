package io.phasemeter.proxy.telemetry;

import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Context;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.trace.ReadWriteSpan;
import io.opentelemetry.sdk.trace.ReadableSpan;
import io.opentelemetry.sdk.trace.SpanProcessor;
import io.phasemeter.core.SpanAttributes;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Decides what is exported when a request's root span ends (docs/design.md §3): every span is
 * recorded; the finished children of a root wait here, bounded, until the root ends, and then the
 * whole request is forwarded to {@code delegate} when it failed, when it was slower than a
 * threshold, or when its trace id falls within {@code ratio}; otherwise it is dropped. When the
 * oldest waiting request is pushed out by the bound, its children are evicted and counted.
 *
 * <p>Per request this costs one small map entry: children wait in a concurrent map keyed by (trace
 * id, root span id), and a ring of the bound's size remembers the order in which requests started
 * waiting (a request leaves it when its root ends), so that over the bound the oldest waiting
 * request is evicted without a cache's bookkeeping (a Caffeine cache here cost more per request
 * than the rest of the span work; docs/performance.md). Under the bound nothing is evicted, however
 * long a request runs; a request whose root never ends goes after {@link #MAX_AGE} of silence. With
 * nothing to export to ({@code delegate} null) children are not held at all; only the share is
 * counted.
 */
public final class ExportDecisionSpanProcessor implements SpanProcessor {
  private static final Duration MAX_AGE = Duration.ofMinutes(15);

  private final SpanProcessor delegate;
  private final ExportPolicy policy;
  private final ConcurrentHashMap<RootKey, Pending> pending = new ConcurrentHashMap<>();
  private final RootKey[] order;
  private int next;
  private final LongAdder roots = new LongAdder();
  private final LongAdder exportedRoots = new LongAdder();
  private final AtomicLong evictedSpans = new AtomicLong();
  private volatile long nextSweep = System.nanoTime() + MAX_AGE.toNanos();

  /** A root span's identity; children name it as their parent. */
  private record RootKey(String traceId, String spanId) {}

  /** The finished children of one root, in the order they ended. */
  private static final class Pending {
    final RootKey key;
    final List<ReadableSpan> children = new ArrayList<>(8);
    volatile long lastAdded = System.nanoTime();
    volatile int slot = -1;
    boolean done;

    Pending(RootKey key) {
      this.key = key;
    }
  }

  /**
   * @param delegate receives the spans of kept requests (usually a batch exporter); null when spans
   *     are not exported anywhere
   * @param ratio share of ordinary requests kept, by trace id
   * @param keepErrors keep every request that did not succeed
   * @param keepSlowerThan keep every request at least this slow
   * @param maxPendingRoots bound on requests whose children wait for their root
   */
  public ExportDecisionSpanProcessor(
      SpanProcessor delegate,
      double ratio,
      boolean keepErrors,
      Duration keepSlowerThan,
      int maxPendingRoots) {
    this.delegate = delegate;
    this.policy = new ExportPolicy(ratio, keepErrors, keepSlowerThan);
    this.order = new RootKey[maxPendingRoots];
  }

  @Override
  public void onStart(Context parentContext, ReadWriteSpan span) {
    if (delegate != null) {
      delegate.onStart(parentContext, span);
    }
  }

  @Override
  public boolean isStartRequired() {
    return delegate != null && delegate.isStartRequired();
  }

  @Override
  public void onEnd(ReadableSpan span) {
    SpanContext parent = span.getParentSpanContext();
    boolean localRoot = !parent.isValid() || parent.isRemote();
    if (!localRoot) {
      if (delegate != null) {
        hold(new RootKey(span.getSpanContext().getTraceId(), parent.getSpanId()), span);
      }
      return;
    }
    Pending children =
        delegate == null
            ? null
            : pending.remove(
                new RootKey(span.getSpanContext().getTraceId(), span.getSpanContext().getSpanId()));
    if (children != null) {
      leaveRing(children);
    }
    roots.increment();
    if (keep(span)) {
      exportedRoots.increment();
      if (children != null) {
        synchronized (children) {
          children.done = true;
          for (ReadableSpan c : children.children) {
            delegate.onEnd(c);
          }
        }
      }
      if (delegate != null) {
        delegate.onEnd(span);
      }
    } else if (children != null) {
      synchronized (children) {
        children.done = true;
      }
    }
    sweepIfDue();
  }

  /** Keeps a finished child until its root ends; the first child of a root takes a ring place. */
  private void hold(RootKey root, ReadableSpan child) {
    Pending p = pending.get(root);
    if (p == null) {
      Pending fresh = new Pending(root);
      p = pending.putIfAbsent(root, fresh);
      if (p == null) {
        p = fresh;
        enterRing(fresh);
      }
    }
    synchronized (p) {
      if (!p.done) {
        p.children.add(child);
        p.lastAdded = System.nanoTime();
        return;
      }
    }
    // The root ended (or was evicted) while this child was on its way: it cannot be exported.
    evictedSpans.incrementAndGet();
  }

  /**
   * Puts a newly waiting request in the ring. The request whose place it takes, if it still waits
   * (its root has not ended), is the oldest the ring knows: it is evicted when the map is over the
   * bound, and otherwise only loses its place (the age sweep still covers it).
   */
  private void enterRing(Pending p) {
    RootKey occupant;
    synchronized (order) {
      occupant = order[next];
      order[next] = p.key;
      p.slot = next;
      next = (next + 1) % order.length;
    }
    if (occupant != null && pending.size() > order.length) {
      evict(occupant);
    }
  }

  /** A request whose root ended gives its ring place back, so the ring holds only waiters. */
  private void leaveRing(Pending p) {
    int slot = p.slot;
    if (slot >= 0) {
      synchronized (order) {
        if (order[slot] == p.key) {
          order[slot] = null;
        }
      }
    }
  }

  private void evict(RootKey key) {
    Pending gone = pending.remove(key);
    if (gone != null) {
      leaveRing(gone);
      synchronized (gone) {
        gone.done = true;
        evictedSpans.addAndGet(gone.children.size());
      }
    }
  }

  /**
   * Drops requests that got no child for {@link #MAX_AGE} and whose root never ended; at most once
   * per minute.
   */
  private void sweepIfDue() {
    long now = System.nanoTime();
    if (now - nextSweep < 0) {
      return;
    }
    nextSweep = now + Duration.ofMinutes(1).toNanos();
    long oldest = now - MAX_AGE.toNanos();
    for (Map.Entry<RootKey, Pending> e : pending.entrySet()) {
      if (e.getValue().lastAdded - oldest < 0) {
        evict(e.getKey());
      }
    }
  }

  /**
   * Whether a root with these facts will be exported when it ends: the decision {@link #onEnd}
   * makes, asked ahead (false when there is nothing to export to).
   */
  public boolean exports(boolean failed, long rootNanos, String traceId) {
    return delegate != null && policy.keep(failed, rootNanos, traceId);
  }

  private boolean keep(ReadableSpan root) {
    // The proxy's roots always say their outcome, and set status ERROR only with a failed one;
    // only a root without an outcome (not the proxy's) has its status copied out.
    String outcome = root.getAttribute(SpanAttributes.OUTCOME);
    boolean failed =
        outcome != null
            ? !outcome.equals("success")
            : root.toSpanData().getStatus().getStatusCode() == StatusCode.ERROR;
    return policy.keep(failed, root.getLatencyNanos(), root.getSpanContext().getTraceId());
  }

  @Override
  public boolean isEndRequired() {
    return true;
  }

  /** The share of finished requests whose traces were exported (1.0 before any request). */
  public double exportedRatio() {
    long total = roots.sum();
    return total == 0 ? 1.0 : (double) exportedRoots.sum() / total;
  }

  /** Child spans dropped because their root never arrived within the bound. */
  public long evictedSpans() {
    return evictedSpans.get();
  }

  /** Requests whose children wait for their root now. */
  int pendingRoots() {
    return pending.size();
  }

  @Override
  public CompletableResultCode shutdown() {
    pending.clear();
    return delegate == null ? CompletableResultCode.ofSuccess() : delegate.shutdown();
  }

  @Override
  public CompletableResultCode forceFlush() {
    return delegate == null ? CompletableResultCode.ofSuccess() : delegate.forceFlush();
  }
}
