package io.phasemeter.proxy.tls;

import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.net.ClientSSLOptions;
import io.vertx.core.net.KeyCertOptions;
import io.vertx.core.net.TrustOptions;
import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * The TLS a pool speaks to its {@code https://} upstreams ({@code pools[].tls}), built once from
 * the checked files, and the one place every client of the pool takes it from: request connections,
 * spares, health checks and engine scrapes. TLS 1.2 and 1.3 only. Without a {@code tls} block an
 * https upstream is verified against the JVM's trust store, with its host name checked.
 */
public final class UpstreamTls {
  /** The protocol versions offered to an upstream. */
  public static final Set<String> PROTOCOLS = Set.of("TLSv1.2", "TLSv1.3");

  private final TrustOptions trust;
  private final KeyCertOptions keyCert;
  private final boolean verifyHostname;

  private UpstreamTls(TrustOptions trust, KeyCertOptions keyCert, boolean verifyHostname) {
    this.trust = trust;
    this.keyCert = keyCert;
    this.verifyHostname = verifyHostname;
  }

  /** The platform's trust, host names checked: an https upstream of a pool without {@code tls}. */
  public static UpstreamTls platform() {
    return new UpstreamTls(null, null, true);
  }

  /**
   * Reads and checks the files of {@code pool}'s {@code tls} block (the platform's trust when it
   * has none).
   *
   * @param now the instant the client certificate must be valid at
   * @throws io.phasemeter.proxy.config.ConfigException one line naming the key and the file
   */
  public static UpstreamTls of(Vertx vertx, ProxyConfig.Pool pool, Instant now) {
    ProxyConfig.PoolTls tls = pool.tls();
    if (tls == null) {
      return platform();
    }
    String key = "pools[" + pool.name() + "].tls";
    TrustOptions trust =
        tls.caFile() == null
            ? null
            : PemFiles.trustOptions(
                PemFiles.readCertificates(Path.of(tls.caFile()), key + ".ca_file"));
    KeyCertOptions keyCert =
        tls.clientCertificate()
            ? PemFiles.readKeyPair(vertx, Path.of(tls.certFile()), Path.of(tls.keyFile()), key, now)
                .options()
            : null;
    return new UpstreamTls(trust, keyCert, tls.verifyHostname());
  }

  /** The options of one connection to an upstream of the pool. */
  public ClientSSLOptions sslOptions() {
    ClientSSLOptions o =
        new ClientSSLOptions()
            .setEnabledSecureTransportProtocols(new LinkedHashSet<>(PROTOCOLS))
            // "" turns the check off; "HTTPS" is RFC 2818's, as browsers and curl do.
            .setHostnameVerificationAlgorithm(verifyHostname ? "HTTPS" : "");
    if (trust != null) {
      o.setTrustOptions(trust.copy());
    }
    if (keyCert != null) {
      o.setKeyCertOptions(keyCert.copy());
    }
    return o;
  }

  /**
   * Sets {@link #sslOptions()} on {@code options}, a client whose requests say per request whether
   * they go over TLS ({@code https://} upstreams); returns {@code options}.
   */
  public <T extends HttpClientOptions> T applyTo(T options) {
    ClientSSLOptions ssl = sslOptions();
    options.setEnabledSecureTransportProtocols(ssl.getEnabledSecureTransportProtocols());
    options.setVerifyHost(verifyHostname);
    if (ssl.getTrustOptions() != null) {
      options.setTrustOptions(ssl.getTrustOptions());
    }
    if (ssl.getKeyCertOptions() != null) {
      options.setKeyCertOptions(ssl.getKeyCertOptions());
    }
    return options;
  }

  /** Whether host names are checked against the upstream's certificate. */
  public boolean verifyHostname() {
    return verifyHostname;
  }
}
