package io.phasemeter.proxy.pipeline;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The proxy-wide bounds on request bodies ({@code limits.max_concurrent_uploads}, {@code
 * limits.max_buffered_body_bytes}): how many bodies are being received at once, and how many body
 * bytes all requests in flight hold. A body's bytes are taken as they arrive and given back when
 * its request ends, so what is counted is what the heap holds, never what a header promised. Shared
 * by every event loop; lock-free.
 */
public final class BodyBudget implements MeterBinder {
  private final int maxUploads;
  private final long maxBytes;
  private final AtomicInteger uploads = new AtomicInteger();
  private final AtomicLong bytes = new AtomicLong();

  /** At most {@code maxUploads} bodies received at once and {@code maxBytes} held in all. */
  public BodyBudget(int maxUploads, long maxBytes) {
    if (maxUploads < 1 || maxBytes < 1) {
      throw new IllegalArgumentException(
          "maxUploads and maxBytes: must be at least 1, got " + maxUploads + " and " + maxBytes);
    }
    this.maxUploads = maxUploads;
    this.maxBytes = maxBytes;
  }

  /** Starts receiving one body, or refuses (false) when {@code maxUploads} are under way. */
  boolean startUpload() {
    while (true) {
      int n = uploads.get();
      if (n >= maxUploads) {
        return false;
      }
      if (uploads.compareAndSet(n, n + 1)) {
        return true;
      }
    }
  }

  /** One body is no longer being received (complete, refused or abandoned). */
  void endUpload() {
    uploads.decrementAndGet();
  }

  /** Takes {@code n} bytes, or refuses (false) when that would pass {@code maxBytes}. */
  boolean reserve(long n) {
    while (true) {
      long held = bytes.get();
      if (held + n > maxBytes) {
        return false;
      }
      if (bytes.compareAndSet(held, held + n)) {
        return true;
      }
    }
  }

  /** Gives back {@code n} bytes taken with {@link #reserve}. */
  void release(long n) {
    if (n > 0) {
      bytes.addAndGet(-n);
    }
  }

  /**
   * Registers {@code llm_request_uploads} and {@code llm_buffered_body_bytes}, with their bounds as
   * {@code llm_request_uploads_max} and {@code llm_buffered_body_max_bytes}.
   */
  @Override
  public void bindTo(MeterRegistry registry) {
    Gauge.builder("llm.request.uploads", this, BodyBudget::uploads)
        .description("Request bodies being received now")
        .register(registry);
    Gauge.builder("llm.request.uploads.max", this, BodyBudget::maxUploads)
        .description("limits.max_concurrent_uploads")
        .register(registry);
    Gauge.builder("llm.buffered.body", this, BodyBudget::bufferedBytes)
        .baseUnit("bytes")
        .description("Request and response body bytes held by requests in flight")
        .register(registry);
    Gauge.builder("llm.buffered.body.max", this, BodyBudget::maxBytes)
        .baseUnit("bytes")
        .description("limits.max_buffered_body_bytes, resolved")
        .register(registry);
  }

  /** Bodies being received now. */
  public int uploads() {
    return uploads.get();
  }

  /** Body bytes held by requests in flight now. */
  public long bufferedBytes() {
    return bytes.get();
  }

  /** The bound on {@link #uploads()}. */
  public int maxUploads() {
    return maxUploads;
  }

  /** The bound on {@link #bufferedBytes()}. */
  public long maxBytes() {
    return maxBytes;
  }
}
