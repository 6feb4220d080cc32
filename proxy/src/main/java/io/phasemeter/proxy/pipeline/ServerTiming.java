package io.phasemeter.proxy.pipeline;

/**
 * Renders the {@code Server-Timing} header (docs/design.md §5): the phases known when the headers
 * leave, in milliseconds, so that a client alone (k6) can compute the network envelope.
 */
final class ServerTiming {
  private ServerTiming() {}

  /** The phases from {@code auth} up to and including {@code last} that have ended. */
  static String upTo(RequestContext ctx, Phase last) {
    StringBuilder sb = new StringBuilder(128);
    for (Phase p : Phase.all()) {
      long nanos = ctx.phaseNanos(p);
      if (nanos >= 0) {
        if (sb.length() > 0) {
          sb.append(", ");
        }
        appendMillis(sb.append(p.label()).append(";dur="), nanos);
      }
      if (p == last) {
        break;
      }
    }
    return sb.toString();
  }

  /**
   * Appends {@code nanos} as milliseconds with three decimals, rounded half up: what {@code
   * String.format(Locale.ROOT, "%.3f", nanos / 1e6)} printed, without the Formatter, which was a
   * tenth of the event loop's time per request (JFR, bench/run; docs/performance.md).
   */
  static StringBuilder appendMillis(StringBuilder sb, long nanos) {
    long micros = (nanos + 500) / 1000;
    long frac = micros % 1000;
    sb.append(micros / 1000).append('.');
    if (frac < 100) {
      sb.append(frac < 10 ? "00" : "0");
    }
    return sb.append(frac);
  }
}
