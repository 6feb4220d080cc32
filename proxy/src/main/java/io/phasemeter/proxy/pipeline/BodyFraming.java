package io.phasemeter.proxy.pipeline;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.DecoderResult;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpRequestDecoder;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.internal.StringUtil;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.impl.VertxHttpRequestDecoder;
import java.util.List;
import java.util.function.Consumer;

/**
 * The public listener's HTTP/1.x request decoder (Vert.x's own, with two additions) so that a
 * chunked body whose framing breaks mid-body (RFC 9112 §7.1: a chunk size that is not hex or does
 * not fit, a bare LF ending a chunk line, a chunk line over the limit) is answered 400 {@code
 * invalid_request} before its connection is closed.
 *
 * <p>Netty's decoder reports such a body with a failed last part, after the request itself went to
 * the handler; Vert.x then fails the connection and closes it at once, and the request only sees
 * its connection gone: no answer, and a record that says the client cancelled. Here the failed part
 * is kept from Vert.x and handed to the request whose body it was ({@link #watch}), which answers
 * and closes. The decoder reads nothing more from the connection once it failed, so the answer is
 * the last thing on it. A failure that no request watches (a body the proxy did not wait for) goes
 * on to Vert.x as before.
 *
 * <p>Netty checks a chunk size for overflow by its sign only, so a size of 9 to 16 hex digits that
 * wraps to a positive int (or to 0, the last chunk) is taken as that number: 17 digits of {@code 1}
 * read as a 286 MB chunk, {@code 100000000} as the end of the body. Each chunk-size line is
 * therefore read here first, ahead of the decoder, and a size over {@link Integer#MAX_VALUE} (the
 * decoder's limit) fails the body the same way.
 *
 * <p>Vert.x's decoder class is internal, as is the connection's channel; both are used where the
 * proxy already reaches them ({@link Connections}). Confined to the connection's event loop.
 */
public final class BodyFraming extends VertxHttpRequestDecoder {
  /** The name Vert.x gives its request decoder in the channel pipeline. */
  private static final String DECODER = "httpDecoder";

  private enum Part {
    /** Not in a chunked body. */
    NONE,
    SIZE,
    DATA,
    /** The line end after a chunk's data. */
    DATA_END,
    TRAILER
  }

  // What to tell of a failure of the body now arriving; null when no request is watching.
  private Consumer<Throwable> watcher;
  // Once the body failed, the connection is read no further (the decoder stops reading too).
  private boolean failed;

  // The chunked body as read ahead of the decoder: bytes from the decoder's reader index up to
  // scanned have been read; part says where in the body they end.
  private int scanned;
  private Part part = Part.NONE;
  private long size;
  private int digits;
  private boolean sizeEnded;
  private long remaining;
  private boolean emptyLine;

  private BodyFraming(HttpServerOptions options) {
    super(options);
  }

  /**
   * Puts this decoder in place of Vert.x's on {@code connection}, an HTTP/1.x connection of the
   * listener made with {@code options}; call from the server's connection handler, before any byte
   * of a request is read. Connections of another kind are left as they are.
   */
  public static void install(HttpConnection connection, HttpServerOptions options) {
    if (connection instanceof io.vertx.core.net.impl.ConnectionBase base) {
      ChannelHandler decoder = base.channelHandlerContext().pipeline().get(DECODER);
      if (decoder instanceof HttpRequestDecoder && !(decoder instanceof BodyFraming)) {
        base.channelHandlerContext().pipeline().replace(DECODER, DECODER, new BodyFraming(options));
      }
    }
  }

  /**
   * {@code onFailure} hears of it if the body of the request now being read from {@code connection}
   * breaks its framing; it is called once, on the connection's event loop, with the decoder's
   * cause. The watch ends with the body, or at the next request head.
   */
  static void watch(HttpConnection connection, Consumer<Throwable> onFailure) {
    if (connection instanceof io.vertx.core.net.impl.ConnectionBase base) {
      BodyFraming framing = base.channelHandlerContext().pipeline().get(BodyFraming.class);
      if (framing != null) {
        framing.watcher = onFailure;
      }
    }
  }

