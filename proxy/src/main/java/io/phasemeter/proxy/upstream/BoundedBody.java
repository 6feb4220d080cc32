package io.phasemeter.proxy.upstream;

import io.vertx.core.Future;
import io.vertx.core.Handler;
import io.vertx.core.Promise;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.streams.WriteStream;
import io.vertx.ext.web.codec.BodyCodec;
import io.vertx.ext.web.codec.spi.BodyStream;

/**
 * A Web Client body codec that keeps at most {@code max} bytes: one more fails the response with
 * {@link TooLarge}, and the client resets the request (closing its connection) instead of reading
 * the rest. Vert.x's own buffer codec reads any length.
 */
final class BoundedBody {
  private BoundedBody() {}

  /** The body was longer than the bound. */
  static final class TooLarge extends RuntimeException {
    private static final long serialVersionUID = 1L;

    TooLarge(int max) {
      super("body over " + max + " bytes", null, false, false);
    }
  }

  static BodyCodec<Buffer> codec(int max) {
    return () -> new Stream(max);
  }

  private static final class Stream implements BodyStream<Buffer> {
    private final int max;
    private final Buffer body = Buffer.buffer();
    private final Promise<Buffer> result = Promise.promise();

    Stream(int max) {
      this.max = max;
    }

    @Override
    public Future<Buffer> result() {
      return result.future();
    }

    @Override
    public void handle(Throwable failure) {
      result.tryFail(failure);
    }

    @Override
    public WriteStream<Buffer> exceptionHandler(Handler<Throwable> handler) {
      return this;
    }

    @Override
    public Future<Void> write(Buffer data) {
      if (result.future().isComplete()) {
        return Future.failedFuture(result.future().cause());
      }
      if (body.length() + data.length() > max) {
        TooLarge tooLarge = new TooLarge(max);
        result.tryFail(tooLarge);
        return Future.failedFuture(tooLarge);
      }
      body.appendBuffer(data);
      return Future.succeededFuture();
    }

    @Override
    public Future<Void> end() {
      if (result.tryComplete(body)) {
        return Future.succeededFuture();
      }
      return Future.failedFuture(result.future().cause());
    }

    @Override
    public WriteStream<Buffer> setWriteQueueMaxSize(int maxSize) {
      return this;
    }

    @Override
    public boolean writeQueueFull() {
      return false;
    }

    @Override
    public WriteStream<Buffer> drainHandler(Handler<Void> handler) {
      return this;
    }
  }
}
