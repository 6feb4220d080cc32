package io.phasemeter.proxy.gateway;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;

/**
 * Reads the RESP stream from Redis ahead of the Vert.x Redis client's parser and closes the
 * connection at the first reply it must not buffer: larger than {@link #MAX_REPLY_BYTES}, nested
 * deeper than {@link #MAX_DEPTH}, or not well-formed RESP of the types Redis answers this client
 * with. The client's parser (vertx-redis-client 5.0.7, {@code RESPParser}) holds a reply whole
 * until it is complete, accepts a bulk string of up to 512 MB and allocates an array of the length
 * an array header declares; and a line without its {@code \r\n} (or a {@code \n} without one) it
 * waits for, keeping all that follows. So a reply is refused here from its header, before its bytes
 * are held: a connection holds at most {@code MAX_REPLY_BYTES} of one reply and what one read
 * brings.
 *
 * <p>Nothing is copied: each read is passed on as it came, up to the end of the last reply before a
 * refusal. The refusal reaches the client as the connection's failure ({@link Refused}), which
 * fails the requests waiting on it; the connection is then closed and what else arrives on it is
 * dropped. One per connection, on the connection's event loop.
 */
final class RedisReplyLimit extends ChannelInboundHandlerAdapter {

  /**
   * The largest reply accepted, in bytes. The script's answer is six integers (about 40 bytes); the
   * largest reply this client ever asks for is Redis Cluster's {@code CLUSTER SLOTS}, about 130 KB
   * at the 1,000 nodes Redis documents as a cluster's upper size.
   */
  static final int MAX_REPLY_BYTES = 256 * 1024;

  /** The deepest nesting of arrays and maps accepted ({@code CLUSTER SLOTS}: 4). */
  static final int MAX_DEPTH = 8;

  /** The longest number or length line (a long with its sign is 20 characters). */
  private static final int MAX_NUMBER_CHARS = 20;

  /** The longest RESP3 double line ({@code ,}). */
  private static final int MAX_DOUBLE_CHARS = 64;

