package io.phasemeter.proxy.tls;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.ClientAuth;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.ServerSSLOptions;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * TLS on one listener ({@code listen.tls} or {@code admin.tls}): the certificate and key in
 * service, the client CA when client certificates are required, and their reload.
 *
 * <p>The files are read and checked by {@link PemFiles} when the listener is built (a failure is a
 * {@link ConfigException}: one line, exit 2, nothing listening). Every {@code reload_interval} a
 * worker thread looks at the files again: when their modification time, size or identity changed
 * and their content differs from what is served, they are read once, and those bytes are hashed,
 * checked and, when good, handed to {@link HttpServer#updateSSLOptions}: connections made
 * afterwards get the pair, open ones keep theirs. The pair counts as served (expiry gauge, serial,
 * {@code result="ok"}) only once the listener took it; one it did not take is counted failed,
 * logged once and offered again on the next tick. A new version that fails its check is looked at
 * once more on the next tick before it counts, so a rotation caught between its two file moves (key
 * written, certificate not yet) is not a failure; a version that still fails leaves the old pair in
 * service and is counted and logged once, however many ticks it stays.
 *
 * <p>Registers {@code llm_tls_reloads_total} by {@code listener} and {@code result} ({@code ok},
 * {@code failed}), {@code llm_tls_reload_checks_total} by {@code listener} (one per look at the
 * files, as Envoy's SDS {@code update_attempt}) and {@code
 * llm_tls_certificate_expiry_timestamp_seconds} by {@code listener}: the served certificate's
 * notAfter, what an operator alerts on.
 */
public final class ListenerTls {
  private static final Logger LOG = LoggerFactory.getLogger(ListenerTls.class);

  /**
   * Cipher suites served: TLS 1.3's three, and for TLS 1.2 Mozilla's "intermediate" ECDHE suites
   * with AES-GCM or ChaCha20-Poly1305 (forward secrecy and an AEAD cipher each).
   */
  public static final List<String> CIPHER_SUITES =
      List.of(
          "TLS_AES_128_GCM_SHA256",
          "TLS_AES_256_GCM_SHA384",
          "TLS_CHACHA20_POLY1305_SHA256",
          "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
          "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
          "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
          "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
          "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
          "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256");

  /** What one version of the files is, without reading them. */
  private record Stamp(long modifiedNanos, long size, Object fileKey) {}

  /** One version of the files, read once: the bytes that are hashed, checked and served. */
  private record Contents(byte[] cert, byte[] key, byte[] clientCa, byte[] hash) {}

  /**
   * What a look started from: the stamps and served hash it compares with, the failure already
   * counted, and the state's version, so the look's outcome is dropped if the state moved
   * meanwhile.
   */
  private record Seen(
      List<Stamp> stamps, byte[] servedHash, byte[] reportedFailure, long version) {}

  /** A checked pair (and client CA) with the options made of it. */
  private record Served(PemFiles.KeyPair pair, ServerSSLOptions options, byte[] contentHash) {}

  private final Vertx vertx;
  private final ProxyConfig.ServerTls config;
  private final String listener;
  private final String key;
  private final List<HttpVersion> alpn;
  private final Clock clock;
  private final Consumer<String> warn;
  private final Object lock = new Object();
  private volatile Served served;
  private Counter reloadsOk;
  private Counter reloadsFailed;
  private Counter checks;
  // Guarded by lock: the files' stamps last looked at, a failing version seen once and one counted,
  // the pair being handed to the listener, and a pair the listener refused (counted once).
  private List<Stamp> stamps;
  private byte[] pendingFailure;
  private byte[] reportedFailure;
  private Served updating;
  private byte[] refusedByListener;
  private Function<ServerSSLOptions, Future<Boolean>> update;
  private long timer = -1;
  private boolean closed;
  // One more at every change of the state above: a look's outcome is kept only if none came
  // between.
  private long version;

  private ListenerTls(
      Vertx vertx,
      ProxyConfig.ServerTls config,
      String listener,
      String key,
      List<HttpVersion> alpn,
      Clock clock,
      Consumer<String> warn) {
    this.vertx = vertx;
    this.config = config;
    this.listener = listener;
    this.key = key;
    this.alpn = List.copyOf(alpn);
    this.clock = clock;
    this.warn = warn;
  }

  /**
   * Reads and checks the files of {@code config} now (blocking file IO).
   *
   * @param listener {@code public} or {@code admin}: the metrics' {@code listener} label
   * @param key the configuration key, {@code listen.tls} or {@code admin.tls}, for messages
   * @param alpn the protocols offered by ALPN, most preferred first (Vert.x offers them again with
   *     every reloaded certificate): the listener's HTTP versions
   * @throws ConfigException one line naming the key and the file at fault
   */
  public static ListenerTls load(
      Vertx vertx,
      ProxyConfig.ServerTls config,
      String listener,
      String key,
      List<HttpVersion> alpn) {
    return load(
        vertx, config, listener, key, alpn, Clock.systemUTC(), line -> LOG.warn("{}", line));
  }

  /**
   * As {@link #load(Vertx, ProxyConfig.ServerTls, String, String, List)}, with the clock
   * certificates are judged by, and where a failed reload's one line goes.
   */
  public static ListenerTls load(
      Vertx vertx,
      ProxyConfig.ServerTls config,
      String listener,
      String key,
      List<HttpVersion> alpn,
      Clock clock,
      Consumer<String> warn) {
    Objects.requireNonNull(config, "config");
    ListenerTls tls = new ListenerTls(vertx, config, listener, key, alpn, clock, warn);
    synchronized (tls.lock) {
      // Stamped before the read, so a change in between is looked at again on the first tick; a
      // file that cannot be stat'ed is left to the read, whose line names the key and the file.
      List<Stamp> before;
      try {
        before = tls.stat();
      } catch (ConfigException e) {
        before = null;
      }
      tls.served = tls.check(tls.read());
      tls.stamps = before;
    }
    return tls;
  }

  /** Turns TLS on in {@code options} with the pair in service. */
  public HttpServerOptions applyTo(HttpServerOptions options) {
    apply(served.options(), options);
    options.setAlpnVersions(alpn);
    return options;
  }

  /**
   * Copies {@code ssl} into {@code options}: the one place the listener's TLS settings (built once,
   * in {@link #check}) reach the server options, so the first pair and a reloaded one are served
   * alike.
   */
  static HttpServerOptions apply(ServerSSLOptions ssl, HttpServerOptions options) {
    options
        .setSsl(true)
        .setUseAlpn(ssl.isUseAlpn())
        .setKeyCertOptions(ssl.getKeyCertOptions())
        .setEnabledSecureTransportProtocols(ssl.getEnabledSecureTransportProtocols())
        .setSslHandshakeTimeout(ssl.getSslHandshakeTimeout())
        .setSslHandshakeTimeoutUnit(ssl.getSslHandshakeTimeoutUnit())
        .setClientAuth(ssl.getClientAuth());
    if (ssl.getTrustOptions() != null) {
      options.setTrustOptions(ssl.getTrustOptions());
    }
    for (String suite : ssl.getEnabledCipherSuites()) {
      options.addEnabledCipherSuite(suite);
    }
    return options;
  }

  /** Registers this listener's reload counters and certificate expiry gauge. */
  public void bindTo(MeterRegistry registry) {
    reloadsOk = reloads(registry, "ok");
    reloadsFailed = reloads(registry, "failed");
    checks =
        Counter.builder("llm.tls.reload.checks")
            .tag("listener", listener)
            .description(
                "Looks at the certificate files, one every reload_interval: flat when the reload"
                    + " has stopped")
            .register(registry);
    Gauge.builder(
            "llm.tls.certificate.expiry.timestamp.seconds",
            this,
            t -> t.notAfter().getEpochSecond())
        .tag("listener", listener)
        .description(TlsPolicy.EXPIRY_DESCRIPTION)
        .register(registry);
  }

  private Counter reloads(MeterRegistry registry, String result) {
    return Counter.builder("llm.tls.reloads")
        .tag("listener", listener)
        .tag("result", result)
        .description("Certificate reloads: ok (a new pair served) or failed (the old one stays)")
        .register(registry);
  }

  /**
   * Starts looking at the files every {@code reload_interval} (never when it is zero), handing a
   * good new pair to {@code server}.
   */
  public void watch(HttpServer server) {
    // Forced: the content hash has already told a new pair from the served one.
    updatesThrough(options -> server.updateSSLOptions(options, true));
    long everyMs = config.reloadInterval().toMillis();
    synchronized (lock) {
      if (everyMs <= 0 || closed) {
        return;
      }
      timer =
          vertx.setPeriodic(
              everyMs,
              id ->
                  reload()
                      .onFailure(
                          e ->
                              LOG.warn(
                                  "{}: looking at the certificate files failed ({})",
                                  key,
                                  e.getClass().getName())));
    }
  }

  /**
   * Where a new pair goes: the listener's {@code updateSSLOptions} once it listens; its future's
   * {@code true} means the listener took the pair.
   */
  void updatesThrough(Function<ServerSSLOptions, Future<Boolean>> update) {
    synchronized (lock) {
      this.update = update;
    }
  }

  /**
   * One tick: looks at the files on a worker thread and, when they hold a new good pair, hands it
   * to the listener; the pair counts as served only once the listener took it. Completes with
   * whether a new pair is now served.
   */
  Future<Boolean> reload() {
    // Ordered: the ticks of one timer share its context, so a slow look delays the next one
    // instead of overlapping it.
    return vertx
        .executeBlocking(this::reloadIfChanged, true)
        .compose(next -> next == null ? Future.succeededFuture(false) : handOver(next));
  }

  /**
   * Looks at the files once: when they changed, reads them once, checks those bytes, and returns
   * the new pair to hand to the listener, or null. Does blocking file IO, outside the lock: a slow
   * disk holds this worker, never the event loop that hands a pair over; the lock is taken only to
   * see the state and to swap in the look's outcome.
   */
  private Served reloadIfChanged() {
    Seen seen;
    synchronized (lock) {
      if (closed || updating != null || update == null) {
        // Closed, not listening yet, or a hand-over still under way: nothing looked at, nothing
        // counted; a later tick looks.
        return null;
      }
      seen = new Seen(stamps, served.contentHash(), reportedFailure, version);
    }
    if (checks != null) {
      checks.increment();
    }
    List<Stamp> now;
    Contents contents;
    try {
      now = stat();
      if (now.equals(seen.stamps())) {
        return null;
      }
      contents = read();
    } catch (ConfigException e) {
      return decide(seen, null, sha256(e.getMessage().getBytes(StandardCharsets.UTF_8)), null, e);
    }
    byte[] hash = contents.hash();
    if (Arrays.equals(hash, seen.servedHash()) || Arrays.equals(hash, seen.reportedFailure())) {
      return decide(seen, now, hash, null, null);
    }
    try {
      return decide(seen, now, hash, check(contents), null);
    } catch (ConfigException e) {
      return decide(seen, now, hash, null, e);
    }
  }

  /**
   * Swaps in what a look found, if the state is still the one it started from: the files' new
   * {@code now} stamps (null: not stat'ed), and either a pair to hand over, a failure, or neither
   * (the files hold what is served or a failure already counted). Returns the pair to hand over.
   */
  private Served decide(
      Seen seen, List<Stamp> now, byte[] hash, Served next, ConfigException failure) {
    synchronized (lock) {
      if (closed || version != seen.version()) {
        // Closed, or another look or a hand-over changed the state while the files were read:
        // the stamps stay, so the next tick looks again.
        return null;
      }
      version++;
      if (now != null) {
        stamps = now;
      }
      if (failure != null) {
        return failed(hash, failure);
      }
      pendingFailure = null;
      updating = next;
      return next;
    }
  }

  /** Hands {@code next} to the listener and settles on what it answers. */
  private Future<Boolean> handOver(Served next) {
    Future<Boolean> taken;
    synchronized (lock) {
      if (closed) {
        updating = null;
        return Future.succeededFuture(false);
      }
      try {
        taken = update.apply(next.options());
      } catch (IllegalStateException e) {
        // Vert.x: "Not listening". The listener closed (the proxy closes it before this): nothing
        // is served any more, so nothing is reloaded either.
        updating = null;
        stopTimer();
        return Future.succeededFuture(false);
      }
    }
    return taken.transform(
        r ->
            Future.succeededFuture(
                settle(next, r.succeeded() && Boolean.TRUE.equals(r.result()), r.cause())));
  }

  /**
   * What the listener answered: a pair it took is the served one (expiry gauge, serial, counted ok
   * and logged); one it did not take leaves the old pair served, is counted failed and logged once,
   * and is offered again on the next tick.
   */
  private boolean settle(Served next, boolean taken, Throwable cause) {
    synchronized (lock) {
      updating = null;
      version++;
      if (closed) {
        // Closing: a hand-over the closing listener failed is no refused certificate.
        return false;
      }
      if (!taken) {
        stamps = null;
        if (!Arrays.equals(next.contentHash(), refusedByListener)) {
          refusedByListener = next.contentHash();
          if (reloadsFailed != null) {
            reloadsFailed.increment();
          }
          // The class only: a TLS library's message may quote the bytes it could not use.
          warn.accept(
              key
                  + ": the listener did not take the new certificate ("
                  + (cause == null ? "not applied" : cause.getClass().getSimpleName())
                  + "); still serving the certificate valid until "
                  + served.pair().notAfter()
                  + " (offered again every reload_interval)");
        }
        return false;
      }
      served = next;
      reportedFailure = null;
      refusedByListener = null;
      if (reloadsOk != null) {
        reloadsOk.increment();
      }
      LOG.info(
          "{}: serving a new certificate ({}, serial {}, valid until {})",
          key,
          next.pair().subject(),
          next.pair().leaf().getSerialNumber().toString(16),
          next.pair().notAfter());
      return true;
    }
  }

  /**
   * A version that failed its check: the first time, it is looked at again on the next tick (it may
   * be a rotation caught half-way); the second time, counted and logged once. Guarded by lock.
   */
  private Served failed(byte[] hash, ConfigException e) {
    if (Arrays.equals(hash, reportedFailure)) {
      return null;
    }
    if (!Arrays.equals(hash, pendingFailure)) {
      pendingFailure = hash;
      stamps = null;
      return null;
    }
    pendingFailure = null;
    reportedFailure = hash;
    if (reloadsFailed != null) {
      reloadsFailed.increment();
    }
    warn.accept(
        e.getMessage()
            + "; still serving the certificate valid until "
            + served.pair().notAfter()
            + " (reload failed, retried when the files change)");
    return null;
  }

  /** The served certificate's notAfter. */
  public Instant notAfter() {
    return served.pair().notAfter();
  }

  /** The served leaf certificate's serial number. */
  public java.math.BigInteger serial() {
    return served.pair().leaf().getSerialNumber();
  }

  /** Whether client certificates are required. */
  public boolean mutual() {
    return config.mutual();
  }

  /** One line for the start-up log: what the listener serves. */
  public String describe() {
    PemFiles.KeyPair p = served.pair();
    return "TLS 1.2/1.3, certificate "
        + p.subject()
        + " valid until "
        + p.notAfter()
        + (config.mutual() ? ", client certificates required" : "")
        + (config.reloadInterval().isZero()
            ? ", not reloaded"
            : ", files checked every "
                + io.phasemeter.core.Durations.format(config.reloadInterval()));
  }

  /** Stops the reload timer; a look or hand-over under way settles without effect. */
  public Future<Void> close() {
    synchronized (lock) {
      closed = true;
      stopTimer();
    }
    return Future.succeededFuture();
  }

  // Guarded by lock.
  private void stopTimer() {
    if (timer >= 0) {
      vertx.cancelTimer(timer);
      timer = -1;
    }
  }

  /** The files' bytes, each read once, and their hash. */
  private Contents read() {
    byte[] cert = PemFiles.read(Path.of(config.certFile()), key + ".cert_file");
    byte[] privateKey = PemFiles.read(Path.of(config.keyFile()), key + ".key_file");
    byte[] clientCa =
        config.mutual()
            ? PemFiles.read(Path.of(config.clientCaFile()), key + ".client_ca_file")
            : null;
    MessageDigest md = digest();
    for (byte[] bytes : new byte[][] {cert, privateKey, clientCa}) {
      if (bytes != null) {
        // Each behind its length, so no two versions hash alike by moving a boundary.
        md.update(ByteBuffer.allocate(8).putLong(bytes.length).array());
        md.update(bytes);
      }
    }
    return new Contents(cert, privateKey, clientCa, md.digest());
  }

  /** Checks one version of the files and builds the listener's TLS options of it. */
  private Served check(Contents contents) {
    Path clientCaFile = config.mutual() ? Path.of(config.clientCaFile()) : null;
    PemFiles.KeyPair pair =
        PemFiles.readKeyPair(
            vertx,
            contents.cert(),
            contents.key(),
            Path.of(config.certFile()),
            Path.of(config.keyFile()),
            key,
            clock.instant());
    ServerSSLOptions options =
        new ServerSSLOptions()
            .setKeyCertOptions(pair.options())
            .setEnabledSecureTransportProtocols(TlsPolicy.PROTOCOLS)
            .setUseAlpn(true)
            .setClientAuth(config.mutual() ? ClientAuth.REQUIRED : ClientAuth.NONE);
    if (clientCaFile != null) {
      options.setTrustOptions(
          PemFiles.trustOptions(
              PemFiles.readCertificates(
                  contents.clientCa(), clientCaFile, key + ".client_ca_file")));
    }
    for (String suite : CIPHER_SUITES) {
      options.addEnabledCipherSuite(suite);
    }
    return new Served(pair, options, contents.hash());
  }

  private List<Path> files() {
    List<Path> files = new ArrayList<>();
    files.add(Path.of(config.certFile()));
    files.add(Path.of(config.keyFile()));
    if (config.mutual()) {
      files.add(Path.of(config.clientCaFile()));
    }
    return files;
  }

  private List<Stamp> stat() {
    List<Stamp> out = new ArrayList<>();
    for (Path f : files()) {
      try {
        BasicFileAttributes a = Files.readAttributes(f, BasicFileAttributes.class);
        out.add(
            new Stamp(
                a.lastModifiedTime().to(java.util.concurrent.TimeUnit.NANOSECONDS),
                a.size(),
                a.fileKey()));
      } catch (IOException e) {
        throw new ConfigException(key + ": cannot read " + f + " (" + e.getMessage() + ")", e);
      }
    }
    return out;
  }

  private static byte[] sha256(byte[] bytes) {
    return digest().digest(bytes);
  }

  private static MessageDigest digest() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java runtime provides SHA-256", e);
    }
  }
}
