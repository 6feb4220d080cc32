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
import java.util.Set;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * TLS on one listener ({@code listen.tls} or {@code admin.tls}): the certificate and key in
 * service, the client CA when client certificates are required, and their reload.
 *
 * <p>The files are read and checked by {@link PemFiles} when the listener is built (a failure is a
 * {@link ConfigException}: one line, exit 2, nothing listening). Every {@code reload_interval} a
 * worker thread looks at the files again: when their modification time, size or identity changed
 * and their content differs from what is served, the new pair is checked and, when good, handed to
 * {@link HttpServer#updateSSLOptions}: connections made afterwards get it, open ones keep theirs. A
 * new version that fails its check is looked at once more on the next tick before it counts, so a
 * rotation caught between its two file moves (key written, certificate not yet) is not a failure; a
 * version that still fails leaves the old pair in service and is counted and logged once, however
 * many ticks it stays.
 *
 * <p>Registers {@code llm_tls_reloads_total} by {@code listener} and {@code result} ({@code ok},
 * {@code failed}) and {@code llm_tls_certificate_expiry_timestamp_seconds} by {@code listener}: the
 * served certificate's notAfter, what an operator alerts on.
 */
public final class ListenerTls {
  private static final Logger LOG = LoggerFactory.getLogger(ListenerTls.class);

  /** TLS versions served: 1.2 and 1.3; older ones are refused in the handshake. */
  public static final Set<String> PROTOCOLS = Set.of("TLSv1.2", "TLSv1.3");

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
  // Guarded by lock: the files' stamps last looked at, a failing version seen once and one counted.
  private List<Stamp> stamps;
  private byte[] pendingFailure;
  private byte[] reportedFailure;
  private long timer = -1;
  private volatile HttpServer server;
  private boolean closed;

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
      // Checked first: PemFiles names the key and file of the fault in one line.
      Served first = tls.check(null);
      tls.stamps = tls.stat();
      tls.served = new Served(first.pair(), first.options(), tls.contentHash());
    }
    return tls;
  }

  /** Turns TLS on in {@code options} with the pair in service. */
  public HttpServerOptions applyTo(HttpServerOptions options) {
    ServerSSLOptions ssl = served.options();
    options
        .setSsl(true)
        .setUseAlpn(true)
        .setKeyCertOptions(ssl.getKeyCertOptions())
        .setEnabledSecureTransportProtocols(PROTOCOLS)
        .setClientAuth(ssl.getClientAuth());
    if (ssl.getTrustOptions() != null) {
      options.setTrustOptions(ssl.getTrustOptions());
    }
    options.setAlpnVersions(alpn);
    for (String suite : CIPHER_SUITES) {
      options.addEnabledCipherSuite(suite);
    }
    return options;
  }

  /** Registers this listener's reload counter and certificate expiry gauge. */
  public void bindTo(MeterRegistry registry) {
    reloadsOk = reloads(registry, "ok");
    reloadsFailed = reloads(registry, "failed");
    Gauge.builder(
            "llm.tls.certificate.expiry.timestamp.seconds",
            this,
            t -> t.notAfter().getEpochSecond())
        .tag("listener", listener)
        .description("When the certificate the listener serves expires (its notAfter)")
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
    long everyMs = config.reloadInterval().toMillis();
    synchronized (lock) {
      this.server = server;
      if (everyMs <= 0 || closed) {
        return;
      }
      timer = vertx.setPeriodic(everyMs, id -> tick());
    }
  }

  private void tick() {
    vertx
        .executeBlocking(this::reloadIfChanged, false)
        .onSuccess(
            next -> {
              if (next != null && server != null) {
                server
                    .updateSSLOptions(next.options())
                    .onFailure(e -> warn.accept(key + ": cannot serve the new certificate: " + e));
              }
            });
  }

  /**
   * Looks at the files once: when they changed, checks them, and returns the new pair to serve
   * (already in force for {@link #notAfter}), or null. Does blocking file IO.
   */
  Served reloadIfChanged() {
    synchronized (lock) {
      if (closed) {
        return null;
      }
      List<Stamp> now;
      byte[] hash;
      try {
        now = stat();
        if (now.equals(stamps)) {
          return null;
        }
        hash = contentHash();
      } catch (ConfigException e) {
        return failed(sha256(e.getMessage().getBytes(java.nio.charset.StandardCharsets.UTF_8)), e);
      }
      stamps = now;
      if (Arrays.equals(hash, served.contentHash()) || Arrays.equals(hash, reportedFailure)) {
        pendingFailure = null;
        return null;
      }
      Served next;
      try {
        next = check(hash);
      } catch (ConfigException e) {
        return failed(hash, e);
      }
      served = next;
      pendingFailure = null;
      reportedFailure = null;
      if (reloadsOk != null) {
        reloadsOk.increment();
      }
      LOG.info(
          "{}: serving a new certificate ({}, serial {}, valid until {})",
          key,
          next.pair().subject(),
          next.pair().leaf().getSerialNumber().toString(16),
          next.pair().notAfter());
      return next;
    }
  }

  /**
   * A version that failed its check: the first time, it is looked at again on the next tick (it may
   * be a rotation caught half-way); the second time, counted and logged once.
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

  /** Stops the reload timer. */
  public Future<Void> close() {
    synchronized (lock) {
      closed = true;
      if (timer >= 0) {
        vertx.cancelTimer(timer);
        timer = -1;
      }
    }
    return Future.succeededFuture();
  }

  private Served check(byte[] hash) {
    PemFiles.KeyPair pair =
        PemFiles.readKeyPair(
            vertx, Path.of(config.certFile()), Path.of(config.keyFile()), key, clock.instant());
    ServerSSLOptions options =
        new ServerSSLOptions()
            .setKeyCertOptions(pair.options())
            .setEnabledSecureTransportProtocols(PROTOCOLS)
            .setUseAlpn(true)
            .setClientAuth(config.mutual() ? ClientAuth.REQUIRED : ClientAuth.NONE);
    if (config.mutual()) {
      options.setTrustOptions(
          PemFiles.trustOptions(
              PemFiles.readCertificates(Path.of(config.clientCaFile()), key + ".client_ca_file")));
    }
    for (String suite : CIPHER_SUITES) {
      options.addEnabledCipherSuite(suite);
    }
    return new Served(pair, options, hash);
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

  /** The SHA-256 of every file's content, in order, each behind its length. */
  private byte[] contentHash() {
    MessageDigest md = digest();
    for (Path f : files()) {
      try {
        byte[] bytes = Files.readAllBytes(f);
        md.update(java.nio.ByteBuffer.allocate(8).putLong(bytes.length).array());
        md.update(bytes);
      } catch (IOException e) {
        throw new ConfigException(key + ": cannot read " + f + " (" + e.getMessage() + ")", e);
      }
    }
    return md.digest();
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