  @Override
  protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) throws Exception {
    if (failed) {
      in.skipBytes(in.readableBytes());
      return;
    }
    if (part != Part.NONE) {
      int from = in.readerIndex() + scanned;
      int stop = scan(in, from, in.writerIndex());
      if (stop < 0) {
        in.skipBytes(in.readableBytes());
        fail(
            new NumberFormatException("chunk size over " + Integer.MAX_VALUE + " bytes"),
            out,
            out.size());
        return;
      }
      scanned = stop - in.readerIndex();
    }
    int before = in.readerIndex();
    int first = out.size();
    super.decode(ctx, in, out);
    scanned = Math.max(0, scanned - (in.readerIndex() - before));
    for (int i = first; i < out.size(); i++) {
      Object msg = out.get(i);
      if (msg instanceof HttpRequest request) {
        // A new head: whoever watched the previous body is done; the new request's handler, which
        // runs before the decoder reads on, watches its own.
        watcher = null;
        if (request.decoderResult().isSuccess() && HttpUtil.isTransferEncodingChunked(request)) {
          startBody();
        }
      } else if (msg instanceof HttpContent content) {
        if (content.decoderResult().isFailure()) {
          out.remove(i);
          fail(content.decoderResult().cause(), out, i);
          ReferenceCountUtil.release(content);
          return;
        }
        if (msg instanceof LastHttpContent) {
          watcher = null;
        }
      }
    }
  }

  /**
   * The body failed: the watching request hears of it, or, with none watching, the failure goes on
   * to Vert.x at {@code at} in {@code out}, which closes the connection.
   */
  private void fail(Throwable cause, List<Object> out, int at) {
    failed = true;
    part = Part.NONE;
    Consumer<Throwable> told = watcher;
    watcher = null;
    if (told != null) {
      told.accept(cause);
    } else {
      LastHttpContent failure = new DefaultLastHttpContent(Unpooled.EMPTY_BUFFER);
      failure.setDecoderResult(DecoderResult.failure(cause));
      out.add(at, failure);
    }
  }

  private void startBody() {
    startSize();
    scanned = 0;
  }

  /**
   * Reads {@code in[from, to)} as chunked framing, as the decoder will. Returns where it stopped
   * (at {@code to}, or where the body ended), or -1 at a chunk size over {@link Integer#MAX_VALUE}.
   * Only sizes are judged here; every other fault is the decoder's to find.
   */
  private int scan(ByteBuf in, int from, int to) {
    int i = from;
    while (i < to && part != Part.NONE) {
      byte b = in.getByte(i);
      switch (part) {
        case SIZE -> {
          if (b == '\n') {
            remaining = size;
            part = digits > 0 && size == 0 ? Part.TRAILER : Part.DATA;
            emptyLine = true;
            if (part == Part.DATA && remaining == 0) {
              part = Part.DATA_END;
            }
          } else if (!sizeEnded) {
            int d = StringUtil.decodeHexNibble(b);
            if (d >= 0) {
              digits++;
              size = size * 16 + d;
              if (size > Integer.MAX_VALUE) {
                return -1;
              }
            } else if (digits > 0 || (b != ' ' && b != '\t')) {
              // The digits end at an extension (';'), blanks or anything else the decoder judges.
              sizeEnded = true;
            }
          }
          i++;
        }
        case DATA -> {
          int take = (int) Math.min(remaining, to - i);
          remaining -= take;
          i += take;
          if (remaining == 0) {
            part = Part.DATA_END;
          }
        }
        case DATA_END -> {
          if (b == '\n') {
            startSize();
          }
          i++;
        }
        case TRAILER -> {
          if (b == '\n') {
            if (emptyLine) {
              part = Part.NONE;
            }
            emptyLine = true;
          } else if (b != '\r') {
            emptyLine = false;
          }
          i++;
        }
        default -> throw new IllegalStateException(part.name());
      }
    }
    return i;
  }

  private void startSize() {
    part = Part.SIZE;
    size = 0;
    digits = 0;
    sizeEnded = false;
  }
}
