package io.phasemeter.proxy.telemetry;

import io.vertx.core.Context;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerResponse;
import java.util.Queue;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The live record feed ({@code GET /admin/records/stream}, Server-Sent Events). Publishing never
 * waits: each subscriber has a bounded queue; when a slow or stuck subscriber's queue is full the
 * record is dropped for that subscriber and counted, so no subscriber can slow the proxy. Records
 * are rendered to JSON on the subscriber's event loop, when written, never by the publisher.
 *
 * @param <T> what is published ({@link RequestRecord} in the proxy)
 */
public final class RecordFeed<T> {
  private final int maxQueued;
  private final Runnable onDrop;
  private final java.util.function.Function<? super T, String> render;
  private final CopyOnWriteArrayList<Subscriber> subscribers = new CopyOnWriteArrayList<>();
  private final AtomicLong dropped = new AtomicLong();

  /**
   * @param maxQueued records buffered per subscriber before dropping
   * @param onDrop told about each dropped record (a metric)
   * @param render a record's JSON (one line)
   */
  public RecordFeed(
      int maxQueued, Runnable onDrop, java.util.function.Function<? super T, String> render) {
    this.maxQueued = maxQueued;
    this.onDrop = onDrop;
    this.render = render;
  }

  /** The proxy's feed of request records. */
  public static RecordFeed<RequestRecord> ofRecords(int maxQueued, Runnable onDrop) {
    return new RecordFeed<>(maxQueued, onDrop, RequestRecord::json);
  }

  /** Streams records to {@code response} (already SSE headers) until it closes. */
  public void subscribe(Context context, HttpServerResponse response) {
    Subscriber s = new Subscriber(context, response);
    subscribers.add(s);
    response.closeHandler(v -> subscribers.remove(s));
    response.exceptionHandler(t -> subscribers.remove(s));
  }

  /** Offers a record to every subscriber; returns at once. */
  public void publish(T record) {
    for (Subscriber s : subscribers) {
      if (!s.queue.offer(record)) {
        dropped.incrementAndGet();
        onDrop.run();
      } else {
        s.schedule();
      }
    }
  }

  /**
   * Ends the feed (the proxy is closing): every subscriber gets what is queued for it, then the end
   * of its stream. Completes when each end has been written, or at once for closed ones.
   */
  public io.vertx.core.Future<Void> close() {
    java.util.List<io.vertx.core.Future<Void>> ends = new java.util.ArrayList<>();
    for (Subscriber s : subscribers) {
      io.vertx.core.Promise<Void> p = io.vertx.core.Promise.promise();
      s.context.runOnContext(
          v -> {
            if (s.response.closed()) {
              p.tryComplete();
              return;
            }
            T record;
            while ((record = s.queue.poll()) != null) {
              s.response.write("data: " + render.apply(record) + "\n\n");
            }
            s.response.end().onComplete(ar -> p.tryComplete());
          });
      ends.add(p.future());
    }
    subscribers.clear();
    return io.vertx.core.Future.join(ends).mapEmpty();
  }

  /** Subscribers now. */
  public int subscribers() {
    return subscribers.size();
  }

  /** Records dropped for slow subscribers since start. */
  public long dropped() {
    return dropped.get();
  }

  private final class Subscriber {
    final Context context;
    final HttpServerResponse response;
    final Queue<T> queue = new ArrayBlockingQueue<>(maxQueued);
    final AtomicBoolean scheduled = new AtomicBoolean();

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
      if (response.closed()) {
        subscribers.remove(this);
        queue.clear();
        return;
      }
      T record;
      while (!response.writeQueueFull() && (record = queue.poll()) != null) {
        String json = render.apply(record);
        response.write(
            Buffer.buffer(json.length() + 8)
                .appendString("data: ")
                .appendString(json)
                .appendString("\n\n"));
      }
      if (!queue.isEmpty()) {
        response.drainHandler(v -> schedule());
      }
    }
  }
}
