package io.phasemeter.proxy;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

/**
 * An HTTP/2 client over h2c with prior knowledge that writes frames by hand and reads back every
 * frame the server sends: for what a real client will not send (more streams than the server's
 * SETTINGS allow, a header list past its limit: Vert.x's client queues the first and refuses the
 * second locally) and to see what the wire shows. Header blocks are HPACK literals without
 * indexing, so the server's decoder state never matters.
 */
final class RawH2 implements AutoCloseable {
  static final int DATA = 0;
  static final int HEADERS = 1;
  static final int RST_STREAM = 3;
  static final int SETTINGS = 4;
  static final int GOAWAY = 7;
  static final int WINDOW_UPDATE = 8;

  static final int SETTINGS_MAX_CONCURRENT_STREAMS = 3;
  static final int SETTINGS_MAX_HEADER_LIST_SIZE = 6;

  static final int NO_ERROR = 0;
  static final int REFUSED_STREAM = 7;

  private static final int END_STREAM = 1;
  private static final int END_HEADERS = 4;
  private static final int ACK = 1;
  private static final int PADDED = 8;
  private static final int PRIORITY = 0x20;

  /** One frame as it came: its type, flags, stream and payload. */
  record Frame(int type, int flags, int stream, byte[] payload) {
    boolean endStream() {
      return (type == DATA || type == HEADERS) && (flags & END_STREAM) != 0;
    }

    /** The error code of a RST_STREAM or GOAWAY. */
    int errorCode() {
      return ByteBuffer.wrap(payload, type == GOAWAY ? 4 : 0, 4).getInt();
    }

    @Override
    public String toString() {
      return "Frame[type=" + type + ", flags=" + flags + ", stream=" + stream + "]";
    }
  }

  private final Socket socket;
  private final DataInputStream in;
  private final OutputStream out;
  private final Map<Integer, Long> serverSettings = new HashMap<>();
  private final List<Frame> seen = new ArrayList<>();

  private RawH2(Socket socket) throws IOException {
    this.socket = socket;
    this.in = new DataInputStream(socket.getInputStream());
    this.out = socket.getOutputStream();
  }

  /**
   * Connects, sends the preface, empty SETTINGS and a connection window of 1 GiB (so responses are
   * never held by this client), and reads the server's SETTINGS, which it acknowledges.
   */
  static RawH2 connect(int port) throws IOException {
    RawH2 c = new RawH2(new Socket("127.0.0.1", port));
    c.socket.setSoTimeout(10_000);
    c.out.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
    c.frame(SETTINGS, 0, 0, new byte[0]);
    c.frame(WINDOW_UPDATE, 0, 0, ByteBuffer.allocate(4).putInt(1 << 30).array());
    c.out.flush();
    Frame settings = c.await(f -> f.type() == SETTINGS && (f.flags() & ACK) == 0);
    ByteBuffer p = ByteBuffer.wrap(settings.payload());
    while (p.remaining() >= 6) {
      c.serverSettings.put(p.getShort() & 0xffff, p.getInt() & 0xffffffffL);
    }
    c.frame(SETTINGS, ACK, 0, new byte[0]);
    c.out.flush();
    return c;
  }

  /** The server's first SETTINGS, by identifier. */
  Map<Integer, Long> serverSettings() {
    return serverSettings;
  }

  /**
   * Opens stream {@code stream} with a POST to {@code path} carrying {@code extra} headers; with
   * {@code body} non-null, sends it as one DATA frame that ends the stream, else leaves the stream
   * open.
   */
  void post(int stream, String path, Map<String, String> extra, String body) throws IOException {
    Map<String, String> headers = new LinkedHashMap<>();
    headers.put(":method", "POST");
    headers.put(":scheme", "http");
    headers.put(":path", path);
    headers.put(":authority", "127.0.0.1");
    headers.put("content-type", "application/json");
    headers.putAll(extra);
    ByteArrayOutputStream block = new ByteArrayOutputStream();
    headers.forEach(
        (name, value) -> {
          block.write(0); // literal header field without indexing, new name
          literal(block, name);
          literal(block, value);
        });
    frame(HEADERS, END_HEADERS, stream, block.toByteArray());
    if (body != null) {
      frame(DATA, END_STREAM, stream, body.getBytes(StandardCharsets.UTF_8));
    }
    out.flush();
  }

  /** Sends GOAWAY: the last stream this client would accept from the server, and why. */
  void goAway(int lastStream, int errorCode) throws IOException {
    frame(GOAWAY, 0, 0, ByteBuffer.allocate(8).putInt(lastStream).putInt(errorCode).array());
    out.flush();
  }

