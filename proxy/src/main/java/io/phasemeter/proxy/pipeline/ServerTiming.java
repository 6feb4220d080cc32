package io.phasemeter.proxy.pipeline;

import java.util.Locale;

/**
 * Renders the {@code Server-Timing} header (DESIGN.md §5): the phases known when the headers leave,
 * in milliseconds, so that a client alone (k6) can compute the network envelope.
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
        sb.append(p.label())
            .append(";dur=")
            .append(String.format(Locale.ROOT, "%.3f", nanos / 1e6));
      }
      if (p == last) {
        break;
      }
    }
    return sb.toString();
  }
}
