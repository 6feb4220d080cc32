package io.phasemeter.proxy.budget;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Tracer;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.pipeline.RequestObserver;
import io.phasemeter.proxy.pipeline.SyntheticRequest;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Synthetic successful chat requests with chosen phase durations, told to the proxy's observers
 * (metrics, live stats) as the pipeline tells them, on a clock that only the request moves; and the
 * scraped {@code /metrics} text read back as bucket counts.
 */
final class Traffic {
  private static final Tracer TRACER = OpenTelemetry.noop().getTracer("test");
  private static final ProxyConfig.Pool POOL = ConfigLoader.defaults().pools().get(0);
  private static final NanoClock CLOCK =
      new NanoClock() {
        @Override
        public long nanoTime() {
          return 0;
        }

        @Override
        public long toEpochNanos(long nanoTime) {
          return nanoTime;
        }
      };

  private Traffic() {}

  /** One successful request whose queue phase took {@code queueNanos}. */
  static RequestContext request(long queueNanos, RequestObserver... observers) {
    long t = 1_000_000_000L;
    SyntheticRequest r = SyntheticRequest.start(CLOCK, TRACER, null, t, observers);
    for (Phase p : new Phase[] {Phase.AUTH, Phase.RECEIVE}) {
      r.begin(p, t);
      r.end(p, t += 1000);
    }
    r.begin(Phase.PREPARE, t);
    r.prepared("sim-llama", true, 8);
    r.end(Phase.PREPARE, t += 1000);
    r.begin(Phase.ROUTE, t);
    r.routed("sim-llama", POOL);
    r.end(Phase.ROUTE, t += 1000);
    r.begin(Phase.QUEUE, t);
    r.end(Phase.QUEUE, t += queueNanos);
    r.begin(Phase.GENERATION, t);
    r.attempting(1);
    r.usage(16, 8);
    r.contentSeen(t + 1_000_000, t + 9_000_000, 8);
    r.finishedFor("stop");
    r.statusSent(200);
    r.end(Phase.GENERATION, t += 10_000_000);
    r.begin(Phase.WRITE, t);
    r.end(Phase.WRITE, t += 1000);
    RequestContext ctx = r.finish(t);
    for (RequestObserver o : observers) {
      o.onFinished(ctx);
    }
    return ctx;
  }

  /**
   * The cumulative bucket counts of the series of {@code metric} whose labels include {@code
   * matcher} (e.g. {@code llm_phase="queue"}, or "" for any), summed, by their {@code le} text as
   * scraped; {@code "count"} holds the {@code _count}.
   */
  static Map<String, Long> buckets(ProxyMetrics metrics, String metric, String matcher) {
    Pattern line =
        Pattern.compile(
            "^" + Pattern.quote(metric) + "_(bucket|count)\\{([^}]*)\\} ([0-9.eE+]+)$",
            Pattern.MULTILINE);
    Pattern le = Pattern.compile("le=\"([^\"]*)\"");
    Map<String, Long> out = new TreeMap<>();
    Matcher m = line.matcher(metrics.registry().scrape());
    while (m.find()) {
      String labels = m.group(2);
      if (!labels.contains(matcher)) {
        continue;
      }
      long v = (long) Double.parseDouble(m.group(3));
      if (m.group(1).equals("count")) {
        out.merge("count", v, Long::sum);
      } else {
        Matcher l = le.matcher(labels);
        l.find();
        out.merge(l.group(1), v, Long::sum);
      }
    }
    return out;
  }
}
