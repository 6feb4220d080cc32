package io.phasemeter.proxy;

import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.budget.TenantBudgets;
import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.gateway.KeysFile;
import io.phasemeter.proxy.gateway.TenantAllowlist;
import io.phasemeter.proxy.telemetry.ProxyMetrics;
import io.phasemeter.proxy.telemetry.ProxyTelemetry;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code phasemeter proxy}: runs the measuring proxy until interrupted. */
@Command(
    name = "phasemeter proxy",
    mixinStandardHelpOptions = true,
    versionProvider = ProxyMain.Version.class,
    description = {
      "Runs the measuring reverse proxy in front of OpenAI-compatible inference servers (vLLM).",
      "Every key of the config file can be overridden with PHASEMETER_<PATH>, e.g."
          + " PHASEMETER_LISTEN_PORT=9090 or PHASEMETER_POOLS_0_UPSTREAMS=http://gpu1:8000.",
      "Standard OTEL_SERVICE_NAME and OTEL_EXPORTER_OTLP_* variables win over the file."
    },
    exitCodeOnInvalidInput = 2)
public final class ProxyMain implements Callable<Integer> {

  @Option(
      names = {"-c", "--config"},
      paramLabel = "FILE",
      description = "proxy configuration (default: ${DEFAULT-VALUE}; built-in defaults if absent)",
      defaultValue = "config/proxy.yaml")
  Path config;

  @Option(
      names = "--check",
      description = "validate the configuration, print it as understood, and exit")
  boolean check;

  private final PrintWriter out;
  private final PrintWriter err;

  ProxyMain(PrintWriter out, PrintWriter err) {
    this.out = out;
    this.err = err;
  }

  public static void main(String[] args) {
    PrintWriter out = new PrintWriter(System.out, true);
    PrintWriter err = new PrintWriter(System.err, true);
    int code = commandLine(out, err).execute(args);
    if (code != 0) {
      System.exit(code);
    }
  }

  static CommandLine commandLine(PrintWriter out, PrintWriter err) {
    CommandLine cl = new CommandLine(new ProxyMain(out, err));
    cl.setOut(out);
    cl.setErr(err);
    return cl;
  }

