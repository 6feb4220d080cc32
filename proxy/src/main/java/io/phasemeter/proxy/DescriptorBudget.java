package io.phasemeter.proxy;

import io.phasemeter.proxy.config.ProxyConfig;
import java.lang.management.ManagementFactory;

/**
 * How the process's file descriptors are shared out. Every connection is a descriptor, and a
 * process out of them can no longer accept, connect upstream or open a file: a flood on one
 * listener would take the other listener, the upstream connections and the health checks down with
 * it. So the admin listener and the upstream connections have fixed bounds, the process keeps a
 * margin for itself (what it holds open at start, jars and sockets included, plus {@link #MARGIN}
 * for the span exporter, Redis, the keys file and the like), and the public listener gets what is
 * left unless {@code listen.max_connections} sets its bound.
 *
 * @param limit the process's file descriptor limit ({@code RLIMIT_NOFILE}; the JVM raises its soft
 *     limit to the hard one at start), or -1 where the platform does not say
 * @param publicMax connections the public listener keeps open at most
 * @param adminMax connections the admin listener keeps open at most
 * @param upstreamMax connections every pool together may hold open to its upstreams
 * @param inUse descriptors the process held when the budget was made, plus the margin
 */
record DescriptorBudget(long limit, int publicMax, int adminMax, int upstreamMax, long inUse) {
  /** Descriptors kept for the process beyond what it holds at start. */
  static final int MARGIN = 64;

  /** Connections the health-check client may hold to one upstream. */
  static final int HEALTH_CHECK_CONNECTIONS = 2;

  /** The public bound where the limit is unknown. */
  static final int UNKNOWN_LIMIT_PUBLIC_MAX = 65_536;

  /** The budget for {@code config} in this process. */
  static DescriptorBudget of(ProxyConfig config) {
    long limit = -1;
    long open = 0;
    if (ManagementFactory.getOperatingSystemMXBean()
        instanceof com.sun.management.UnixOperatingSystemMXBean unix) {
      limit = unix.getMaxFileDescriptorCount();
      open = unix.getOpenFileDescriptorCount();
    }
    return of(config, limit, open);
  }

  /** The budget for {@code config} under {@code limit} with {@code open} descriptors in use. */
  static DescriptorBudget of(ProxyConfig config, long limit, long open) {
    int adminMax = config.admin().maxConnections();
    long upstream = 0;
    for (ProxyConfig.Pool p : config.pools()) {
      // Health checks have a client of their own: two connections an upstream at most.
      int perUpstream =
          p.slottedConnections()
              + p.connections().unslotted()
              + (p.activeHealthChecks() ? HEALTH_CHECK_CONNECTIONS : 0);
      upstream += (long) p.upstreams().size() * perUpstream;
    }
    int upstreamMax = (int) Math.min(Integer.MAX_VALUE, upstream);
    long inUse = Math.max(0, open) + MARGIN;
    int publicMax = config.listen().maxConnections();
    if (publicMax == 0) {
      if (limit <= 0) {
        publicMax = UNKNOWN_LIMIT_PUBLIC_MAX;
      } else {
        long left = limit - inUse - adminMax - upstreamMax;
        publicMax = (int) Math.max(1, Math.min(Integer.MAX_VALUE, left));
      }
    }
    return new DescriptorBudget(limit, publicMax, adminMax, upstreamMax, inUse);
  }

  /** Whether every bound together fits under the limit (true where the limit is unknown). */
  boolean fits() {
    return limit <= 0 || (long) publicMax + adminMax + upstreamMax + inUse <= limit;
  }

  /** The start-up line. */
  String describe() {
    String bounds =
        "connections: public at most "
            + publicMax
            + ", admin at most "
            + adminMax
            + ", upstreams at most "
            + upstreamMax;
    if (limit <= 0) {
      return bounds + " (file descriptor limit unknown)";
    }
    String line =
        bounds
            + ", of a file descriptor limit of "
            + limit
            + " ("
            + inUse
            + " kept for the process)";
    if (!fits()) {
      line +=
          "; WARNING: together they exceed the limit, so a flood can exhaust the descriptors:"
              + " lower listen.max_connections or raise the limit (ulimit -n)";
    }
    return line;
  }
}