  /** Why a reply was refused: the failure of the requests waiting on the connection. */
  static final class Refused extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Refused(String message) {
      super(message, null, false, false);
    }
  }

  private enum State {
    TYPE,
    LINE,
    BULK,
    BULK_CR,
    BULK_LF,
    REFUSED
  }

  private State state = State.TYPE;
  private byte type;
  private long replyBytes;

  /** Elements still to come in each open array or map, outermost first. */
  private final long[] open = new long[MAX_DEPTH];

  private int depth;

  // The line being read: its length, whether its \r came, and its value as a number.
  private int lineChars;
  private boolean lineCr;
  private boolean negative;
  private int digits;
  private long number;

  private long bulkLeft;

  @Override
  public void channelRead(ChannelHandlerContext ctx, Object msg) {
    if (!(msg instanceof ByteBuf buf)) {
      ctx.fireChannelRead(msg);
      return;
    }
    if (state == State.REFUSED) {
      buf.release();
      return;
    }
    int start = buf.readerIndex();
    int end = buf.writerIndex();
    int lastReplyEnd = start;
    int i = start;
    String refusal = null;
    while (i < end) {
      if (state == State.BULK) {
        int take = (int) Math.min(bulkLeft, end - i);
        i += take;
        bulkLeft -= take;
        if (bulkLeft == 0) {
          state = State.BULK_CR;
        }
        continue;
      }
      refusal = step(buf.getByte(i++));
      if (refusal != null) {
        break;
      }
      if (state == State.TYPE && depth == 0) {
        lastReplyEnd = i;
      }
    }
    if (refusal == null) {
      ctx.fireChannelRead(buf);
      return;
    }
    state = State.REFUSED;
    if (lastReplyEnd > start) {
      ctx.fireChannelRead(buf.retainedSlice(start, lastReplyEnd - start));
    }
    buf.release();
    ctx.fireExceptionCaught(new Refused("Redis sent a reply that was refused: " + refusal));
  }

  /** Reads one byte outside a bulk string's payload: null, or why the reply is refused. */
  private String step(byte b) {
    switch (state) {
      case TYPE:
        replyBytes++;
        return type(b);
      case LINE:
        if (++replyBytes > MAX_REPLY_BYTES) {
          return "larger than " + MAX_REPLY_BYTES + " bytes";
        }
        return line(b);
      case BULK_CR:
        replyBytes++;
        state = State.BULK_LF;
        return b == '\r' ? null : "a bulk string longer than its length";
      case BULK_LF:
        replyBytes++;
        return b == '\n' ? elementDone() : "a bulk string longer than its length";
      default:
        throw new IllegalStateException(state.name());
    }
  }

  private String type(byte b) {
    switch (b) {
      case '+', '-', ':', '(', ',', '#', '_', '$', '=', '*', '%', '~' -> {
        type = b;
        state = State.LINE;
        lineChars = 0;
        lineCr = false;
        negative = false;
        digits = 0;
        number = 0;
        return null;
      }
      default -> {
        // Attributes (|) and pushes (>) answer what this client never asks for; a blob error (!)
        // the client would read as a line; anything else is not RESP.
        return "an unexpected type byte " + (b >= 0x21 && b < 0x7f ? "'" + (char) b + "'" : b);
      }
    }
  }

  private String line(byte b) {
    if (lineCr) {
      return b == '\n' ? lineDone() : "a \\r without its \\n";
    }
    if (b == '\r') {
      lineCr = true;
      return null;
    }
    if (b == '\n') {
      return "a \\n without its \\r";
    }
    lineChars++;
    switch (type) {
      case '+', '-':
        return null;
      case '#':
        return lineChars == 1 && (b == 't' || b == 'f') ? null : "a malformed boolean";
      case '_':
        return "a malformed null";
      case ',':
        return lineChars <= MAX_DOUBLE_CHARS && "0123456789+-.eEinfa".indexOf(b) >= 0
            ? null
            : "a malformed double";
      default:
        return digit(b);
    }
  }

  /** A character of an integer, a big number, or a length or count. */
  private String digit(byte b) {
    if (b == '-' && lineChars == 1) {
      negative = true;
      return null;
    }
    if (b < '0' || b > '9' || lineChars > MAX_NUMBER_CHARS) {
      return "a malformed number";
    }
    digits++;
    if (type == '(') {
      return null;
    }
    int d = b - '0';
    if (number > (Long.MAX_VALUE - d) / 10) {
      return "a number out of range";
    }
    number = number * 10 + d;
    return null;
  }

  private String lineDone() {
    switch (type) {
      case '+', '-', '_':
        return elementDone();
      case '#', ',':
        return lineChars == 0 ? "an empty value" : elementDone();
      case ':', '(':
        return digits == 0 ? "a malformed number" : elementDone();
      case '$', '=':
        return bulk();
      default:
        return aggregate();
    }
  }

  private String bulk() {
    if (digits == 0) {
      return "a malformed length";
    }
    if (negative) {
      return number == 1 ? elementDone() : "a negative length";
    }
    if (number > MAX_REPLY_BYTES - replyBytes - 2) {
      return "a bulk string of " + number + " bytes, larger than " + MAX_REPLY_BYTES;
    }
    replyBytes += number;
    if (number == 0) {
      state = State.BULK_CR;
    } else {
      bulkLeft = number;
      state = State.BULK;
    }
    return null;
  }

  private String aggregate() {
    if (digits == 0) {
      return "a malformed count";
    }
    if (negative) {
      return number == 1 ? elementDone() : "a negative count";
    }
    if (number == 0) {
      return elementDone();
    }
    long elements = type == '%' ? 2 * number : number;
    // Each element takes 3 bytes at least (_\r\n): a count that cannot fit is refused before the
    // parser allocates an array of its length.
    if (elements > (MAX_REPLY_BYTES - replyBytes) / 3) {
      return "an array of " + number + " elements, larger than " + MAX_REPLY_BYTES + " bytes";
    }
    if (depth == MAX_DEPTH) {
      return "arrays nested deeper than " + MAX_DEPTH;
    }
    open[depth++] = elements;
    state = State.TYPE;
    return null;
  }

  /** One element is complete: so are the arrays it completes, and the reply when all are. */
  private String elementDone() {
    state = State.TYPE;
    while (depth > 0) {
      if (--open[depth - 1] > 0) {
        return null;
      }
      depth--;
    }
    replyBytes = 0;
    return null;
  }
}