  @Override
  public Integer call() throws Exception {
    ProxyConfig cfg;
    try {
      boolean defaultPath = config.toString().equals("config/proxy.yaml");
      cfg =
          defaultPath && !Files.exists(config)
              ? ConfigLoader.load(null)
              : ConfigLoader.load(config);
      cfg = resolveKeysFile(cfg, config);
    } catch (ConfigException e) {
      err.println("phasemeter proxy: " + e.getMessage());
      return 2;
    }
    Budgets budgets;
    TenantAllowlist tenants;
    try {
      budgets = loadBudgets(cfg, config);
      tenants = checkTenants(cfg, budgets);
    } catch (ConfigException e) {
      err.println("phasemeter proxy: " + e.getMessage());
      return 2;
    }
    ProxyConfig.SharedLimits shared = cfg.auth().sharedLimits();
    if (cfg.auth().enabled() && shared.enabled() && shared.passwordEnv() != null) {
      String password = System.getenv(shared.passwordEnv());
      if (password == null || password.isEmpty()) {
        err.println(
            "phasemeter proxy: auth.shared_limits.password_env: the variable "
                + shared.passwordEnv()
                + " is not set");
        return 2;
      }
    }
    if (check) {
      out.println(describe(cfg));
      out.println("transport: " + cfg.transport().name().toLowerCase(java.util.Locale.ROOT));
      out.println("admin: " + cfg.admin().host() + ":" + cfg.admin().port() + access(cfg.admin()));
      if (cfg.admin().open()) {
        out.println(openAdminWarning(cfg.admin()));
      }
      out.println(
          "budgets: "
              + (budgets.budgets().isEmpty()
                  ? "none"
                  : budgets.budgets().size() + " from " + cfg.budgets()));
      if (cfg.tenants().configured() || !tenants.isEmpty()) {
        out.println(describeTenants(cfg.tenants(), tenants));
      }
      for (ProxyConfig.Route r : cfg.routes()) {
        out.println(
            "route "
                + r.path()
                + " -> "
                + r.handler()
                + (r.pool() != null ? " (pool " + r.pool() + ")" : "")
                + (r.adminOnly() ? ", admin keys only" : ""));
      }
      if (cfg.auth().enabled()) {
        out.println(sharedLimits(cfg.auth().sharedLimits()));
      }
      out.println(
          "routes: "
              + cfg.routes().size()
              + " from the config, then the built-in table (chat, completions, responses,"
              + " embeddings and pooling measured; vLLM's admin endpoints denied; every other"
              + " path passed through)");
      return 0;
    }
    ProxyTelemetry telemetry;
    try {
      telemetry = telemetry(cfg, System.getenv());
    } catch (ConfigException e) {
      // A bad OTEL_* variable is a configuration error like any other: one line, exit 2.
      err.println("phasemeter proxy: " + e.getMessage());
      return 2;
    }
    ProxyMetrics metrics =
        ProxyMetrics.create(budgets.bucketLayout(), cfg.tenants().phaseHistograms());
    Vertx vertx = vertx(cfg.transport());
    PhasemeterProxy proxy;
    try {
      proxy = builder(vertx, cfg, telemetry, metrics, budgets).start().await(30, TimeUnit.SECONDS);
    } catch (ConfigException e) {
      err.println("phasemeter proxy: " + e.getMessage());
      vertx.close();
      telemetry.close();
      return 2;
    } catch (Exception e) {
      err.println(
          "phasemeter proxy: cannot listen on "
              + cfg.listen().host()
              + ":"
              + cfg.listen().port()
              + " ("
              + e.getMessage()
              + ")");
      vertx.close();
      telemetry.close();
      return 1;
    }
    CountDownLatch stopped = new CountDownLatch(1);
    java.time.Duration drainTimeout = cfg.drain().timeout();
    Runnable shutdown =
        () -> {
          drainAndClose(proxy, drainTimeout, out);
          vertx.close();
          telemetry.close();
          stopped.countDown();
        };
    // Signals first: a SIGTERM right after the banner must drain, not kill.
    if (!onSignals(shutdown)) {
      // No signal API on this JVM: drain from a shutdown hook (the exit status is then the JVM's).
      Runtime.getRuntime().addShutdownHook(new Thread(shutdown, "phasemeter-shutdown"));
    }
    out.println(
        "phasemeter-proxy "
            + PhasemeterProxy.version()
            + " listening on "
            + (cfg.listen().tls() != null ? "https://" : "http://")
            + cfg.listen().host()
            + ":"
            + proxy.port());
    for (String line : proxy.describeTls()) {
      out.println(line);
    }
    out.println(describe(cfg));
    out.println(transport(cfg.transport(), vertx));
    out.println(proxy.connectionBounds());
    out.println(
        "admin: "
            + (cfg.admin().tls() != null ? "https://" : "http://")
            + cfg.admin().host()
            + ":"
            + proxy.adminPort()
            + " (/metrics, /health/live, /health/ready, /admin/records/{traceId},"
            + " /admin/records/stream, /admin/stats, POST /v1/traces)"
            + access(cfg.admin()));
    if (cfg.admin().open()) {
      out.println(openAdminWarning(cfg.admin()));
    }
    out.println(
        "budgets: "
            + (budgets.budgets().isEmpty()
                ? "none (set budgets: in the config to judge them live)"
                : budgets.budgets().size() + " from " + cfg.budgets()));
    if (cfg.tenants().configured() || !tenants.isEmpty()) {
      out.println(describeTenants(cfg.tenants(), tenants));
    }
    out.println(
        cfg.auth().enabled()
            ? "auth: API keys from "
                + cfg.auth().keysFile()
                + " (re-read when it changes, checked every "
                + cfg.auth().reloadInterval().toSeconds()
                + " s); requests without a valid key get 401"
                + (cfg.auth().clientCert()
                    ? "; a client certificate whose subject CN is a key's name is that key"
                    : "")
            : "auth: disabled (auth.enabled: false): every client is admitted without an API key"
                + " and may choose its priority with x-priority");
    if (cfg.auth().enabled()) {
      out.println(sharedLimits(cfg.auth().sharedLimits()));
    }
    out.println(
        "traces: "
            + (telemetry.exportTarget() == null
                ? "recorded, not exported (no OTLP endpoint configured)"
                : "exported over OTLP " + telemetry.exportTarget()));
    stopped.await();
    return 0;
  }

