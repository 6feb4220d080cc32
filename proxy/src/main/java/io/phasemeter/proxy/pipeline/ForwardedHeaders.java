package io.phasemeter.proxy.pipeline;

import io.netty.handler.ipfilter.IpFilterRuleType;
import io.netty.handler.ipfilter.IpSubnetFilterRule;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.net.SocketAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * The {@code Forwarded} (RFC 7239) and {@code X-Forwarded-*} headers sent upstream, per {@code
 * forwarded.trusted}: from a trusted peer (a load balancer in front) the client's headers are kept
 * and this hop is appended; from anyone else they are dropped and set from the connection alone, so
 * no client can tell the upstream it is someone else.
 */
final class ForwardedHeaders {
  /** The headers a client could use to claim an origin; never passed on from an untrusted peer. */
  static final Set<String> CLAIMS =
      Set.of(
          "forwarded",
          "x-forwarded-for",
          "x-forwarded-host",
          "x-forwarded-proto",
          "x-forwarded-port",
          "x-real-ip");

  private final List<IpSubnetFilterRule> trusted = new ArrayList<>();

  ForwardedHeaders(ProxyConfig.Forwarded config) {
    for (String t : config.trusted()) {
      int slash = t.indexOf('/');
      String addr = slash < 0 ? t : t.substring(0, slash);
      int bits =
          slash < 0 ? (addr.contains(":") ? 128 : 32) : Integer.parseInt(t.substring(slash + 1));
      trusted.add(new IpSubnetFilterRule(addr, bits, IpFilterRuleType.ACCEPT));
    }
  }

  /** Whether {@code peer}'s forwarding headers are believed. */
  boolean trusts(SocketAddress peer) {
    if (trusted.isEmpty() || peer == null || peer.hostAddress() == null) {
      return false;
    }
    InetSocketAddress address = new InetSocketAddress(peer.hostAddress(), peer.port());
    if (address.isUnresolved()) {
      return false;
    }
    for (IpSubnetFilterRule rule : trusted) {
      if (rule.matches(address)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Writes this hop's forwarding headers into {@code out}, which holds the client's headers already
   * filtered: without any of {@link #CLAIMS} unless {@code keptClaims} (the peer is trusted).
   */
  void apply(HttpServerRequest req, MultiMap out, boolean keptClaims) {
    SocketAddress peer = req.remoteAddress();
    String forAddr = peer == null || peer.hostAddress() == null ? "unknown" : peer.hostAddress();
    String proto = req.isSSL() ? "https" : "http";
    String host = req.getHeader("host");
    out.set("x-forwarded-for", append(keptClaims ? joined(out, "x-forwarded-for") : null, forAddr));
    if (!keptClaims || !out.contains("x-forwarded-proto")) {
      out.set("x-forwarded-proto", proto);
    }
    if (host != null && (!keptClaims || !out.contains("x-forwarded-host"))) {
      out.set("x-forwarded-host", host);
    }
    StringBuilder element = new StringBuilder("for=").append(nodeValue(forAddr));
    if (host != null) {
      element.append(";host=").append(value(host));
    }
    element.append(";proto=").append(proto);
    out.set("forwarded", append(keptClaims ? joined(out, "forwarded") : null, element.toString()));
  }

  /** Every line of a list-valued header, as one comma-separated value; null when absent. */
  private static String joined(MultiMap headers, String name) {
    List<String> all = headers.getAll(name);
    return all.isEmpty() ? null : String.join(", ", all);
  }

  private static String append(String existing, String hop) {
    return existing == null || existing.isBlank() ? hop : existing + ", " + hop;
  }

  /** An address as a {@code for=} node: IPv6 in brackets, always quoted then. */
  private static String nodeValue(String addr) {
    return addr.contains(":") ? "\"[" + addr + "]\"" : value(addr);
  }

  /** A token as is; anything else as a quoted string. */
  private static String value(String v) {
    for (int i = 0; i < v.length(); i++) {
      char c = v.charAt(i);
      boolean tchar =
          (c >= 'a' && c <= 'z')
              || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9')
              || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
      if (!tchar) {
        return "\"" + v.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
      }
    }
    return v;
  }

  /** The header names a client's {@code Connection} header marks as hop-by-hop, lower case. */
  static Set<String> connectionOptions(HttpServerRequest req) {
    List<String> values = req.headers().getAll("connection");
    if (values.isEmpty()) {
      return Set.of();
    }
    java.util.HashSet<String> names = new java.util.HashSet<>();
    for (String v : values) {
      for (String name : v.split(",")) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        if (!n.isEmpty()) {
          names.add(n);
        }
      }
    }
    return names;
  }
}
