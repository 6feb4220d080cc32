package io.phasemeter.proxy.gateway;

import io.vertx.core.Future;

/**
 * Per-key rpm and tpm limits as the pipeline uses them: a request is admitted in {@code auth}, its
 * tokens in {@code prepare}, and the estimate is settled when the response ends. {@link
 * #local(RateLimiter)} decides with this replica's buckets; {@link SharedLimiter} with buckets
 * every replica shares. A future completes on the caller's event loop.
 */
public interface Limiter {
  /** Takes one request from {@code key}'s requests-per-minute bucket, or refuses. */
  Future<Decision> admitRequest(ApiKey key);

  /** Takes {@code estimatedTokens} from {@code key}'s tokens-per-minute bucket, or refuses. */
  Future<Decision> admitTokens(ApiKey key, long estimatedTokens);

  /**
   * Replaces an admitted estimate with the actual usage (refund or charge), in the store that took
   * it: {@code source} is the admitting {@link Decision#source()}.
   */
  void settleTokens(ApiKey key, long estimated, long actual, String source);

  /**
   * Gives back a request admitted and then refused on tokens, or one that never ran, to the store
   * that took it ({@code source}, the admitting {@link Decision#source()}).
   */
  void refundRequest(ApiKey key, String source);

  /** This replica's own buckets, as a limiter. */
  static Limiter local(RateLimiter buckets) {
    return new Limiter() {
      @Override
      public Future<Decision> admitRequest(ApiKey key) {
        return Future.succeededFuture(buckets.admitRequest(key));
      }

      @Override
      public Future<Decision> admitTokens(ApiKey key, long estimatedTokens) {
        return Future.succeededFuture(buckets.admitTokens(key, estimatedTokens));
      }

      @Override
      public void settleTokens(ApiKey key, long estimated, long actual, String source) {
        buckets.settleTokens(key, estimated, actual);
      }

      @Override
      public void refundRequest(ApiKey key, String source) {
        buckets.refundRequest(key);
      }
    };
  }
}