  /**
   * The proxy's own telemetry as {@code phasemeter proxy} builds it ({@code OTEL_*} variables read
   * from {@code env}); the proxy publishes its export health. The caller closes it.
   */
  static ProxyTelemetry telemetry(ProxyConfig cfg, Map<String, String> env) {
    return ProxyTelemetry.create(
        cfg.telemetry(), env, PhasemeterProxy.version(), NanoClock.system());
  }

  /**
   * The proxy as {@code phasemeter proxy} runs it, ready to start: with {@code telemetry}'s SDK and
   * its span deferral, so phase spans stay deferred until the root ends and become SDK spans only
   * for exported requests, as the tests and benchmarks measure it ({@code openTelemetry(sdk)} alone
   * would build every phase span as an SDK span).
   */
  static PhasemeterProxy.Builder builder(
      Vertx vertx,
      ProxyConfig cfg,
      ProxyTelemetry telemetry,
      ProxyMetrics metrics,
      Budgets budgets) {
    return PhasemeterProxy.builder(vertx, cfg)
        .telemetry(telemetry)
        .budgets(budgets)
        .metrics(metrics);
  }

  /**
   * SIGTERM (and SIGINT) drain the proxy and exit 0 once every request has ended and telemetry is
   * flushed; a second signal while draining is ignored (the drain has its own deadline).
   */
  private static boolean onSignals(Runnable shutdown) {
    java.util.concurrent.atomic.AtomicBoolean started =
        new java.util.concurrent.atomic.AtomicBoolean();
    try {
      for (String name : new String[] {"TERM", "INT"}) {
        sun.misc.Signal.handle(
            new sun.misc.Signal(name),
            sig -> {
              if (started.compareAndSet(false, true)) {
                Thread t =
                    new Thread(
                        () -> {
                          shutdown.run();
                          System.exit(0);
                        },
                        "phasemeter-drain");
                t.start();
              }
            });
      }
      return true;
    } catch (IllegalArgumentException | LinkageError e) {
      return false;
    }
  }

  /** Drains the proxy, says what happened, and closes it. */
  static void drainAndClose(PhasemeterProxy proxy, java.time.Duration timeout, PrintWriter out) {
    out.println(
        "phasemeter-proxy: draining: not ready, refusing new requests; in-flight requests have "
            + timeout.toMillis()
            + " ms to finish");
    try {
      PhasemeterProxy.DrainResult r =
          proxy.drain(timeout).await(timeout.toMillis() + 10_000, TimeUnit.MILLISECONDS);
      out.println(
          "phasemeter-proxy: drained in "
              + r.took().toMillis()
              + " ms: "
              + (r.inFlightAtStart() - r.cancelled())
              + " of "
              + r.inFlightAtStart()
              + " in-flight requests finished, "
              + r.cancelled()
              + " cancelled at the deadline");
    } catch (Exception e) {
      out.println("phasemeter-proxy: drain did not complete (" + e + "); closing anyway");
    }
    try {
      proxy.close().await(10, TimeUnit.SECONDS);
    } catch (Exception ignored) {
      // Shutting down anyway.
    }
  }

  /** The start-up line (and {@code --check}'s) on where the keys' rate limits are kept. */
  static String sharedLimits(ProxyConfig.SharedLimits s) {
    if (!s.enabled()) {
      return "rate limits: this replica's own (auth.shared_limits.enabled: false): with N replicas"
          + " a key gets N times its limits";
    }
    return "rate limits: shared through Redis ("
        + s.type()
        + " "
        + String.join(", ", s.endpoints())
        + ", timeout "
        + s.timeout().toMillis()
        + " ms); without an answer, "
        + (s.failClosed()
            ? "requests are refused with 503 (on_failure: fail_closed)"
            : "each replica decides with 1/" + s.replicasHint() + " of each limit");
  }

