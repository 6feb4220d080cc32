package io.phasemeter.proxy.engine;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.WireFormat;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * Reads vLLM's per-request spans out of an OTLP/HTTP protobuf trace export. vLLM names the span
 * {@code llm_request} and puts its timings in attributes, as seconds in doubles ({@code
 * gen_ai.latency.time_in_queue}, {@code …time_to_first_token}, {@code …time_in_model_prefill},
 * {@code …time_in_model_decode}, {@code …e2e}). Spans without any of the queue, prefill or decode
 * attributes are not engine spans and are skipped; no other attribute is read or kept.
 *
 * <p>The export is walked field by field on the wire ({@code ExportTraceServiceRequest} → {@code
 * ResourceSpans} → {@code ScopeSpans} → {@code Span} → {@code KeyValue}), never built as a message
 * tree: generated classes would allocate an object per span, attribute and string whatever the span
 * holds, so a body of a few MiB made of millions of empty spans took hundreds of MiB of heap. Here
 * memory does not grow with the body: a field the decoder does not need is skipped without being
 * read, a trace id of the wrong length is skipped, an attribute key longer than any it looks for is
 * skipped, and past {@code maxSpans} spans the rest are only counted.
 */
public final class OtlpTraceDecoder {
  /** vLLM's span name for one request. */
  public static final String SPAN_NAME = "llm_request";

  public static final String TIME_IN_QUEUE = "gen_ai.latency.time_in_queue";
  public static final String TIME_TO_FIRST_TOKEN = "gen_ai.latency.time_to_first_token";
  public static final String TIME_IN_MODEL_PREFILL = "gen_ai.latency.time_in_model_prefill";
  public static final String TIME_IN_MODEL_DECODE = "gen_ai.latency.time_in_model_decode";
  public static final String E2E = "gen_ai.latency.e2e";

  // Field numbers of opentelemetry/proto/{collector/trace,trace,common}/v1/*.proto.
  private static final int REQUEST_RESOURCE_SPANS = 1;
  private static final int RESOURCE_SPANS_SCOPE_SPANS = 2;
  private static final int SCOPE_SPANS_SPANS = 2;
  private static final int SPAN_TRACE_ID = 1;
  private static final int SPAN_PARENT_SPAN_ID = 4;
  private static final int SPAN_ATTRIBUTES = 9;
  private static final int KEY_VALUE_KEY = 1;
  private static final int KEY_VALUE_VALUE = 2;
  private static final int ANY_VALUE_INT = 3;
  private static final int ANY_VALUE_DOUBLE = 4;

  /** Longer attribute keys cannot be one of ours, and are skipped unread. */
  private static final int MAX_KEY_BYTES = 64;

  private static final HexFormat HEX = HexFormat.of();

  /** A field's tag on the wire (protobuf's {@code WireFormat.makeTag}, which is not public). */
  private static int tag(int field, int wireType) {
    return field << 3 | wireType;
  }

  /** One engine span: its trace, its parent (the proxy's generation span) and its timings. */
  public record EngineSpan(String traceId, String parentSpanId, EngineTimings timings) {}

  /**
   * What one export held: the engine spans among the first {@code maxSpans} spans, how many of
   * those were other spans (skipped), and how many spans came past the cap (refused, unread).
   */
  public record Decoded(List<EngineSpan> engineSpans, int skipped, long refused) {
    /** Every span the export held. */
    public long spans() {
      return engineSpans.size() + skipped + refused;
    }
  }

  private OtlpTraceDecoder() {}

  /**
   * Decodes an {@code ExportTraceServiceRequest} with no cap on spans.
   *
   * @throws InvalidProtocolBufferException when {@code body} is not one
   */
  public static Decoded decode(byte[] body) throws InvalidProtocolBufferException {
    return decode(body, Integer.MAX_VALUE);
  }

  /**
   * Decodes an {@code ExportTraceServiceRequest}, reading at most {@code maxSpans} spans.
   *
   * @throws InvalidProtocolBufferException when {@code body} is not one
   */
  public static Decoded decode(byte[] body, int maxSpans) throws InvalidProtocolBufferException {
    try {
      return new Walk(maxSpans).request(CodedInputStream.newInstance(body));
    } catch (InvalidProtocolBufferException e) {
      throw e;
    } catch (IOException e) {
      throw new IllegalStateException("a byte array cannot fail to read", e);
    }
  }

  /**
   * Decodes an {@code ExportTraceServiceRequest} read from {@code body} (e.g. a bounded gzip
   * stream), reading at most {@code maxSpans} spans.
   *
   * @throws InvalidProtocolBufferException when the bytes are not one
   * @throws IOException when {@code body} fails
   */
  public static Decoded decode(InputStream body, int maxSpans) throws IOException {
    CodedInputStream in = CodedInputStream.newInstance(body);
    // A length-delimited field is read through limits, not buffered: no size cap is needed.
    in.setSizeLimit(Integer.MAX_VALUE);
    return new Walk(maxSpans).request(in);
  }

  /** One pass over one export. */
  private static final class Walk {
    private final int maxSpans;
    private final List<EngineSpan> out = new ArrayList<>();
    private int read;
    private int skipped;
    private long refused;