  /**
   * Reads frames until one matches, and returns it; every frame read is kept ({@link #seen}).
   * Answers nothing on its own but the SETTINGS handshake.
   */
  Frame await(Predicate<Frame> wanted) throws IOException {
    while (true) {
      int length = (in.readUnsignedByte() << 16) | in.readUnsignedShort();
      int type = in.readUnsignedByte();
      int flags = in.readUnsignedByte();
      int stream = in.readInt() & 0x7fffffff;
      byte[] payload = new byte[length];
      in.readFully(payload);
      Frame f = new Frame(type, flags, stream, payload);
      seen.add(f);
      if (wanted.test(f)) {
        return f;
      }
    }
  }

  /** Reads until each of {@code streams} has ended (END_STREAM or RST_STREAM). */
  void awaitEnds(int... streams) throws IOException {
    for (int s : streams) {
      if (seen.stream().noneMatch(f -> f.stream() == s && ended(f))) {
        await(f -> f.stream() == s && ended(f));
      }
    }
  }

  private static boolean ended(Frame f) {
    return f.endStream() || f.type() == RST_STREAM;
  }

  /** Every frame read so far, in order. */
  List<Frame> seen() {
    return seen;
  }

  /** The {@code :status} of stream {@code stream}'s first HEADERS, or -1 when none came yet. */
  int status(int stream) {
    for (Frame f : seen) {
      if (f.type() == HEADERS && f.stream() == stream) {
        byte[] p = f.payload();
        int from = (f.flags() & PADDED) != 0 ? 1 : 0;
        int padding = from == 1 ? p[0] & 0xff : 0;
        // PRIORITY: a stream dependency and weight (5 bytes) before the block (Vert.x sends it).
        from += (f.flags() & PRIORITY) != 0 ? 5 : 0;
        return statusOf(java.util.Arrays.copyOfRange(p, from, p.length - padding));
      }
    }
    return -1;
  }

  /**
   * {@code :status} from a response header block: the server's encoder writes it as an indexed
   * field of HPACK's static table (200, 204, 206, 304, 400, 404, 500) or a literal with the static
   * name {@code :status}.
   */
  private static int statusOf(byte[] block) {
    int b = block[0] & 0xff;
    switch (b) {
      case 0x88:
        return 200;
      case 0x89:
        return 204;
      case 0x8a:
        return 206;
      case 0x8b:
        return 304;
      case 0x8c:
        return 400;
      case 0x8d:
        return 404;
      case 0x8e:
        return 500;
      default:
        break;
    }
    // A literal whose name is the static table's :status (index 8), with or without indexing:
    // prefix byte, then a 3-digit value of length 3 (never Huffman-coded as 3 bytes here would be
    // ambiguous: decode only the plain form).
    int length = block[1] & 0x7f;
    if ((block[1] & 0x80) == 0 && length == 3) {
      return Integer.parseInt(new String(block, 2, 3, StandardCharsets.US_ASCII));
    }
    if ((block[1] & 0x80) != 0) {
      return huffmanStatus(block, 2, length);
    }
    return -1;
  }

  /** Three digits Huffman-coded (HPACK Appendix B: '0'-'2' 5 bits, '3'-'9' 6 bits). */
  private static int huffmanStatus(byte[] block, int at, int length) {
    long bits = 0;
    for (int i = 0; i < length; i++) {
      bits = (bits << 8) | (block[at + i] & 0xff);
    }
    int available = length * 8;
    StringBuilder digits = new StringBuilder();
    int pos = available;
    while (digits.length() < 3) {
      int five = (int) ((bits >>> (pos - 5)) & 0x1f);
      if (five <= 2) {
        digits.append((char) ('0' + five));
        pos -= 5;
      } else {
        int six = (int) ((bits >>> (pos - 6)) & 0x3f);
        digits.append((char) ('3' + six - 0x19));
        pos -= 6;
      }
    }
    return Integer.parseInt(digits.toString());
  }

  private void frame(int type, int flags, int stream, byte[] payload) throws IOException {
    out.write(payload.length >>> 16);
    out.write(payload.length >>> 8);
    out.write(payload.length);
    out.write(type);
    out.write(flags);
    out.write(ByteBuffer.allocate(4).putInt(stream).array());
    out.write(payload);
  }

  /** An HPACK string literal, not Huffman-coded: its length (7-bit prefix), then its bytes. */
  private static void literal(ByteArrayOutputStream block, String s) {
    byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
    int n = bytes.length;
    if (n < 127) {
      block.write(n);
    } else {
      block.write(127);
      n -= 127;
      while (n >= 128) {
        block.write((n & 0x7f) | 0x80);
        n >>>= 7;
      }
      block.write(n);
    }
    block.write(bytes, 0, bytes.length);
  }

  @Override
  public void close() throws IOException {
    socket.close();
  }
}