  /**
   * Finds the keys file as the budgets file is found (working directory, then beside the config and
   * its parent), so that the proxy can re-read it by an absolute path.
   */
  static ProxyConfig resolveKeysFile(ProxyConfig cfg, Path configFile) {
    if (!cfg.auth().enabled()) {
      return cfg;
    }
    Path found = locate(cfg.auth().keysFile(), configFile, "auth.keys_file");
    ProxyConfig.Auth a = cfg.auth();
    return cfg.withAuth(
        new ProxyConfig.Auth(
            true,
            found.toAbsolutePath().toString(),
            a.reloadInterval(),
            a.cacheTtl(),
            a.cacheMax(),
            a.sharedLimits(),
            a.clientCert()));
  }

  private static Path locate(String name, Path configFile, String key) {
    Path named = Path.of(name);
    java.util.List<Path> candidates = new java.util.ArrayList<>(java.util.List.of(named));
    if (!named.isAbsolute() && configFile != null) {
      Path dir = configFile.toAbsolutePath().getParent();
      candidates.add(dir.resolve(named));
      if (dir.getParent() != null) {
        candidates.add(dir.getParent().resolve(named));
      }
    }
    return candidates.stream()
        .filter(Files::exists)
        .findFirst()
        .orElseThrow(
            () ->
                new ConfigException(configFile + ": " + key + ": file '" + named + "' not found"));
  }

  /**
   * The tenants of {@code cfg} (docs/design.md, "Tenants"): {@code tenants.names} and, with auth
   * on, the keys file's keys marked {@code tenant_metrics: true}; refuses, naming the file and the
   * key, a keys file past the bound, a budget of a tenant the proxy does not have, and a tenant's
   * budget on a histogram without {@code llm_tenant}. The proxy checks the same at start (and each
   * keys reload); here {@code --check} sees it too, and the budget is named first.
   */
  static TenantAllowlist checkTenants(ProxyConfig cfg, Budgets budgets) {
    TenantAllowlist allow = TenantAllowlist.of(cfg.tenants().names());
    if (cfg.auth().enabled()) {
      KeysFile keys = KeysFile.load(Path.of(cfg.auth().keysFile()));
      try {
        allow = new TenantAllowlist.Rules(cfg.tenants().names(), Map.of()).allowlist(keys.keys());
      } catch (IllegalArgumentException e) {
        throw new ConfigException(cfg.auth().keysFile() + ": " + e.getMessage());
      }
    }
    TenantBudgets.check(
        budgets,
        cfg.budgets() == null ? "budgets" : cfg.budgets(),
        allow,
        cfg.tenants().phaseHistograms());
    return allow;
  }

  /** The start-up line (and {@code --check}'s) on where tenants come from. */
  static String describeTenants(ProxyConfig.Tenants t, TenantAllowlist allow) {
    return "tenants: "
        + (allow.isEmpty()
            ? "none allowlisted"
            : allow.values().size() + " allowlisted (" + String.join(", ", allow.values()) + ")")
        + (t.header() != null
            ? "; from header " + t.header() + " when no allowlisted key names one"
            : "")
        + "; every other request is 'other'; llm_tenant "
        + (t.phaseHistograms()
            ? "on the phase histograms too (tenants.phase_histograms)"
            : "not on the phase histograms");
  }

  /**
   * Loads the budgets file named in the config: relative to the working directory, or else to the
   * config file's directory and its parent (so {@code config/budgets.yaml} works from both).
   */
  static Budgets loadBudgets(ProxyConfig cfg, Path configFile) {
    if (cfg.budgets() == null || cfg.budgets().isBlank()) {
      return new Budgets(java.util.List.of());
    }
    Path found = locate(cfg.budgets(), configFile, "budgets");
    return Budgets.load(found);
  }

  /** The proxy's Vert.x, on the transport the config asks for. */
  static Vertx vertx(ProxyConfig.Transport transport) {
    return Vertx.vertx(
        new VertxOptions().setPreferNativeTransport(transport == ProxyConfig.Transport.AUTO));
  }