    Walk(int maxSpans) {
      this.maxSpans = Math.max(0, maxSpans);
    }

    Decoded request(CodedInputStream in) throws IOException {
      while (true) {
        int tag = in.readTag();
        if (tag == 0) {
          return new Decoded(List.copyOf(out), skipped, refused);
        }
        if (isMessage(tag, REQUEST_RESOURCE_SPANS)) {
          int limit = in.pushLimit(in.readRawVarint32());
          resourceSpans(in);
          in.popLimit(limit);
        } else {
          in.skipField(tag);
        }
      }
    }

    private void resourceSpans(CodedInputStream in) throws IOException {
      for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
        if (isMessage(tag, RESOURCE_SPANS_SCOPE_SPANS)) {
          int limit = in.pushLimit(in.readRawVarint32());
          scopeSpans(in);
          in.popLimit(limit);
        } else {
          in.skipField(tag);
        }
      }
    }

    private void scopeSpans(CodedInputStream in) throws IOException {
      for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
        if (!isMessage(tag, SCOPE_SPANS_SPANS)) {
          in.skipField(tag);
        } else if (read >= maxSpans) {
          refused++;
          in.skipField(tag);
        } else {
          read++;
          int limit = in.pushLimit(in.readRawVarint32());
          EngineSpan e = span(in);
          in.popLimit(limit);
          if (e == null) {
            skipped++;
          } else {
            out.add(e);
          }
        }
      }
    }

    private static EngineSpan span(CodedInputStream in) throws IOException {
      byte[] traceId = null;
      byte[] parent = null;
      Timings t = new Timings();
      for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
        if (isMessage(tag, SPAN_TRACE_ID)) {
          traceId = id(in, 16);
        } else if (isMessage(tag, SPAN_PARENT_SPAN_ID)) {
          parent = id(in, 8);
        } else if (isMessage(tag, SPAN_ATTRIBUTES)) {
          int limit = in.pushLimit(in.readRawVarint32());
          attribute(in, t);
          in.popLimit(limit);
        } else {
          in.skipField(tag);
        }
      }
      if (traceId == null) {
        return null;
      }
      EngineTimings timings = new EngineTimings(t.queue, t.prefill, t.decode, t.ttft, t.e2e);
      if (!timings.splitsGeneration()) {
        return null;
      }
      return new EngineSpan(
          HEX.formatHex(traceId), parent == null ? null : HEX.formatHex(parent), timings);
    }

    /** The bytes of an id of {@code size} bytes; any other length is skipped and reads as null. */
    private static byte[] id(CodedInputStream in, int size) throws IOException {
      int length = in.readRawVarint32();
      if (length != size) {
        skip(in, length);
        return null;
      }
      return in.readRawBytes(size);
    }

    private static void attribute(CodedInputStream in, Timings t) throws IOException {
      String key = null;
      long nanos = -1;
      for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
        if (isMessage(tag, KEY_VALUE_KEY)) {
          int length = in.readRawVarint32();
          if (length > MAX_KEY_BYTES) {
            skip(in, length);
            key = null;
          } else {
            key = new String(in.readRawBytes(length), StandardCharsets.UTF_8);
          }
        } else if (isMessage(tag, KEY_VALUE_VALUE)) {
          int limit = in.pushLimit(in.readRawVarint32());
          nanos = seconds(in);
          in.popLimit(limit);
        } else {
          in.skipField(tag);
        }
      }
      if (key != null) {
        t.put(key, nanos);
      }
    }

    /** Seconds (a double, or an integer from a less careful exporter) to nanoseconds; -1 if not. */
    private static long seconds(CodedInputStream in) throws IOException {
      double seconds = Double.NaN;
      for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
        if (tag == tag(ANY_VALUE_DOUBLE, WireFormat.WIRETYPE_FIXED64)) {
          seconds = in.readDouble();
        } else if (tag == tag(ANY_VALUE_INT, WireFormat.WIRETYPE_VARINT)) {
          seconds = in.readInt64();
        } else {
          // Another kind of value: the oneof's last field wins, as in the generated parser.
          seconds = Double.NaN;
          in.skipField(tag);
        }
      }
      if (!(seconds >= 0) || Double.isInfinite(seconds)) {
        return -1;
      }
      return Math.round(seconds * 1e9);
    }

    private static void skip(CodedInputStream in, int length) throws IOException {
      if (length < 0) {
        throw new InvalidProtocolBufferException("negative length");
      }
      in.skipRawBytes(length);
    }

    private static boolean isMessage(int tag, int field) {
      return tag == tag(field, WireFormat.WIRETYPE_LENGTH_DELIMITED);
    }
  }

  /** The five timings of one span, as they are read. */
  private static final class Timings {
    long queue = -1;
    long ttft = -1;
    long prefill = -1;
    long decode = -1;
    long e2e = -1;

    void put(String key, long nanos) {
      switch (key) {
        case TIME_IN_QUEUE -> queue = nanos;
        case TIME_TO_FIRST_TOKEN -> ttft = nanos;
        case TIME_IN_MODEL_PREFILL -> prefill = nanos;
        case TIME_IN_MODEL_DECODE -> decode = nanos;
        case E2E -> e2e = nanos;
        default -> {}
      }
    }
  }
}
