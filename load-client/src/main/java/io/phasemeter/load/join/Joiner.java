package io.phasemeter.load.join;

import io.phasemeter.load.http.ClientResult;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Joins the client's observations with the proxy's records on the trace id, whichever arrives
 * first. Only records carrying this generator's instance prefix are kept (other traffic through the
 * proxy is ignored), and waiting records are bounded. Thread-safe.
 */
public final class Joiner {
  private final String prefix;
  private final int maxWaitingRecords;
  private final Consumer<Pair> onPair;
  private final Map<String, ClientResult> waitingClients = new HashMap<>();
  private final Map<String, Held> waitingRecords = new HashMap<>();
  // Trace ids whose record was left out as unsampled (--sampled-only): those whose client result
  // has not come yet (bounded as waitingRecords is), and waiting client results that will never
  // join (bounded by waitingClients). The end-of-run fetch does not ask for them.
  private final java.util.Set<String> droppedBeforeClient = new java.util.HashSet<>();
  private final java.util.Set<String> neverJoins = new java.util.HashSet<>();
  private final PairColumns pairs = new PairColumns();
  private long foreign;
  private long overflow;
  private long unsampled;
  private volatile boolean sampledOnly;

  /** A record waiting for its client result, with the replica it came from (null: not said). */
  private record Held(ServerRecord record, Replica from) {}

  /**
   * @param prefix the high half of this generator's trace ids (16 hex)
   * @param onPair told about every pair as it forms (joined or, at {@link #flush}, alone)
   */
  public Joiner(String prefix, int maxWaitingRecords, Consumer<Pair> onPair) {
    this.prefix = prefix;
    this.maxWaitingRecords = maxWaitingRecords;
    this.onPair = onPair;
  }

  /** A finished client request; pairs at once when its record is already here. */
  public void client(ClientResult r) {
    Pair p;
    synchronized (this) {
      Held h = waitingRecords.remove(r.traceId());
      if (h == null) {
        waitingClients.put(r.traceId(), r);
        if (droppedBeforeClient.remove(r.traceId())) {
          neverJoins.add(r.traceId());
        }
        return;
      }
      p = new Pair(r, h.record());
      pairs.add(r, h.record());
      if (h.from() != null) {
        h.from().joinedOne(false);
      }
    }
    onPair.accept(p);
  }

  /** A client request that will never get a record (no feed): pairs alone at once. */
  public void alone(ClientResult r) {
    Pair p = new Pair(r, null);
    synchronized (this) {
      pairs.add(r, null);
    }
    onPair.accept(p);
  }

  /** A record from the proxy's feed. */
  public void record(ServerRecord s) {
    record(s, null);
  }

  /** A record from replica {@code from}'s feed (null: not said); the join counts for it. */
  public void record(ServerRecord s, Replica from) {
    Pair p;
    synchronized (this) {
      if (!kept(s)) {
        if (s.traceId().startsWith(prefix)) {
          if (waitingClients.containsKey(s.traceId())) {
            neverJoins.add(s.traceId());
          } else if (droppedBeforeClient.size() < maxWaitingRecords) {
            droppedBeforeClient.add(s.traceId());
          }
        }
        return;
      }
      ClientResult c = waitingClients.remove(s.traceId());
      if (c == null) {
        if (waitingRecords.size() >= maxWaitingRecords) {
          overflow++;
          return;
        }
        waitingRecords.put(s.traceId(), new Held(s, from));
        return;
      }
      p = new Pair(c, s);
      pairs.add(c, s);
      if (from != null) {
        from.joinedOne(false);
      }
    }
    onPair.accept(p);
  }

  /**
   * A record fetched by trace id from replica {@code from} at the end of the run: joins the client
   * result still waiting for it, counted as fetched. Returns whether it joined (false: the feed's
   * copy came first, another replica's fetch did, or the record is not one this run keeps).
   */
  public boolean fetched(ServerRecord s, Replica from) {
    Pair p;
    synchronized (this) {
      // Checked, not counted: the feed's copy of a record left out was counted when it came.
      if (!s.traceId().startsWith(prefix) || (sampledOnly && !s.sampled())) {
        return false;
      }
      ClientResult c = waitingClients.remove(s.traceId());
      if (c == null) {
        return false;
      }
      p = new Pair(c, s);
      pairs.add(c, s);
      from.joinedOne(true);
    }
    onPair.accept(p);
    return true;
  }

  /** Whether a record belongs to this run's join; counts those that do not. Under the lock. */
  private boolean kept(ServerRecord s) {
    if (!s.traceId().startsWith(prefix)) {
      foreign++;
      return false;
    }
    if (sampledOnly && !s.sampled()) {
      unsampled++;
      return false;
    }
    return true;
  }

  /**
   * The trace ids of the client requests still waiting for a record that could join them, in no
   * order: not those whose record came and was left out as unsampled.
   */
  public synchronized List<String> waitingIds() {
    List<String> ids = new ArrayList<>(waitingClients.size());
    for (String id : waitingClients.keySet()) {
      if (!neverJoins.contains(id)) {
        ids.add(id);
      }
    }
    return ids;
  }

  /** Whether the client request of {@code traceId} still waits for its record. */
  public synchronized boolean isWaiting(String traceId) {
    return waitingClients.containsKey(traceId);
  }

  /** Client requests still waiting for their record. */
  public synchronized int waiting() {
    return waitingClients.size();
  }

  /** Ends the join: every client request still waiting becomes an unjoined pair. */
  public void flush() {
    List<Pair> alone = new ArrayList<>();
    synchronized (this) {
      for (ClientResult c : waitingClients.values()) {
        pairs.add(c, null);
        alone.add(new Pair(c, null));
      }
      waitingClients.clear();
      waitingRecords.clear();
      droppedBeforeClient.clear();
      neverJoins.clear();
    }
    alone.forEach(onPair);
  }

  /**
   * Every pair so far, in the order they formed, rebuilt from columns (see {@link PairColumns}):
   * call it once, for the report.
   */
  public synchronized List<Pair> pairs() {
    return Collections.unmodifiableList(pairs.pairs());
  }

  /**
   * Joins only records whose trace the proxy exported, as a join against a trace backend would: the
   * envelope then describes the exported share (with tail sampling: the tail).
   */
  public void sampledOnly(boolean on) {
    this.sampledOnly = on;
  }

  /** Records left out because their trace was not exported ({@link #sampledOnly}). */
  public synchronized long unsampled() {
    return unsampled;
  }

  /** Records of other traffic that were ignored. */
  public synchronized long foreign() {
    return foreign;
  }

  /** Records dropped because too many were waiting for their client result. */
  public synchronized long overflow() {
    return overflow;
  }
}
