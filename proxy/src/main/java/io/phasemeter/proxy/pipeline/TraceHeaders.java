package io.phasemeter.proxy.pipeline;

import io.opentelemetry.context.propagation.TextMapGetter;
import io.vertx.core.MultiMap;
import java.util.List;

/**
 * How the client's trace context is read from its request headers, for the OpenTelemetry W3C
 * propagator, which asks for one value per name. W3C Trace Context (§3.2, §3.3, and its test suite)
 * decides what one value is when a header repeats:
 *
 * <ul>
 *   <li>{@code traceparent} more than once is invalid: no parent, so the trace restarts with a new
 *       trace id (and a {@code tracestate} without a valid parent is dropped with it);
 *   <li>{@code tracestate} more than once is one list, its headers joined with commas in order (RFC
 *       9110 §5.3), empty ones skipped; the propagator then drops the whole list if it is invalid
 *       (a key twice, over 32 members). A list over {@link #MAX_TRACESTATE} characters is dropped
 *       whole.
 * </ul>
 */
final class TraceHeaders implements TextMapGetter<MultiMap> {
  /** The longest {@code tracestate} honoured; a longer one is dropped whole. */
  static final int MAX_TRACESTATE = 512;

  static final TraceHeaders GETTER = new TraceHeaders();

  private TraceHeaders() {}

  @Override
  public Iterable<String> keys(MultiMap carrier) {
    return carrier.names();
  }

  @Override
  public String get(MultiMap carrier, String key) {
    if (carrier == null || key == null) {
      return null;
    }
    List<String> values = carrier.getAll(key);
    if (values.isEmpty()) {
      return null;
    }
    if ("traceparent".equals(key)) {
      return values.size() == 1 ? values.get(0) : null;
    }
    if ("tracestate".equals(key)) {
      return tracestate(values);
    }
    return values.get(0);
  }

  private static String tracestate(List<String> values) {
    String value;
    if (values.size() == 1) {
      value = values.get(0);
    } else {
      StringBuilder joined = new StringBuilder();
      for (String v : values) {
        if (v.isBlank()) {
          continue;
        }
        if (joined.length() > 0) {
          joined.append(',');
        }
        joined.append(v);
        if (joined.length() > MAX_TRACESTATE) {
          return null;
        }
      }
      value = joined.toString();
    }
    // W3C asks vendors to pass on at least 512 characters of tracestate; more is the client's to
    // send, not the proxy's to forward to every upstream (up to 16 KiB).
    return value.length() > MAX_TRACESTATE ? null : value;
  }
}
