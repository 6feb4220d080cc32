package io.phasemeter.proxy.config;

import java.net.URI;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;

/**
 * The proxy's whole configuration (docs/design.md §9), immutable and validated on construction.
 * Load it with {@link ConfigLoader}; every record checks its own values and names the offending
 * key.
 */
public record ProxyConfig(
    Listen listen,
    Admin admin,
    Limits limits,
    Auth auth,
    List<Pool> pools,
    Telemetry telemetry,
    String budgets,
    Drain drain,
    Forwarded forwarded,
    List<Route> routes,
    Transport transport,
    Tenants tenants) {

  /** The most entries {@code routes} may have (each may add a value to metric labels). */
  public static final int MAX_ROUTES = 64;

  public ProxyConfig {
    drain = drain == null ? new Drain(Duration.ofSeconds(25)) : drain;
    forwarded = forwarded == null ? Forwarded.TRUST_NONE : forwarded;
    routes = routes == null ? List.of() : List.copyOf(routes);
    transport = transport == null ? Transport.AUTO : transport;
    tenants = tenants == null ? Tenants.NONE : tenants;
    Objects.requireNonNull(listen, "listen");
    Objects.requireNonNull(admin, "admin");
    Objects.requireNonNull(limits, "limits");
    Objects.requireNonNull(auth, "auth");
    Objects.requireNonNull(telemetry, "telemetry");
    if (pools == null || pools.isEmpty()) {
      throw new IllegalArgumentException("pools: at least one pool is required");
    }
    pools = List.copyOf(pools);
    Set<String> names = new HashSet<>();
    Set<String> models = new HashSet<>();
    for (Pool p : pools) {
      if (!names.add(p.name())) {
        throw new IllegalArgumentException("pools: the name '" + p.name() + "' is used twice");
      }
      for (String m : p.models()) {
        if (!models.add(m)) {
          throw new IllegalArgumentException(
              "pools: the model '" + m + "' is served by more than one pool");
        }
      }
    }
    if (routes.size() > MAX_ROUTES) {
      throw new IllegalArgumentException(
          "routes: at most " + MAX_ROUTES + " entries (got " + routes.size() + ")");
    }
    for (int i = 0; i < routes.size(); i++) {
      Route r = routes.get(i);
      if (r.pool() != null && !names.contains(r.pool())) {
        throw new IllegalArgumentException(
            "routes[" + i + "].pool: no pool is named '" + r.pool() + "'");
      }
      if (r.adminOnly() && !auth.enabled()) {
        throw new IllegalArgumentException(
            "routes["
                + i
                + "].admin_only: needs auth.enabled (admin keys are keys of the keys file)");
      }
    }
    if (auth.clientCert() && !auth.enabled()) {
      throw new IllegalArgumentException(
          "auth.client_cert: needs auth.enabled (a certificate names a key of the keys file)");
    }
    if (auth.clientCert() && (listen.tls() == null || !listen.tls().mutual())) {
      throw new IllegalArgumentException(
          "auth.client_cert: needs listen.tls.client_ca_file (client certificates are asked for"
              + " only when a CA to check them is set)");
    }
    if (listen.port() != 0 && listen.port() == admin.port() && listen.host().equals(admin.host())) {
      throw new IllegalArgumentException("admin.port: must differ from listen.port");
    }
  }

  /** A configuration that trusts no client's forwarding headers. */
  public ProxyConfig(
      Listen listen,
      Admin admin,
      Limits limits,
      Auth auth,
      List<Pool> pools,
      Telemetry telemetry,
      String budgets,
      Drain drain) {
    this(listen, admin, limits, auth, pools, telemetry, budgets, drain, null, null, null, null);
  }

  /** The pool that serves {@code model}, or {@code null}. */
  public Pool poolFor(String model) {
    for (Pool p : pools) {
      if (p.models().contains(model)) {
        return p;
      }
    }
    return null;
  }

  /** Returns a copy listening on {@code port} (0 = any free port); tests and the demo use it. */
  public ProxyConfig withListenPort(int port) {
    return new ProxyConfig(
        listen.withPort(port),
        admin,
        limits,
        auth,
        pools,
        telemetry,
        budgets,
        drain,
        forwarded,
        routes,
        transport,
        tenants);
  }

  /** Returns a copy whose admin listener uses {@code port} (0 = any free port). */
  public ProxyConfig withAdminPort(int port) {
    return new ProxyConfig(
        listen,
        new Admin(
            admin.host(),
            port,
            admin.token(),
            admin.allowOpen(),
            Admin.DEFAULT_MAX_CONNECTIONS,
            Admin.DEFAULT_RECEIVE_TIMEOUT,
            admin.tls()),
        limits,
        auth,
        pools,
        telemetry,
        budgets,
        drain,
        forwarded,
        routes,
        transport,
        tenants);
  }

  /** Returns a copy with {@code pools} replaced. */
  public ProxyConfig withPools(List<Pool> newPools) {
    return new ProxyConfig(
        listen, admin, limits, auth, newPools, telemetry, budgets, drain, forwarded, routes,
        transport, tenants);
  }

  /** Returns a copy with {@code limits} replaced. */
  public ProxyConfig withLimits(Limits newLimits) {
    return new ProxyConfig(
        listen, admin, newLimits, auth, pools, telemetry, budgets, drain, forwarded, routes,
        transport, tenants);
  }

  /** Returns a copy with {@code auth} replaced. */
  public ProxyConfig withAuth(Auth newAuth) {
    return new ProxyConfig(
        listen, admin, limits, newAuth, pools, telemetry, budgets, drain, forwarded, routes,
        transport, tenants);
  }

  /** Returns a copy with {@code drain} replaced. */
  public ProxyConfig withDrain(Drain newDrain) {
    return new ProxyConfig(
        listen, admin, limits, auth, pools, telemetry, budgets, newDrain, forwarded, routes,
        transport, tenants);
  }

  /** Returns a copy with {@code tenants} replaced. */
  public ProxyConfig withTenants(Tenants newTenants) {
    return new ProxyConfig(
        listen,
        admin,
        limits,
        auth,
        pools,
        telemetry,
        budgets,
        drain,
        forwarded,
        routes,
        transport,
        newTenants);
  }

  /**
   * Where a request's tenant comes from (docs/design.md, "Tenants"): the {@code llm_tenant} label
   * of the request, TTFT, TPOT, token and SLO metrics, the record's {@code tenant} and the root
   * span's {@code llm.tenant}. A tenant is a verified key's name when that name is allowlisted,
   * else the value of {@code header} when it is exactly an allowlisted value, else {@code other}.
   * The allowlist is {@code names} with the names of the keys marked {@code tenant_metrics: true}
   * in the keys file, at most {@link #MAX_VALUES} values in all, so the label's values stay bounded
   * whatever clients send.
   *
   * @param header the request header a tenant may come from (lower case), or null: none
   * @param names allowlisted tenants besides the keys' names
   * @param phaseHistograms whether {@code llm_phase_duration_seconds} carries {@code llm_tenant}
   *     too (a series per phase and tenant: off by default)
   */
  public record Tenants(String header, List<String> names, boolean phaseHistograms) {
    /** The most values the allowlist may hold, {@code tenants.names} and keys together. */
    public static final int MAX_VALUES = 64;

    /** The tenant of every request outside the allowlist; no name may take it. */
    public static final String OTHER = "other";

    /** What a tenant name may be: the keys file's key names. */
    public static final java.util.regex.Pattern NAME =
        java.util.regex.Pattern.compile("[A-Za-z0-9_.-]{1,64}");

    // Headers that carry a credential: their value must never be compared, logged or labelled.
    private static final Set<String> CREDENTIALS =
        Set.of("authorization", "proxy-authorization", "api-key", "x-api-key", "cookie");
    private static final java.util.regex.Pattern TOKEN =
        java.util.regex.Pattern.compile("[!#$%&'*+.^_`|~0-9a-z-]+");

    /** No header, no names: every request is {@code other} unless a key is marked. */
    public static final Tenants NONE = new Tenants(null, List.of(), false);

    public Tenants {
      header = header == null || header.isBlank() ? null : header.strip().toLowerCase(Locale.ROOT);
      if (header != null && !TOKEN.matcher(header).matches()) {
        throw new IllegalArgumentException(
            "tenants.header: '" + header + "' is not an HTTP header name");
      }
      if (header != null && CREDENTIALS.contains(header)) {
        throw new IllegalArgumentException(
            "tenants.header: '"
                + header
                + "' carries credentials; name a header such as x-tenant-id (with auth on, a"
                + " key's own name is its tenant: mark it tenant_metrics: true in the keys file)");
      }
      names = names == null ? List.of() : List.copyOf(names);
      if (names.size() > MAX_VALUES) {
        throw new IllegalArgumentException(
            "tenants.names: at most "
                + MAX_VALUES
                + " values (got "
                + names.size()
                + "): each is a value of the llm_tenant label");
      }
      Set<String> seen = new HashSet<>();
      for (int i = 0; i < names.size(); i++) {
        String n = names.get(i);
        if (n == null || !NAME.matcher(n).matches()) {
          throw new IllegalArgumentException(
              "tenants.names["
                  + i
                  + "]: '"
                  + n
                  + "' must be 1 to 64 letters, digits, '_', '.' or '-'");
        }
        if (n.equals(OTHER)) {
          throw new IllegalArgumentException(
              "tenants.names["
                  + i
                  + "]: 'other' is reserved for the requests of no allowlisted tenant");
        }
        if (!seen.add(n)) {
          throw new IllegalArgumentException(
              "tenants.names[" + i + "]: '" + n + "' is listed twice");
        }
      }
    }

    /** Whether tenants can come from somewhere besides the keys ({@code names} or a header). */
    public boolean configured() {
      return header != null || !names.isEmpty();
    }
  }

  /**
   * The network transport under both listeners and every upstream client: {@code auto} is Netty's
   * native epoll on Linux (fewer allocations and system calls per relayed chunk than the JDK's NIO;
   * docs/performance.md), falling back to NIO where epoll cannot load; {@code nio} is the JDK's NIO
   * everywhere.
   */
  public enum Transport {
    AUTO,
    NIO;

    /** Jackson: {@code auto} or {@code nio}, any case. */
    @com.fasterxml.jackson.annotation.JsonCreator
    public static Transport of(String value) {
      Transport t = named(Transport.class, value);
      if (t == null) {
        throw new IllegalArgumentException("transport: must be auto or nio (got " + value + ")");
      }
      return t;
    }
  }

  /**
   * The public listener. {@code maxConnections} bounds the connections it keeps open (more are
   * closed when accepted); 0 leaves the process's file descriptor limit less what the admin
   * listener, the upstream connections and the process itself need (see {@code DescriptorBudget}).
   *
   * <p>HTTP/2 ({@code listen.http2}): h2c with prior knowledge on plaintext, {@code h2} by ALPN
   * over TLS; off by default on plaintext and on by default with TLS, as Envoy and nginx decide per
   * listener. {@code http2MaxConcurrentStreams} ({@code SETTINGS_MAX_CONCURRENT_STREAMS}, nginx's
   * {@code http2_max_concurrent_streams}, default 128 as nginx) and {@code http2MaxHeaderListSize}
   * ({@code SETTINGS_MAX_HEADER_LIST_SIZE}, Envoy's {@code max_request_headers_kb}; default 16384
   * bytes, the HTTP/1 head limit) are advertised and enforced per connection. {@code tls} ({@code
   * listen.tls}) is null for a plaintext listener.
   */
  public record Listen(
      String host,
      int port,
      int maxConnections,
      // HTTP/2 (issue 38): null = the default for the listener (on with TLS).
      Boolean http2,
      Integer http2MaxConcurrentStreams,
      Integer http2MaxHeaderListSize,
      ServerTls tls) {
    /** Streams one HTTP/2 connection may have open at once, by default (as nginx). */
    public static final int DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS = 128;

    /** The largest header list an HTTP/2 request may send, by default: the HTTP/1 head limit. */
    public static final int DEFAULT_HTTP2_MAX_HEADER_LIST_SIZE = 16384;

    public Listen {
      host = requireText(host, "listen.host");
      requirePort(port, "listen.port");
      if (maxConnections < 0) {
        throw new IllegalArgumentException(
            "listen.max_connections: must be 0 (from the file descriptor limit) or more (got "
                + maxConnections
                + ")");
      }
      tls = ServerTls.orOff(tls);
      http2 = http2 == null ? tls != null : http2;
      http2MaxConcurrentStreams =
          http2MaxConcurrentStreams == null
              ? DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS
              : http2MaxConcurrentStreams;
      if (http2MaxConcurrentStreams < 1) {
        throw new IllegalArgumentException(
            "listen.http2_max_concurrent_streams: must be at least 1 (got "
                + http2MaxConcurrentStreams
                + ")");
      }
      http2MaxHeaderListSize =
          http2MaxHeaderListSize == null
              ? DEFAULT_HTTP2_MAX_HEADER_LIST_SIZE
              : http2MaxHeaderListSize;
      if (http2MaxHeaderListSize < 1024) {
        throw new IllegalArgumentException(
            "listen.http2_max_header_list_size: must be at least 1024 bytes (got "
                + http2MaxHeaderListSize
                + ")");
      }
    }

    /** A plaintext listener with the HTTP/2 defaults. */
    public Listen(String host, int port, int maxConnections) {
      this(host, port, maxConnections, null, null, null, null);
    }

    /** A listener whose connections are bounded by the file descriptor limit. */
    public Listen(String host, int port) {
      this(host, port, 0);
    }

    /** This listener on {@code port}, everything else kept. */
    public Listen withPort(int port) {
      return new Listen(
          host,
          port,
          maxConnections,
          http2,
          http2MaxConcurrentStreams,
          http2MaxHeaderListSize,
          tls);
    }
  }

  /**
   * TLS on a listener ({@code listen.tls}, {@code admin.tls}; docs/design.md, "TLS"): the
   * certificate chain and its private key as PEM files, and optionally the CA whose certificates
   * clients must present (mTLS). A listener without {@code cert_file} speaks plaintext. The files
   * are read and checked at start (a bad pair, an expired certificate or an unreadable file stops
   * start-up) and every {@code reloadInterval} again when they changed; a bad new pair leaves the
   * one in service. The files' contents are checked when the listener starts, not here.
   *
   * @param certFile the certificate chain (leaf first), PEM
   * @param keyFile the leaf's private key, PEM (PKCS#8, or PKCS#1 / SEC1)
   * @param clientCaFile the CA certificates that sign client certificates, PEM; set, every client
   *     must present a certificate signed by one of them
   * @param reloadInterval how often the files are checked for a change; zero: never
   */
  public record ServerTls(
      String certFile, String keyFile, String clientCaFile, Duration reloadInterval) {
    /** How often the files are checked for a change, by default. */
    public static final Duration DEFAULT_RELOAD_INTERVAL = Duration.ofSeconds(10);

    public ServerTls {
      certFile = blankToNull(certFile);
      keyFile = blankToNull(keyFile);
      clientCaFile = blankToNull(clientCaFile);
      reloadInterval = reloadInterval == null ? DEFAULT_RELOAD_INTERVAL : reloadInterval;
      if (certFile == null && keyFile != null) {
        throw new IllegalArgumentException("tls.cert_file: required with tls.key_file");
      }
      if (certFile != null && keyFile == null) {
        throw new IllegalArgumentException("tls.key_file: required with tls.cert_file");
      }
      if (certFile == null && clientCaFile != null) {
        throw new IllegalArgumentException(
            "tls.cert_file: required with tls.client_ca_file (client certificates need TLS)");
      }
      if (reloadInterval.isNegative()) {
        throw new IllegalArgumentException(
            "tls.reload_interval: must be 0 (never) or a positive duration (got "
                + reloadInterval
                + ")");
      }
    }

    /** TLS with a certificate and key, no client certificates, reloaded every 10 s. */
    public ServerTls(String certFile, String keyFile) {
      this(certFile, keyFile, null, DEFAULT_RELOAD_INTERVAL);
    }

    /** Whether client certificates are required. */
    public boolean mutual() {
      return clientCaFile != null;
    }

    /** {@code tls}, or null when it names no certificate (the listener speaks plaintext). */
    static ServerTls orOff(ServerTls tls) {
      return tls == null || tls.certFile() == null ? null : tls;
    }

    private static String blankToNull(String s) {
      return s == null || s.isBlank() ? null : s.strip();
    }
  }

  /**
   * The admin listener (metrics, health, records, engine span intake). An empty token means no
   * token, which is allowed on a loopback host only, unless {@code allowOpen} says so explicitly:
   * records, stats, metrics and {@code POST /v1/traces} would otherwise be open to anyone who
   * reaches the port. Beyond loopback a token must also not be a placeholder, short, or one
   * character repeated ({@link AdminToken}); {@code allowOpen} does not excuse that. The token is
   * trimmed, as the presented header's value is before the two are compared.
   *
   * <p>Like the public listener it bounds its connections ({@code maxConnections}, more are closed
   * when accepted) and the time a request may take to arrive ({@code receiveTimeout}: a request
   * head since the connection opened or its previous response ended, and a whole request since its
   * head; the record feed excepted once it streams).
   *
   * @param allowOpen {@code admin.allow_open}: bind beyond loopback without a token anyway
   * @param tls {@code admin.tls}: HTTPS on the admin listener, or null (plaintext); the token and
   *     loopback rules are the same either way
   */
  public record Admin(
      String host,
      int port,
      String token,
      boolean allowOpen,
      int maxConnections,
      Duration receiveTimeout,
      ServerTls tls) {
    /** Connections the admin listener keeps open at most, by default. */
    public static final int DEFAULT_MAX_CONNECTIONS = 256;

    /** How long a request may take to arrive on the admin listener, by default. */
    public static final Duration DEFAULT_RECEIVE_TIMEOUT = Duration.ofSeconds(10);

    private static final java.util.regex.Pattern LOOPBACK_V4 =
        java.util.regex.Pattern.compile("127(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3}");

    public Admin {
      host = requireText(host, "admin.host");
      requirePort(port, "admin.port");
      token = token == null ? "" : token.strip();
      if (maxConnections < 1) {
        throw new IllegalArgumentException(
            "admin.max_connections: must be at least 1 (got " + maxConnections + ")");
      }
      receiveTimeout = receiveTimeout == null ? DEFAULT_RECEIVE_TIMEOUT : receiveTimeout;
      requirePositive(receiveTimeout, "admin.receive_timeout");
      tls = ServerTls.orOff(tls);
      if (token.isEmpty() && !isLoopback(host) && !allowOpen) {
        throw new IllegalArgumentException(
            "admin.host: "
                + host
                + " is reachable beyond this machine and admin.token is empty; set admin.token"
                + " (PHASEMETER_ADMIN_TOKEN) or admin.allow_open: true");
      }
      String weakness = token.isEmpty() || isLoopback(host) ? null : AdminToken.weakness(token);
      if (weakness != null) {
        throw new IllegalArgumentException(
            "admin.token: "
                + weakness
                + ", and admin.host "
                + host
                + " is reachable beyond this machine; set a random token of at least "
                + AdminToken.MIN_LENGTH
                + " characters (e.g. openssl rand -hex 32) in admin.token or"
                + " PHASEMETER_ADMIN_TOKEN");
      }
    }

    /** An admin listener that is not allowed open beyond loopback without a token. */
    public Admin(String host, int port, String token) {
      this(host, port, token, false);
    }

    /** An admin listener with the default bounds on connections and receive time. */
    public Admin(String host, int port, String token, boolean allowOpen) {
      this(host, port, token, allowOpen, DEFAULT_MAX_CONNECTIONS, DEFAULT_RECEIVE_TIMEOUT);
    }

    /** A plaintext admin listener. */
    public Admin(
        String host,
        int port,
        String token,
        boolean allowOpen,
        int maxConnections,
        Duration receiveTimeout) {
      this(host, port, token, allowOpen, maxConnections, receiveTimeout, null);
    }

    /**
     * True when anyone who reaches the port may use every admin endpoint (no token, not loopback).
     */
    public boolean open() {
      return token.isEmpty() && !isLoopback(host);
    }

    /**
     * Whether {@code host} only listens on this machine: {@code localhost}, {@code 127.x.x.x} or
     * {@code ::1}, by name alone (nothing is resolved). Anything else, {@code 0.0.0.0} and {@code
     * ::} included, is reachable from elsewhere.
     */
    public static boolean isLoopback(String host) {
      String h = host.trim().toLowerCase(Locale.ROOT);
      if (h.startsWith("[") && h.endsWith("]")) {
        h = h.substring(1, h.length() - 1);
      }
      return h.equals("localhost")
          || h.equals("::1")
          || h.equals("0:0:0:0:0:0:0:1")
          || LOOPBACK_V4.matcher(h).matches();
    }
  }

  /**
   * Request limits: body size, how long the body may take to arrive, and how much body all requests
   * together may hold. A body is buffered as its bytes arrive (never sized from its declared
   * length); past {@code maxConcurrentUploads} bodies being received at once, or {@code
   * maxBufferedBodyBytes} held by all requests in flight, a request gets 503 {@code overloaded}.
   * {@code maxBufferedBodyBytes} 0 means a quarter of the JVM's maximum heap.
   */
  public record Limits(
      long maxBodyBytes,
      Duration receiveTimeout,
      int maxConcurrentUploads,
      long maxBufferedBodyBytes) {
    /** Bodies being received at once, by default. */
    public static final int DEFAULT_MAX_CONCURRENT_UPLOADS = 1024;

    public Limits {
      if (maxBodyBytes < 1) {
        throw new IllegalArgumentException(
            "limits.max_body_bytes: must be at least 1 (got " + maxBodyBytes + ")");
      }
      requirePositive(receiveTimeout, "limits.receive_timeout");
      if (maxConcurrentUploads < 1) {
        throw new IllegalArgumentException(
            "limits.max_concurrent_uploads: must be at least 1 (got " + maxConcurrentUploads + ")");
      }
      if (maxBufferedBodyBytes < 0) {
        throw new IllegalArgumentException(
            "limits.max_buffered_body_bytes: must be 0 (a quarter of the heap) or more (got "
                + maxBufferedBodyBytes
                + ")");
      }
    }

    /** A body limit with the default receive timeout (30 s) and buffering bounds. */
    public Limits(long maxBodyBytes) {
      this(maxBodyBytes, Duration.ofSeconds(30));
    }

    /** A body limit and receive timeout with the default buffering bounds. */
    public Limits(long maxBodyBytes, Duration receiveTimeout) {
      this(maxBodyBytes, receiveTimeout, DEFAULT_MAX_CONCURRENT_UPLOADS, 0);
    }

    /** The bound on body bytes held by all requests, with 0 resolved against the heap. */
    public long bufferedBodyBytesBound() {
      return maxBufferedBodyBytes > 0
          ? maxBufferedBodyBytes
          : Math.max(maxBodyBytes, Runtime.getRuntime().maxMemory() / 4);
    }
  }

  /**
   * What the proxy does with a client's {@code Forwarded} and {@code X-Forwarded-*} headers. From a
   * peer whose address is in {@code trusted} (CIDR blocks or addresses: a load balancer in front)
   * they are kept and this hop is appended; from anyone else they are dropped and set afresh from
   * the connection, so a client cannot claim another address upstream. Empty: trust no one.
   */
  public record Forwarded(List<String> trusted) {
    static final Forwarded TRUST_NONE = new Forwarded(List.of());

    public Forwarded {
      trusted = trusted == null ? List.of() : List.copyOf(trusted);
      for (String t : trusted) {
        String cidr = requireText(t, "forwarded.trusted[]");
        String addr = cidr.contains("/") ? cidr.substring(0, cidr.indexOf('/')) : cidr;
        if (!io.netty.util.NetUtil.isValidIpV4Address(addr)
            && !io.netty.util.NetUtil.isValidIpV6Address(addr)) {
          throw new IllegalArgumentException(
              "forwarded.trusted: '" + t + "' is not an IP address or CIDR block");
        }
        if (cidr.contains("/")) {
          String bits = cidr.substring(cidr.indexOf('/') + 1);
          int max = addr.contains(":") ? 128 : 32;
          if (!bits.matches("[0-9]{1,3}") || Integer.parseInt(bits) > max) {
            throw new IllegalArgumentException(
                "forwarded.trusted: '" + t + "' has a prefix length outside 0-" + max);
          }
        }
      }
    }
  }

  /**
   * One entry of the route table (docs/design.md §3): which requests of the public listener a path
   * pattern matches and how they are handled. Entries given in proxy.yaml are tried in order before
   * the built-in table; the first match wins.
   *
   * @param path {@code /segment/...}; a segment {@code {name}} matches any one segment, a last
   *     segment {@code **} any rest (also none); matched against the normalised path
   * @param handler {@code chat}, {@code completions}, {@code responses}, {@code embeddings}, {@code
   *     passthrough} or {@code deny}
   * @param pool the pool that serves it; null: by the body's {@code model} (the JSON handlers), or
   *     the first pool (pass-through)
   * @param slot whether it waits for a slot of its pool; null: yes, except for pass-through
   * @param maxBodyBytes the body limit of this route; null: {@code limits.max_body_bytes}
   * @param methods the methods allowed (others get 405); null: POST for the JSON handlers, any for
   *     pass-through
   * @param adminOnly only keys with {@code admin: true} may use it (needs auth)
   * @param operation {@code gen_ai.operation.name} for an {@code embeddings} route; null: {@code
   *     embeddings}
   * @param modelFromBody pass-through only: the body is read (within the limit) and routed by its
   *     {@code model}; otherwise it is streamed to the upstream as it arrives
   */
  public record Route(
      String path,
      String handler,
      String pool,
      Boolean slot,
      Long maxBodyBytes,
      List<String> methods,
      Boolean adminOnly,
      String operation,
      Boolean modelFromBody) {
    /** The handlers a route may name. */
    public static final List<String> HANDLERS =
        List.of("chat", "completions", "responses", "embeddings", "passthrough", "deny");

    private static final java.util.regex.Pattern SEGMENT =
        java.util.regex.Pattern.compile("[A-Za-z0-9._~!$&'()*+,;=:@-]+|\\{[a-z_]{1,32}\\}|\\*\\*");
    private static final java.util.regex.Pattern OPERATION =
        java.util.regex.Pattern.compile("[a-z][a-z0-9_.]{0,31}");
    private static final Set<String> METHODS =
        Set.of("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS");

    public Route {
      adminOnly = adminOnly != null && adminOnly;
      modelFromBody = modelFromBody != null && modelFromBody;
      if (path == null || !path.startsWith("/")) {
        throw new IllegalArgumentException("routes.path: must start with '/' (got " + path + ")");
      }
      String[] segments = path.substring(1).split("/", -1);
      for (int i = 0; i < segments.length; i++) {
        String seg = segments[i];
        if (path.equals("/")) {
          break;
        }
        if (!SEGMENT.matcher(seg).matches() || (seg.equals("**") && i != segments.length - 1)) {
          throw new IllegalArgumentException(
              "routes.path: '"
                  + path
                  + "' has a bad segment '"
                  + seg
                  + "' (literal characters, {name}, or ** as the last segment)");
        }
      }
      if (handler == null || !HANDLERS.contains(handler)) {
        throw new IllegalArgumentException(
            "routes.handler: must be one of "
                + String.join(", ", HANDLERS)
                + " (got "
                + handler
                + ")");
      }
      if (maxBodyBytes != null && maxBodyBytes < 1) {
        throw new IllegalArgumentException(
            "routes.max_body_bytes: must be at least 1 (got " + maxBodyBytes + ")");
      }
      if (methods != null) {
        methods = methods.stream().map(m -> m == null ? "" : m.toUpperCase(Locale.ROOT)).toList();
        for (String m : methods) {
          if (!METHODS.contains(m)) {
            throw new IllegalArgumentException(
                "routes.methods: '" + m + "' is not one of " + new java.util.TreeSet<>(METHODS));
          }
        }
        if (methods.isEmpty()) {
          throw new IllegalArgumentException(
              "routes.methods: must not be empty (omit it for the default)");
        }
      }
      if (operation != null && !OPERATION.matcher(operation).matches()) {
        throw new IllegalArgumentException(
            "routes.operation: must be 1 to 32 characters of a-z, 0-9, '_' or '.' (got "
                + operation
                + ")");
      }
      if (operation != null && !handler.equals("embeddings")) {
        throw new IllegalArgumentException(
            "routes.operation: only an embeddings route names its operation (" + path + ")");
      }
      if (modelFromBody && !handler.equals("passthrough")) {
        throw new IllegalArgumentException(
            "routes.model_from_body: only for a passthrough route (" + path + ")");
      }
    }

    /** A route of {@code handler} with every other setting at its default. */
    public static Route of(String path, String handler) {
      return new Route(path, handler, null, null, null, null, false, null, false);
    }
  }

  /**
   * API key checking; off must be explicit. The keys file is re-read when it changes (checked every
   * {@code reloadInterval}); verified keys are cached by digest for {@code cacheTtl}. With {@code
   * clientCert} ({@code auth.client_cert}, needs {@code listen.tls.client_ca_file}) a request's
   * client certificate names its key: the key whose name is the certificate subject's CN
   * (docs/design.md, "TLS").
   */
  public record Auth(
      boolean enabled,
      String keysFile,
      Duration reloadInterval,
      Duration cacheTtl,
      int cacheMax,
      SharedLimits sharedLimits,
      boolean clientCert) {
    public Auth {
      if (enabled && (keysFile == null || keysFile.isBlank())) {
        throw new IllegalArgumentException("auth.keys_file: required when auth.enabled is true");
      }
      sharedLimits = sharedLimits == null ? SharedLimits.OFF : sharedLimits;
      reloadInterval = reloadInterval == null ? Duration.ofSeconds(5) : reloadInterval;
      cacheTtl = cacheTtl == null ? Duration.ofMinutes(5) : cacheTtl;
      requirePositive(reloadInterval, "auth.reload_interval");
      requirePositive(cacheTtl, "auth.cache_ttl");
      if (cacheMax < 1) {
        throw new IllegalArgumentException(
            "auth.cache_max: must be at least 1 (got " + cacheMax + ")");
      }
    }

    /** Auth with the default reload interval and cache. */
    public Auth(boolean enabled, String keysFile) {
      this(enabled, keysFile, Duration.ofSeconds(5), Duration.ofMinutes(5), 10_000);
    }

    /** Auth by API keys only (no client certificates). */
    public Auth(
        boolean enabled,
        String keysFile,
        Duration reloadInterval,
        Duration cacheTtl,
        int cacheMax,
        SharedLimits sharedLimits) {
      this(enabled, keysFile, reloadInterval, cacheTtl, cacheMax, sharedLimits, false);
    }

    /** Auth whose rate limits are each replica's own. */
    public Auth(
        boolean enabled,
        String keysFile,
        Duration reloadInterval,
        Duration cacheTtl,
        int cacheMax) {
      this(enabled, keysFile, reloadInterval, cacheTtl, cacheMax, null);
    }
  }

  /**
   * Rate limits shared by every replica through Redis ({@code auth.shared_limits}, docs/design.md
   * §9): each key's rpm and tpm buckets live in Redis and are updated by one atomic script per
   * decision. Past {@code timeout} (or on an error) a replica decides with its own buckets, sized
   * as the limit ÷ {@code replicasHint}, or refuses with 503 when {@code onFailure} is {@code
   * fail_closed}, and tries Redis again a second later.
   *
   * @param enabled whether limits are shared; off, each replica keeps its own buckets
   * @param type {@code standalone}, {@code sentinel} or {@code cluster}
   * @param endpoints {@code redis://host:port} ({@code rediss://} for TLS), one or more
   * @param masterName the Sentinel master's name ({@code sentinel} only)
   * @param keyPrefix what every Redis key starts with
   * @param timeout the longest a decision waits for Redis
   * @param replicasHint how many replicas share the limits: a replica's own buckets hold the limit
   *     ÷ this while Redis is out of reach
   * @param onFailure {@code local} (decide with the replica's own buckets) or {@code fail_closed}
   *     (503)
   * @param passwordEnv the environment variable holding Redis's password, or null
   */
  public record SharedLimits(
      boolean enabled,
      String type,
      List<String> endpoints,
      String masterName,
      String keyPrefix,
      Duration timeout,
      int replicasHint,
      String onFailure,
      String passwordEnv) {
    /** Shared limits off: each replica its own buckets. */
    public static final SharedLimits OFF =
        new SharedLimits(
            false,
            "standalone",
            List.of("redis://127.0.0.1:6379"),
            null,
            "phasemeter:",
            Duration.ofMillis(50),
            1,
            "local",
            null);

    public SharedLimits {
      type = type == null ? "standalone" : type;
      if (!List.of("standalone", "sentinel", "cluster").contains(type)) {
        throw new IllegalArgumentException(
            "auth.shared_limits.type: must be standalone, sentinel or cluster (got " + type + ")");
      }
      endpoints = endpoints == null ? List.of() : List.copyOf(endpoints);
      if (enabled && endpoints.isEmpty()) {
        throw new IllegalArgumentException(
            "auth.shared_limits.endpoints: at least one redis:// URL is required");
      }
      for (String e : endpoints) {
        if (e == null || !(e.startsWith("redis://") || e.startsWith("rediss://"))) {
          throw new IllegalArgumentException(
              "auth.shared_limits.endpoints: an endpoint is not a redis:// or rediss:// URL");
        }
        String authority = e.substring(e.indexOf("//") + 2);
        int slash = authority.indexOf('/');
        if ((slash < 0 ? authority : authority.substring(0, slash)).contains("@")) {
          // The URL would be logged (start-up, outages) with it: the password has its own place.
          throw new IllegalArgumentException(
              "auth.shared_limits.endpoints: an endpoint carries credentials; put the password in"
                  + " the environment and name the variable in auth.shared_limits.password_env");
        }
      }
      if (enabled && type.equals("sentinel") && (masterName == null || masterName.isBlank())) {
        throw new IllegalArgumentException(
            "auth.shared_limits.master_name: required for a sentinel deployment");
      }
      keyPrefix = keyPrefix == null ? "phasemeter:" : keyPrefix;
      if (keyPrefix.length() > 64 || keyPrefix.contains("{") || keyPrefix.contains("}")) {
        throw new IllegalArgumentException(
            "auth.shared_limits.key_prefix: at most 64 characters, no braces (got "
                + keyPrefix
                + ")");
      }
      timeout = timeout == null ? Duration.ofMillis(50) : timeout;
      requirePositive(timeout, "auth.shared_limits.timeout");
      if (replicasHint < 1) {
        throw new IllegalArgumentException(
            "auth.shared_limits.replicas_hint: must be at least 1 (got " + replicasHint + ")");
      }
      onFailure = onFailure == null ? "local" : onFailure;
      if (!onFailure.equals("local") && !onFailure.equals("fail_closed")) {
        throw new IllegalArgumentException(
            "auth.shared_limits.on_failure: must be local or fail_closed (got " + onFailure + ")");
      }
    }

    /** Whether a replica refuses (503) rather than decides alone while Redis is out of reach. */
    public boolean failClosed() {
      return onFailure.equals("fail_closed");
    }
  }

  /** On SIGTERM: how long in-flight requests may run on before they are cancelled. */
  public record Drain(Duration timeout) {
    public Drain {
      requirePositive(timeout, "drain.timeout");
    }
  }

  /**
   * A pool's upstream connections (per upstream): {@code max} pooled connections for requests that
   * hold a slot (0: slots + 8, so that no such request waits for one), {@code unslotted} for those
   * that hold none (pass-throughs such as /tokenize), {@code wait_queue} requests that may wait for
   * an unslotted connection (more fail at once with 503 {@code upstream_busy}; connections being
   * opened count against it, as Vert.x's pool counts them), and {@code keep_alive}, how long an
   * idle pooled connection is kept, in whole seconds (0: until the upstream closes it).
   *
   * <p>{@code reuse} says whether a connection carries more than one request: {@code on} (always,
   * as a kept-alive pool does), {@code off} (every request carries {@code Connection: close} and
   * goes on a connection of its own) or {@code auto} (reused until the upstream is seen closing its
   * connections after its responses, as llama.cpp's server does after a stream; from then on its
   * slotted requests go on connections of their own). {@code preconnect}: for an upstream whose
   * connections carry one request each ({@code off}, or {@code auto} once seen), that many spare
   * connections are kept open ahead of demand, as Envoy's preconnect policy does, so that a request
   * finds one open; -1 (unset): {@link #DEFAULT_PRECONNECT}. Spares are opened only within {@code
   * max} less the requests in flight; the requests' own connections (one each) are bounded by the
   * slots, not by {@code max}.
   */
  public record Connections(
      int max, int unslotted, int waitQueue, Duration keepAlive, int preconnect, Reuse reuse) {
    /** Spare connections per upstream when {@code preconnect} is not set. */
    public static final int DEFAULT_PRECONNECT = 2;

    /** The most spare connections an upstream may have. */
    public static final int MAX_PRECONNECT = 1024;

    /** The built-in defaults. */
    public static final Connections DEFAULT =
        new Connections(0, 32, 1024, Duration.ofSeconds(60), -1, Reuse.AUTO);

    public Connections {
      if (max < 0) {
        throw new IllegalArgumentException(
            "connections.max: must be 0 (slots + 8) or more (got " + max + ")");
      }
      if (unslotted < 1) {
        throw new IllegalArgumentException(
            "connections.unslotted: must be at least 1 (got " + unslotted + ")");
      }
      if (waitQueue < 0) {
        throw new IllegalArgumentException(
            "connections.wait_queue: must be 0 or more (got " + waitQueue + ")");
      }
      if (keepAlive == null || keepAlive.isNegative() || keepAlive.toMillis() % 1000 != 0) {
        throw new IllegalArgumentException(
            "connections.keep_alive: must be whole seconds, 0 (until the upstream closes it) or"
                + " more (got "
                + keepAlive
                + ")");
      }
      reuse = reuse == null ? Reuse.AUTO : reuse;
      if (preconnect < -1 || preconnect > MAX_PRECONNECT) {
        throw new IllegalArgumentException(
            "connections.preconnect: must be 0-"
                + MAX_PRECONNECT
                + " spare connections per upstream (got "
                + preconnect
                + ")");
      }
      if (max > 0 && preconnect > max) {
        throw new IllegalArgumentException(
            "connections.preconnect: "
                + preconnect
                + " spare connections exceed connections.max ("
                + max
                + "), which they count towards");
      }
      if (reuse == Reuse.ON && preconnect > 0) {
        throw new IllegalArgumentException(
            "connections.preconnect: spare connections are for upstreams whose connections carry"
                + " one request each (reuse: off, or auto once the upstream is seen closing them);"
                + " with reuse: on the pool's kept-alive connections are reused instead (got"
                + " preconnect "
                + preconnect
                + ")");
      }
    }

    /** As the defaults for {@code preconnect} and {@code reuse}. */
    public Connections(int max, int unslotted, int waitQueue, Duration keepAlive) {
      this(max, unslotted, waitQueue, keepAlive, -1, Reuse.AUTO);
    }

    /**
     * Spare connections per upstream while its connections carry one request each: {@code
     * preconnect}, or {@link #DEFAULT_PRECONNECT} when unset.
     */
    public int spares() {
      return preconnect >= 0 ? preconnect : DEFAULT_PRECONNECT;
    }
  }

  /**
   * How a pool picks the upstream for a request ({@code pools[].routing}): {@code least_loaded},
   * fewest in flight relative to the upstream's slots; {@code engine_load}, the lowest score from
   * each engine's own {@code /metrics} (waiting, running, KV-cache use), read every {@code
   * scrape_interval}.
   */
  public enum Routing {
    LEAST_LOADED,
    ENGINE_LOAD;

    /** Jackson: {@code least_loaded} or {@code engine_load}, any case. */
    @com.fasterxml.jackson.annotation.JsonCreator
    public static Routing of(String value) {
      Routing r = named(Routing.class, value);
      if (r == null) {
        throw new IllegalArgumentException(
            "routing: must be least_loaded or engine_load (got " + value + ")");
      }
      return r;
    }

    /** The word the configuration uses. */
    public String word() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** Whether an upstream connection carries more than one request ({@code connections.reuse}). */
  public enum Reuse {
    AUTO,
    ON,
    OFF;

    /**
     * Jackson: {@code auto}, {@code on} or {@code off}, any case (YAML 1.1's on/off booleans too).
     */
    @com.fasterxml.jackson.annotation.JsonCreator
    public static Reuse of(String value) {
      if (value != null) {
        String v = value.trim();
        if (v.equalsIgnoreCase("true")) {
          return ON;
        }
        if (v.equalsIgnoreCase("false")) {
          return OFF;
        }
      }
      Reuse r = named(Reuse.class, value);
      if (r != null) {
        return r;
      }
      throw new IllegalArgumentException(
          "connections.reuse: must be auto, on or off (got " + value + ")");
    }

    /** The word the configuration uses. */
    public String word() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /**
   * A pool of upstream inference servers that serve the same models. Its {@code slots} are shared
   * among its upstreams: an upstream that names its own {@code slots} has those, the others share
   * what is left evenly (the remainder to the first ones). Given as null, {@code slots} is the sum
   * of the upstreams' own when every upstream names them, else {@link #DEFAULT_SLOTS}.
   */
  public record Pool(
      String name,
      List<String> models,
      List<UpstreamEntry> upstreams,
      Integer slots,
      Queue queue,
      Timeouts timeouts,
      Health health,
      Ejection ejection,
      int retries,
      boolean external,
      String apiKeyEnv,
      long defaultMaxTokens,
      Connections connections,
      Routing routing,
      Duration scrapeInterval,
      Duration scrapeTimeout,
      PoolTls tls) {
    /** The output estimate of a request that sets no max_tokens, by default. */
    public static final long DEFAULT_MAX_TOKENS = 4096;

    /** A pool's slots when neither it nor all of its upstreams name them. */
    public static final int DEFAULT_SLOTS = 64;

    /**
     * How often {@code routing: engine_load} reads each upstream's {@code /metrics}, by default.
     */
    public static final Duration DEFAULT_SCRAPE_INTERVAL = Duration.ofMillis(250);

    /** The longest default scrape timeout: {@code scrape_timeout} is min(interval, this). */
    public static final Duration MAX_DEFAULT_SCRAPE_TIMEOUT = Duration.ofSeconds(1);

    public Pool {
      name = requireText(name, "pools[].name");
      if (!name.matches("[A-Za-z0-9_.-]{1,64}")) {
        throw new IllegalArgumentException(
            "name: '" + name + "' must be 1-64 letters, digits, '.', '_' or '-'");
      }
      if (models == null || models.isEmpty()) {
        throw new IllegalArgumentException("models: pool '" + name + "' needs at least one model");
      }
      models = List.copyOf(models);
      for (String m : models) {
        requireText(m, "models[]");
      }
      if (upstreams == null || upstreams.isEmpty()) {
        throw new IllegalArgumentException(
            "upstreams: pool '" + name + "' needs at least one upstream URL");
      }
      upstreams = List.copyOf(upstreams);
      slots = UpstreamEntry.poolSlots(name, upstreams, slots);
      Objects.requireNonNull(queue, "queue");
      Objects.requireNonNull(timeouts, "timeouts");
      health = health == null ? Health.DEFAULT : health;
      ejection = ejection == null ? Ejection.DEFAULT : ejection;
      connections = connections == null ? Connections.DEFAULT : connections;
      if (retries < 0 || retries > 1) {
        throw new IllegalArgumentException(
            "retries: must be 0 or 1 (got "
                + retries
                + "); a retry is only ever on another"
                + " upstream, before any byte reached the client");
      }
      if (defaultMaxTokens < 1 || defaultMaxTokens > MAX_TOKENS_BOUND) {
        throw new IllegalArgumentException(
            "default_max_tokens: must be 1-"
                + MAX_TOKENS_BOUND
                + " (got "
                + defaultMaxTokens
                + "); set it to the model's context length (vLLM's --max-model-len)"
                + " for a tokens-per-minute limit that a request without max_tokens cannot"
                + " overshoot");
      }
      apiKeyEnv = apiKeyEnv == null || apiKeyEnv.isBlank() ? null : apiKeyEnv.trim();
      if (apiKeyEnv != null && !apiKeyEnv.matches("[A-Za-z_][A-Za-z0-9_]*")) {
        throw new IllegalArgumentException(
            "api_key_env: '" + apiKeyEnv + "' is not an environment variable name");
      }
      routing = routing == null ? Routing.LEAST_LOADED : routing;
      if (routing == Routing.ENGINE_LOAD && external) {
        // A hosted provider has no vLLM /metrics to read, and its queue is not ours to see.
        throw new IllegalArgumentException(
            "routing: engine_load reads each upstream's vLLM /metrics; pool '"
                + name
                + "' is external (use least_loaded)");
      }
      scrapeInterval = scrapeInterval == null ? DEFAULT_SCRAPE_INTERVAL : scrapeInterval;
      requirePositive(scrapeInterval, "scrape_interval");
      if (scrapeInterval.compareTo(MIN_SCRAPE_INTERVAL) < 0) {
        throw new IllegalArgumentException(
            "scrape_interval: must be at least 10ms (got " + scrapeInterval.toMillis() + "ms)");
      }
      scrapeTimeout =
          scrapeTimeout == null
              ? (scrapeInterval.compareTo(MAX_DEFAULT_SCRAPE_TIMEOUT) < 0
                  ? scrapeInterval
                  : MAX_DEFAULT_SCRAPE_TIMEOUT)
              : scrapeTimeout;
      requirePositive(scrapeTimeout, "scrape_timeout");
      if (scrapeTimeout.compareTo(scrapeInterval.multipliedBy(STALE_AFTER_INTERVALS)) > 0) {
        // A scrape that may take longer than a score stays fresh could never keep one fresh.
        throw new IllegalArgumentException(
            "scrape_timeout: must be at most "
                + STALE_AFTER_INTERVALS
                + " x scrape_interval ("
                + scrapeInterval.multipliedBy(STALE_AFTER_INTERVALS).toMillis()
                + "ms), after which a reading is stale (got "
                + scrapeTimeout.toMillis()
                + "ms)");
      }
      if (tls != null && upstreams.stream().noneMatch(u -> Upstream.parse(u.url()).tls())) {
        // A block that would apply to nothing is a mistake the operator wants to hear about.
        throw new IllegalArgumentException(
            "tls: pool '"
                + name
                + "' has no https:// upstream; its tls block would apply to nothing");
      }
    }

    /** The shortest scrape interval allowed. */
    static final Duration MIN_SCRAPE_INTERVAL = Duration.ofMillis(10);

    /**
     * A scrape older than this many intervals is stale: the upstream is scored as least_loaded
     * would score it.
     */
    public static final int STALE_AFTER_INTERVALS = 3;

    /** A pool with default health checks, ejection and one retry (tests build pools this way). */
    public Pool(
        String name,
        List<String> models,
        List<String> upstreams,
        int slots,
        Queue queue,
        Timeouts timeouts) {
      this(
          name,
          models,
          upstreams == null ? null : upstreams.stream().map(UpstreamEntry::of).toList(),
          slots,
          queue,
          timeouts,
          null,
          null,
          1,
          false,
          null,
          DEFAULT_MAX_TOKENS,
          null,
          null,
          null,
          null,
          null);
    }

    /**
     * Pooled connections to each upstream for requests that hold a slot: {@code max}, or slots + 8.
     */
    public int slottedConnections() {
      return connections.max() > 0 ? connections.max() : slots + 8;
    }

    /** Whether active health checks run (never for external providers, which rarely offer one). */
    public boolean activeHealthChecks() {
      return !external && health.path() != null;
    }

    /** The parsed upstream addresses. */
    public List<Upstream> upstreamAddresses() {
      return upstreams.stream().map(u -> Upstream.parse(u.url())).toList();
    }

    /** The upstreams' URLs, in configured order. */
    public List<String> upstreamUrls() {
      return upstreams.stream().map(UpstreamEntry::url).toList();
    }

    /**
     * Each upstream's slots, in configured order: its own, or its share of what the pool's {@code
     * slots} leaves after the upstreams that name theirs. They add up to {@link #slots()}.
     */
    public List<Integer> upstreamSlots() {
      return UpstreamEntry.shares(upstreams, slots);
    }
  }

  /**
   * TLS to a pool's {@code https://} upstreams ({@code pools[].tls}): {@code ca_file} trusts
   * exactly the CAs in that PEM file instead of the JVM's; {@code cert_file} and {@code key_file}
   * (both or neither) are the client certificate for mTLS; {@code verify_hostname} (default true)
   * checks that the upstream's certificate names the host of its URL. The files are read and
   * checked when the pool is built ({@code io.phasemeter.proxy.tls.UpstreamTls}), so a bad one
   * stops the start.
   */
  public record PoolTls(String caFile, String certFile, String keyFile, Boolean verifyHostname) {
    public PoolTls {
      caFile = caFile == null || caFile.isBlank() ? null : caFile.trim();
      certFile = certFile == null || certFile.isBlank() ? null : certFile.trim();
      keyFile = keyFile == null || keyFile.isBlank() ? null : keyFile.trim();
      if ((certFile == null) != (keyFile == null)) {
        throw new IllegalArgumentException(
            "tls: cert_file and key_file go together (the client certificate and its key); got"
                + " only "
                + (certFile == null ? "key_file" : "cert_file"));
      }
      verifyHostname = verifyHostname == null ? Boolean.TRUE : verifyHostname;
    }

    /** Whether a client certificate is presented (mTLS). */
    public boolean clientCertificate() {
      return certFile != null;
    }
  }

  /**
   * One entry of {@code pools[].upstreams}: a URL, or a map {@code {url, slots}} naming the
   * upstream's own slots (null: a share of the pool's).
   */
  public record UpstreamEntry(String url, Integer slots) {
    @com.fasterxml.jackson.annotation.JsonCreator(
        mode = com.fasterxml.jackson.annotation.JsonCreator.Mode.PROPERTIES)
    public UpstreamEntry {
      if (url == null || url.isBlank()) {
        throw new IllegalArgumentException(
            "url: an upstream needs its base URL (such as http://10.0.0.5:8000)");
      }
      url = Upstream.parse(url).url();
      if (slots != null && slots < 1) {
        throw new IllegalArgumentException(
            "slots: upstream '" + url + "' must have at least 1 (got " + slots + ")");
      }
    }

    /** Jackson: an entry written as a plain URL shares the pool's slots. */
    @com.fasterxml.jackson.annotation.JsonCreator(
        mode = com.fasterxml.jackson.annotation.JsonCreator.Mode.DELEGATING)
    public static UpstreamEntry of(String url) {
      return new UpstreamEntry(url, null);
    }

    /**
     * The pool's slots: {@code given}, checked against the upstreams' own; or, when not given, the
     * sum of theirs if every upstream names them, else {@link Pool#DEFAULT_SLOTS}.
     */
    static int poolSlots(String pool, List<UpstreamEntry> upstreams, Integer given) {
      long named = 0;
      int sharing = 0;
      for (UpstreamEntry u : upstreams) {
        if (u.slots() == null) {
          sharing++;
        } else {
          named += u.slots();
        }
      }
      if (given == null) {
        if (sharing > 0) {
          given = Pool.DEFAULT_SLOTS;
        } else if (named > Integer.MAX_VALUE) {
          throw new IllegalArgumentException(
              "slots: the upstreams of pool '" + pool + "' have more than 2^31 - 1 together");
        } else {
          return (int) named;
        }
      }
      if (given < 1) {
        throw new IllegalArgumentException("slots: must be at least 1 (got " + given + ")");
      }
      if (sharing == 0 && named != given) {
        throw new IllegalArgumentException(
            "slots: pool '"
                + pool
                + "' has "
                + given
                + " but its upstreams' own slots add up to "
                + named
                + "; leave the pool's slots out (it is then their sum) or make them agree");
      }
      if (sharing > 0 && given - named < sharing) {
        throw new IllegalArgumentException(
            "slots: pool '"
                + pool
                + "' has "
                + given
                + ", its upstreams' own slots take "
                + named
                + ", which leaves "
                + Math.max(0, given - named)
                + " for "
                + sharing
                + " upstream(s) without slots of their own; each needs at least 1");
      }
      return given;
    }

    /** Each upstream's slots: its own, or an even share of what {@code poolSlots} leaves. */
    static List<Integer> shares(List<UpstreamEntry> upstreams, int poolSlots) {
      int named = 0;
      int sharing = 0;
      for (UpstreamEntry u : upstreams) {
        if (u.slots() == null) {
          sharing++;
        } else {
          named += u.slots();
        }
      }
      int left = poolSlots - named;
      int each = sharing == 0 ? 0 : left / sharing;
      int extra = sharing == 0 ? 0 : left % sharing;
      List<Integer> out = new java.util.ArrayList<>(upstreams.size());
      for (UpstreamEntry u : upstreams) {
        if (u.slots() != null) {
          out.add(u.slots());
        } else {
          out.add(each + (extra-- > 0 ? 1 : 0));
        }
      }
      return List.copyOf(out);
    }

    /** The URL, and the slots when the entry names them. */
    @Override
    public String toString() {
      return slots == null ? url : url + " (" + slots + " slots)";
    }
  }

  /**
   * The bounded wait for a slot. Higher priority is served first; a waiter is overtaken by later
   * arrivals of higher priority at most {@code maxOvertakes} times, which bounds starvation.
   */
  public record Queue(int max, Duration timeout, int maxOvertakes) {
    public Queue {
      if (max < 0) {
        throw new IllegalArgumentException("queue.max: must be 0 or more (got " + max + ")");
      }
      requirePositive(timeout, "queue.timeout");
      if (maxOvertakes < 0) {
        throw new IllegalArgumentException(
            "queue.max_overtakes: must be 0 or more (got " + maxOvertakes + ")");
      }
    }

    /** A queue with the default starvation bound (16 overtakes). */
    public Queue(int max, Duration timeout) {
      this(max, timeout, 16);
    }
  }

  /**
   * Active health checks: GET {@code path} on every upstream each {@code interval}; {@code
   * failures} failed checks in a row mark it down, one success marks it up. A null path turns them
   * off.
   */
  public record Health(String path, Duration interval, Duration timeout, int failures) {
    static final Health DEFAULT =
        new Health("/health", Duration.ofSeconds(5), Duration.ofSeconds(2), 2);

    public Health {
      path = path == null || path.isBlank() ? null : path.trim();
      if (path != null && !path.startsWith("/")) {
        throw new IllegalArgumentException("health.path: must start with / (got " + path + ")");
      }
      requirePositive(interval, "health.interval");
      requirePositive(timeout, "health.timeout");
      if (failures < 1) {
        throw new IllegalArgumentException(
            "health.failures: must be at least 1 (got " + failures + ")");
      }
    }
  }

  /**
   * Passive ejection: {@code after} connection failures in a row take an upstream out for {@code
   * backoff}, doubling on each ejection in a row up to {@code maxBackoff}.
   */
  public record Ejection(int after, Duration backoff, Duration maxBackoff) {
    static final Ejection DEFAULT = new Ejection(3, Duration.ofSeconds(1), Duration.ofSeconds(30));

    public Ejection {
      if (after < 1) {
        throw new IllegalArgumentException(
            "ejection.after: must be at least 1 (got " + after + ")");
      }
      requirePositive(backoff, "ejection.backoff");
      requirePositive(maxBackoff, "ejection.max_backoff");
      if (maxBackoff.compareTo(backoff) < 0) {
        throw new IllegalArgumentException(
            "ejection.max_backoff: must be at least ejection.backoff (" + backoff + ")");
      }
    }
  }

  /**
   * Timeouts: to connect, to the first generated token, between upstream bytes, and how long a
   * write to the client may make no progress ({@code client_write}; by default the same as {@code
   * idle}) before the client is cut off as stalled.
   */
  public record Timeouts(
      Duration connect, Duration firstToken, Duration idle, Duration clientWrite) {
    public Timeouts {
      requirePositive(connect, "timeouts.connect");
      requirePositive(firstToken, "timeouts.first_token");
      requirePositive(idle, "timeouts.idle");
      clientWrite = clientWrite == null ? idle : clientWrite;
      requirePositive(clientWrite, "timeouts.client_write");
    }

    /** Timeouts whose client-write bound is {@code idle}. */
    public Timeouts(Duration connect, Duration firstToken, Duration idle) {
      this(connect, firstToken, idle, null);
    }
  }

  /** Tracing export and the per-request record store. */
  public record Telemetry(
      boolean enabled,
      String serviceName,
      Otlp otlp,
      Sampling sampling,
      Records records,
      boolean perUpstreamMetrics,
      EngineSpans engineSpans) {
    public Telemetry {
      serviceName = requireText(serviceName, "telemetry.service_name");
      Objects.requireNonNull(otlp, "telemetry.otlp");
      Objects.requireNonNull(sampling, "telemetry.sampling");
      Objects.requireNonNull(records, "telemetry.records");
      Objects.requireNonNull(engineSpans, "telemetry.engine_spans");
    }
  }

  /**
   * The engine's own per-request spans (vLLM's {@code llm_request}, exported to {@code POST
   * /v1/traces} on the admin listener): when enabled, a successful record waits up to {@code wait}
   * for its engine span, and an engine span up to {@code wait} for its record; at most {@code
   * maxPending} of each are held, the oldest going first. An export's body may hold at most {@code
   * maxBodyBytes} (after gzip is undone) and at most {@code maxSpans} spans are read from it; the
   * rest are refused as OTLP's partial success. While disabled, {@code /v1/traces} reads nothing.
   */
  public record EngineSpans(
      boolean enabled,
      // "wait" itself cannot name a record component (Object.wait).
      @com.fasterxml.jackson.annotation.JsonProperty("wait") Duration maxWait,
      int maxPending,
      int maxBodyBytes,
      int maxSpans) {
    /** The bound on an export's body, by default: vLLM's batches of 512 spans take ~0.5 MiB. */
    public static final int DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

    /** Spans read from one export, by default: four of vLLM's (OTel SDK's) batches of 512. */
    public static final int DEFAULT_MAX_SPANS = 2048;

    public EngineSpans {
      requirePositive(maxWait, "telemetry.engine_spans.wait");
      if (maxPending < 1) {
        throw new IllegalArgumentException(
            "telemetry.engine_spans.max_pending: must be at least 1 (got " + maxPending + ")");
      }
      if (maxBodyBytes < 1 || maxBodyBytes > 64 * 1024 * 1024) {
        throw new IllegalArgumentException(
            "telemetry.engine_spans.max_body_bytes: must be 1 to 67108864 (64 MiB) (got "
                + maxBodyBytes
                + ")");
      }
      if (maxSpans < 1) {
        throw new IllegalArgumentException(
            "telemetry.engine_spans.max_spans: must be at least 1 (got " + maxSpans + ")");
      }
    }

    /** Engine spans with the default bounds on an export. */
    public EngineSpans(boolean enabled, Duration maxWait, int maxPending) {
      this(enabled, maxWait, maxPending, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_SPANS);
    }
  }

  /** Where spans go; a null endpoint means no export. */
  public record Otlp(String endpoint, String protocol) {
    public Otlp {
      endpoint = endpoint == null || endpoint.isBlank() ? null : endpoint.trim();
      protocol = protocol == null ? "http/protobuf" : protocol.trim().toLowerCase(Locale.ROOT);
      if (!protocol.equals("http/protobuf") && !protocol.equals("grpc")) {
        throw new IllegalArgumentException(
            "telemetry.otlp.protocol: must be http/protobuf or grpc (got " + protocol + ")");
      }
      if (endpoint != null) {
        try {
          URI uri = URI.create(endpoint);
          if (uri.getScheme() == null || uri.getHost() == null) {
            throw new IllegalArgumentException("no scheme or host");
          }
        } catch (IllegalArgumentException e) {
          throw new IllegalArgumentException(
              "telemetry.otlp.endpoint: '" + endpoint + "' is not a URL", e);
        }
      }
    }
  }

  /** Which finished traces are exported: all errors, all slow ones and a ratio of the rest. */
  public record Sampling(double ratio, boolean keepErrors, Duration keepSlowerThan) {
    public Sampling {
      if (!(ratio >= 0.0 && ratio <= 1.0)) {
        throw new IllegalArgumentException(
            "telemetry.sampling.ratio: must be between 0 and 1 (got " + ratio + ")");
      }
      requirePositive(keepSlowerThan, "telemetry.sampling.keep_slower_than");
    }
  }

  /**
   * The bounded store of recent per-request records, and the record feed: a feed subscriber that
   * takes nothing for {@code feedWriteTimeout} while records wait for it is cut.
   */
  public record Records(int max, Duration ttl, Duration feedWriteTimeout) {
    /** The feed's write timeout when none is given. */
    public static final Duration DEFAULT_FEED_WRITE_TIMEOUT = Duration.ofSeconds(30);

    public Records {
      if (max < 1) {
        throw new IllegalArgumentException(
            "telemetry.records.max: must be at least 1 (got " + max + ")");
      }
      requirePositive(ttl, "telemetry.records.ttl");
      feedWriteTimeout = feedWriteTimeout == null ? DEFAULT_FEED_WRITE_TIMEOUT : feedWriteTimeout;
      requirePositive(feedWriteTimeout, "telemetry.records.feed_write_timeout");
    }

    /** A store of {@code max} records for {@code ttl}, the feed's write timeout the default. */
    public Records(int max, Duration ttl) {
      this(max, ttl, DEFAULT_FEED_WRITE_TIMEOUT);
    }
  }

  /** An upstream base URL split into what the HTTP client needs. */
  public record Upstream(String url, String host, int port, boolean tls, String basePath) {
    /** Parses and checks an upstream URL such as {@code http://10.0.0.5:8000}. */
    public static Upstream parse(String url) {
      URI uri;
      try {
        uri = URI.create(requireText(url, "upstreams[]").trim());
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("upstreams: '" + url + "' is not a URL", e);
      }
      String scheme = uri.getScheme() == null ? "" : uri.getScheme().toLowerCase(Locale.ROOT);
      if (!scheme.equals("http") && !scheme.equals("https")) {
        throw new IllegalArgumentException(
            "upstreams: '" + url + "' must start with http:// or https://");
      }
      if (uri.getHost() == null) {
        throw new IllegalArgumentException("upstreams: '" + url + "' has no host");
      }
      boolean tls = scheme.equals("https");
      int port = uri.getPort() > 0 ? uri.getPort() : (tls ? 443 : 80);
      String path = uri.getRawPath() == null ? "" : uri.getRawPath();
      while (path.endsWith("/")) {
        path = path.substring(0, path.length() - 1);
      }
      if (path.endsWith("/v1")) {
        path = path.substring(0, path.length() - 3);
      }
      return new Upstream(url.trim(), uri.getHost(), port, tls, path);
    }

    /** host:port, as used in span attributes. */
    public String authority() {
      return host + ":" + port;
    }
  }

  /** The largest max_tokens (and default) a request may ask for: no model has such a context. */
  public static final long MAX_TOKENS_BOUND = 100_000_000L;

  /**
   * The constant of {@code type} that {@code value} names, in any case, spaces around ignored (the
   * configuration's words are the constants' names in lower case); null when none does.
   */
  private static <E extends Enum<E>> E named(Class<E> type, String value) {
    if (value != null) {
      for (E e : type.getEnumConstants()) {
        if (e.name().equalsIgnoreCase(value.trim())) {
          return e;
        }
      }
    }
    return null;
  }

  private static String requireText(String value, String key) {
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException(key + ": must not be empty");
    }
    return value.trim();
  }

  private static void requirePort(int port, String key) {
    if (port < 0 || port > 65535) {
      throw new IllegalArgumentException(key + ": must be 0-65535 (got " + port + ")");
    }
  }

  private static void requirePositive(Duration d, String key) {
    if (d == null || d.isNegative() || d.isZero()) {
      throw new IllegalArgumentException(key + ": must be a positive duration (got " + d + ")");
    }
  }
}
