package io.phasemeter.proxy.telemetry;

import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.LongSupplier;

/**
 * The live record feed ({@code GET /admin/records/stream}, Server-Sent Events). Publishing never
 * waits: each subscriber has a bounded queue; when a slow or stuck subscriber's queue is full the
 * record is dropped for that subscriber and counted, so no subscriber can slow the proxy. Records
 * are rendered to JSON on the subscriber's event loop, when written, never by the publisher.
 *
 * <p>Every record gets the next number of one sequence per feed, sent as the event's SSE {@code
 * id}; a subscriber is told on arrival the number of the last record published before it ({@code
 * id: N} alone, which dispatches no event), so it can count the records it did not get: the gaps
 * between the ids it sees. It is sent no record numbered {@code N} or below, not even one whose
 * publisher took its number before the subscriber came but offered it after: the subscriber counts
 * every record up to {@code N} as published before it came.
 *
 * <p>A subscriber that takes nothing for {@code writeTimeout} while the proxy has something to
 * write to it (its socket is backed up) is cut and counted, as nginx's {@code send_timeout} cuts a
 * client: otherwise subscribers that never read would hold every place on the feed for ever. {@link
 * #cutStalled()} checks; the proxy calls it every {@link #sweepInterval()}.
 *
 * @param <T> what is published ({@link RequestRecord} in the proxy)
 */
public final class RecordFeed<T> {
  private final int maxQueued;
  private final long writeTimeoutNanos;
  private final LongSupplier nanoTime;
  private final Runnable onDrop;
  private final Runnable onCut;
  private final Function<? super T, String> render;
  private final CopyOnWriteArrayList<Subscriber> subscribers = new CopyOnWriteArrayList<>();
  private final AtomicLong sequence = new AtomicLong();
  private final AtomicLong dropped = new AtomicLong();
  private final AtomicLong cut = new AtomicLong();

  /**
   * @param maxQueued records buffered per subscriber before dropping
   * @param writeTimeout how long a subscriber may take nothing while records wait for it
   * @param nanoTime the monotonic clock the write timeout is measured on
   * @param onDrop told about each dropped record (a metric)
   * @param onCut told about each subscriber cut for taking nothing (a metric)
   * @param render a record's JSON (one line)
   */
  public RecordFeed(
      int maxQueued,
      Duration writeTimeout,
      LongSupplier nanoTime,
      Runnable onDrop,
      Runnable onCut,
      Function<? super T, String> render) {
    if (writeTimeout.isNegative() || writeTimeout.isZero()) {
      throw new IllegalArgumentException("the write timeout must be positive");
    }
    this.maxQueued = maxQueued;
    this.writeTimeoutNanos = writeTimeout.toNanos();
    this.nanoTime = nanoTime;
    this.onDrop = onDrop;
    this.onCut = onCut;
    this.render = render;
  }

  /** The proxy's feed of request records. */
  public static RecordFeed<RequestRecord> ofRecords(
      int maxQueued,
      Duration writeTimeout,
      LongSupplier nanoTime,
      Runnable onDrop,
      Runnable onCut) {
    return new RecordFeed<>(maxQueued, writeTimeout, nanoTime, onDrop, onCut, RequestRecord::json);
  }

  /**
   * Streams records to {@code response} (already SSE headers) until it closes, starting with the
   * number of the last record published so far. Call it on {@code context}.
   */
  public void subscribe(Context context, HttpServerResponse response) {
    Subscriber s = new Subscriber(context, response);
    subscribers.add(s);
    response.closeHandler(v -> subscribers.remove(s));
    response.exceptionHandler(t -> subscribers.remove(s));
    // Read after joining: every record numbered above this one is offered to the subscriber. One
    // numbered at or below it may be offered too (a publish racing this one), and is skipped when
    // written: the subscriber is told it came before. Drains run on this context, after this.
    s.base = sequence.get();
    response.write("id: " + s.base + "\n\n");
  }

  /** Offers a record to every subscriber; returns at once. */
  public void publish(T record) {
    Numbered<T> n = new Numbered<>(sequence.incrementAndGet(), record);
    for (Subscriber s : subscribers) {
      if (!s.queue.offer(n)) {
        dropped.incrementAndGet();
        onDrop.run();
      } else {
        s.schedule();
      }
    }
  }

