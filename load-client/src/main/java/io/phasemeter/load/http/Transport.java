package io.phasemeter.load.http;

import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.PemTrustOptions;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.util.List;

/**
 * How the load client speaks to its servers ({@code --ca-file}, {@code --insecure}, {@code
 * --http2}): whom it trusts over https, and which HTTP version it asks for. The trust applies to
 * every client the run makes (the requests, the admin fetches and feeds); the version only to the
 * requests.
 *
 * @param caFile PEM certificates trusted <em>instead of</em> the platform's trust store (as curl's
 *     {@code --cacert}), or null: the platform's
 * @param insecure no verification of the server's certificate nor of its name
 * @param http2 h2 via ALPN over https (falling back to http/1.1 when the server picks it), h2c with
 *     prior knowledge over http
 */
public record Transport(Path caFile, boolean insecure, boolean http2) {

  /** The platform's trust, HTTP/1.1. */
  public static final Transport DEFAULT = new Transport(null, false, false);

  /** The most streams one h2 connection carries at once, whatever the server allows. */
  static final int MAX_STREAMS_PER_CONNECTION = 1024;

  /** Checks the file before anything is sent: one line naming the flag and the file. */
  public Transport {
    if (caFile != null && insecure) {
      throw new IllegalArgumentException(
          "--ca-file and --insecure exclude each other: --insecure verifies nothing");
    }
    if (caFile != null) {
      int n;
      try (InputStream in = Files.newInputStream(caFile)) {
        n = CertificateFactory.getInstance("X.509").generateCertificates(in).size();
      } catch (IOException e) {
        throw new IllegalArgumentException(
            "--ca-file " + caFile + ": cannot read it (" + e.getClass().getSimpleName() + ")");
      } catch (CertificateException e) {
        n = 0;
      }
      if (n == 0) {
        throw new IllegalArgumentException(
            "--ca-file "
                + caFile
                + ": no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)");
      }
    }
  }

  /** The flags as given; null file for none. */
  public static Transport of(Path caFile, boolean insecure, boolean http2) {
    return caFile == null && !insecure && !http2 ? DEFAULT : new Transport(caFile, insecure, http2);
  }

  /** Sets the trust (and, for requests, the version) on {@code o}; returns it. */
  HttpClientOptions apply(HttpClientOptions o, boolean requests) {
    if (caFile != null) {
      o.setTrustOptions(new PemTrustOptions().addCertPath(caFile.toString()));
    }
    if (insecure) {
      o.setTrustAll(true).setVerifyHost(false);
    }
    if (requests && http2) {
      o.setProtocolVersion(HttpVersion.HTTP_2)
          .setUseAlpn(true)
          .setAlpnVersions(List.of(HttpVersion.HTTP_2, HttpVersion.HTTP_1_1))
          // h2c with prior knowledge: no HTTP/1.1 upgrade round trip.
          .setHttp2ClearTextUpgrade(false);
    }
    return o;
  }

  /** Trust and verification for admin clients (no version change). */
  public HttpClientOptions applyTrust(HttpClientOptions o) {
    return apply(o, false);
  }

  /** How the server's certificate is verified, for the conditions. */
  public String verification() {
    if (insecure) {
      return "off (--insecure)";
    }
    return caFile == null ? "platform trust store" : "--ca-file " + caFile.getFileName();
  }
}