  /** The start-up line naming the transport in use, and why when auto fell back to NIO. */
  static String transport(ProxyConfig.Transport asked, Vertx vertx) {
    if (vertx.isNativeTransportEnabled()) {
      return "transport: native epoll (transport: auto)";
    }
    if (asked == ProxyConfig.Transport.NIO) {
      return "transport: nio (transport: nio)";
    }
    Throwable why = vertx.unavailableNativeTransportCause();
    return "transport: nio (transport: auto; native epoll unavailable"
        + (why != null ? ": " + why.getMessage() : "")
        + ")";
  }

  private static String describe(ProxyConfig cfg) {
    return cfg.pools().stream()
        .map(
            p ->
                "pool "
                    + p.name()
                    + ": models "
                    + p.models()
                    + " -> "
                    + describeUpstreams(p)
                    + " ("
                    + p.slots()
                    + " slots, queue "
                    + p.queue().max()
                    + (p.external()
                        ? "; external provider: generation is one provider.request span"
                        : "")
                    + (p.apiKeyEnv() != null ? "; upstream key from $" + p.apiKeyEnv() : "")
                    + (p.activeHealthChecks()
                        ? "; health " + p.health().path() + " every " + human(p.health().interval())
                        : "; no active health checks")
                    + ")\n  upstream connections: "
                    + reuse(p.connections())
                    + routing(p))
        .collect(Collectors.joining("\n"));
  }

  /** The pool's upstreams, each with its slots when there are several. */
  private static String describeUpstreams(ProxyConfig.Pool p) {
    List<String> urls = p.upstreamUrls();
    if (urls.size() == 1) {
      return urls.get(0);
    }
    List<Integer> slots = p.upstreamSlots();
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < urls.size(); i++) {
      sb.append(i == 0 ? "" : ", ").append(urls.get(i)).append(" [").append(slots.get(i));
      sb.append(slots.get(i) == 1 ? " slot]" : " slots]");
    }
    return sb.toString();
  }

  /** A line for a pool that routes by the engines' own load; nothing for least_loaded. */
  static String routing(ProxyConfig.Pool p) {
    if (p.routing() != ProxyConfig.Routing.ENGINE_LOAD) {
      return "";
    }
    return "\n  routing: engine_load (each upstream's /metrics every "
        + human(p.scrapeInterval())
        + ", timeout "
        + human(p.scrapeTimeout())
        + "; least_loaded for an upstream without a fresh scrape)";
  }

  /**
   * How the pool's upstream connections are used, as configured: the start-up banner and {@code
   * --check} can only know the configuration; what {@code auto} found is in {@code /admin/stats}
   * and {@code llm_upstreams_single_use}.
   */
  static String reuse(ProxyConfig.Connections c) {
    int spares = c.spares();
    String ahead = spares == 0 ? "no spares" : spares + " spare" + (spares == 1 ? "" : "s");
    return switch (c.reuse()) {
      case ON -> "reuse: on (kept alive and reused)";
      case OFF ->
          "reuse: off (one request each, Connection: close; " + ahead + " opened ahead of demand)";
      case AUTO ->
          "reuse: auto (kept alive and reused; once an upstream is seen closing them after its"
              + " responses, one request each, "
              + ahead
              + " opened ahead of demand)";
    };
  }

  /** Who may use the admin listener, as the start-up banner and {@code --check} say it. */
  private static String access(ProxyConfig.Admin admin) {
    if (!admin.token().isEmpty()) {
      return ", bearer token required";
    }
    return admin.open() ? ", OPEN: no token (admin.allow_open: true)" : ", loopback only, no token";
  }

  /** The line an admin listener open beyond loopback without a token gets on stdout. */
  static String openAdminWarning(ProxyConfig.Admin admin) {
    return "WARNING: admin listener on "
        + admin.host()
        + " has no token and admin.allow_open is true: anyone who reaches it may read records,"
        + " stats and metrics and post engine spans to /v1/traces; set admin.token"
        + " (PHASEMETER_ADMIN_TOKEN) to guard it";
  }

  private static String human(java.time.Duration d) {
    return d.toMillis() % 1000 == 0 ? d.toSeconds() + "s" : d.toMillis() + "ms";
  }

  /** Prints the build's version. */
  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      return new String[] {"phasemeter-proxy " + PhasemeterProxy.version()};
    }
  }
}