  /**
   * Cuts every subscriber that has taken nothing for the write timeout while records waited for it:
   * its connection is closed and it is counted. Returns at once; each check runs on its
   * subscriber's event loop.
   */
  public void cutStalled() {
    for (Subscriber s : subscribers) {
      s.context.runOnContext(v -> s.cutIfStalled());
    }
  }

  /** How often the proxy should call {@link #cutStalled()}: a second, or the timeout if shorter. */
  public Duration sweepInterval() {
    return Duration.ofNanos(Math.min(writeTimeoutNanos, 1_000_000_000L));
  }

  /**
   * Ends the feed (the proxy is closing): every subscriber gets what is queued for it, then the end
   * of its stream. Completes when each end has been written, or at once for closed ones.
   */
  public Future<Void> close() {
    List<Future<Void>> ends = new ArrayList<>();
    for (Subscriber s : subscribers) {
      Promise<Void> p = Promise.promise();
      s.context.runOnContext(
          v -> {
            if (s.response.closed()) {
              p.tryComplete();
              return;
            }
            Numbered<T> n;
            while ((n = s.next()) != null) {
              s.response.write(s.event(n));
            }
            s.response.end().onComplete(ar -> p.tryComplete());
          });
      ends.add(p.future());
    }
    subscribers.clear();
    return Future.join(ends).mapEmpty();
  }

  /** Subscribers now. */
  public int subscribers() {
    return subscribers.size();
  }

  /** Subscribers whose socket is backed up now (the write timeout is running for them). */
  public int stalledSubscribers() {
    int n = 0;
    for (Subscriber s : subscribers) {
      n += s.stalled ? 1 : 0;
    }
    return n;
  }

  /** Records dropped for slow subscribers since start. */
  public long dropped() {
    return dropped.get();
  }

  /** Subscribers cut for taking nothing within the write timeout, since start. */
  public long cut() {
    return cut.get();
  }

  /** The number of the last record published (0 before the first). */
  public long lastId() {
    return sequence.get();
  }

  /** A record and its number in the feed. */
  private record Numbered<T>(long id, T record) {}

  private final class Subscriber {
    final Context context;
    final HttpServerResponse response;
    final Queue<Numbered<T>> queue = new ArrayBlockingQueue<>(maxQueued);
    final AtomicBoolean scheduled = new AtomicBoolean();
    // Written on the subscriber's context only (stalled is also read by stalledSubscribers()).
    long base = -1;
    volatile boolean stalled;
    long stalledSince;
    boolean gone;

    Subscriber(Context context, HttpServerResponse response) {
      this.context = context;
      this.response = response;
    }

    void schedule() {
      if (scheduled.compareAndSet(false, true)) {
        context.runOnContext(v -> drain());
      }
    }

    /** Writes what the socket takes now; the rest waits for the drain handler. */
    void drain() {
      scheduled.set(false);
      if (gone || response.closed()) {
        subscribers.remove(this);
        queue.clear();
        return;
      }
      Numbered<T> n;
      while (!response.writeQueueFull() && (n = next()) != null) {
        response.write(event(n));
      }
      if (response.writeQueueFull()) {
        if (!stalled) {
          // The socket is backed up: the write timeout runs until it takes something again.
          stalled = true;
          stalledSince = nanoTime.getAsLong();
          response.drainHandler(
              v -> {
                stalled = false;
                schedule();
              });
        }
      } else {
        stalled = false;
      }
    }

    /** The next record to write: past the base the subscriber was told, or null. */
    Numbered<T> next() {
      Numbered<T> n;
      do {
        n = queue.poll();
      } while (n != null && n.id() <= base);
      return n;
    }

    void cutIfStalled() {
      if (gone || !stalled || nanoTime.getAsLong() - stalledSince < writeTimeoutNanos) {
        return;
      }
      gone = true;
      subscribers.remove(this);
      queue.clear();
      cut.incrementAndGet();
      onCut.run();
      // HTTP/1.1: closes the connection, and with it whatever the socket still held.
      response.reset();
    }

    Buffer event(Numbered<T> n) {
      String json = render.apply(n.record());
      // data before id: a reader that looks only for "data:" lines still finds every record.
      return Buffer.buffer(json.length() + 32)
          .appendString("data: ")
          .appendString(json)
          .appendString("\nid: ")
          .appendString(Long.toString(n.id()))
          .appendString("\n\n");
    }
  }
}
