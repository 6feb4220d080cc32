package io.phasemeter.sim;

import io.vertx.core.Vertx;
import io.vertx.core.http.ClientAuth;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * HTTPS for the simulator, with vLLM's own flags (uvicorn's): {@code --ssl-certfile}, {@code
 * --ssl-keyfile}, {@code --ssl-ca-certs} and {@code --ssl-cert-reqs} (Python's {@code
 * ssl.VerifyMode}: 0 no client certificate, 1 optional, 2 required). HTTP/1.1, as uvicorn serves.
 *
 * @param certFile the server's PEM certificate (chain)
 * @param keyFile its PEM private key
 * @param caFile PEM CAs that client certificates are checked against; null for none
 * @param certReqs 0, 1 or 2
 */
public record SimulatorTls(Path certFile, Path keyFile, Path caFile, int certReqs) {
  public SimulatorTls {
    if (certFile == null || keyFile == null) {
      throw new IllegalArgumentException("--ssl-certfile and --ssl-keyfile go together");
    }
    if (certReqs < 0 || certReqs > 2) {
      throw new IllegalArgumentException(
          "--ssl-cert-reqs must be 0 (none), 1 (optional) or 2 (required), got " + certReqs);
    }
    if (certReqs > 0 && caFile == null) {
      throw new IllegalArgumentException(
          "--ssl-cert-reqs " + certReqs + " checks client certificates: give --ssl-ca-certs");
    }
  }

  /**
   * The TLS of the command line's flags: null when neither file is given; throws naming the flag
   * when only one is.
   */
  static SimulatorTls of(String certFile, String keyFile, String caFile, int certReqs) {
    if (certFile == null && keyFile == null) {
      if (caFile != null || certReqs != 0) {
        throw new IllegalArgumentException(
            "--ssl-ca-certs and --ssl-cert-reqs need --ssl-certfile and --ssl-keyfile");
      }
      return null;
    }
    if (certFile == null || keyFile == null) {
      throw new IllegalArgumentException(
          (certFile == null ? "--ssl-keyfile" : "--ssl-certfile")
              + " needs "
              + (certFile == null ? "--ssl-certfile" : "--ssl-keyfile"));
    }
    return new SimulatorTls(
        Path.of(certFile), Path.of(keyFile), caFile == null ? null : Path.of(caFile), certReqs);
  }

  /**
   * Checks that the files can be read and hold what they should, before anything listens.
   *
   * @throws IllegalArgumentException one line naming the flag and the file
   */
  void check(Vertx vertx) {
    readable(certFile, "--ssl-certfile");
    readable(keyFile, "--ssl-keyfile");
    if (caFile != null) {
      readable(caFile, "--ssl-ca-certs");
    }
    try {
      keyCert().getKeyManagerFactory(vertx);
    } catch (Exception e) {
      // Vert.x's message may quote the key file: name the files only.
      throw new IllegalArgumentException(
          "--ssl-certfile/--ssl-keyfile: "
              + certFile
              + " and "
              + keyFile
              + " are not a PEM certificate and its private key");
    }
    if (caFile != null) {
      try {
        new PemTrustOptions().addCertPath(caFile.toString()).getTrustManagerFactory(vertx);
      } catch (Exception e) {
        throw new IllegalArgumentException(
            "--ssl-ca-certs: " + caFile + " holds no PEM certificate");
      }
    }
  }

  /** Sets HTTPS on {@code options}; returns them. */
  HttpServerOptions applyTo(HttpServerOptions options) {
    options.setSsl(true).setKeyCertOptions(keyCert());
    if (caFile != null) {
      options.setTrustOptions(new PemTrustOptions().addCertPath(caFile.toString()));
    }
    options.setClientAuth(
        switch (certReqs) {
          case 2 -> ClientAuth.REQUIRED;
          case 1 -> ClientAuth.REQUEST;
          default -> ClientAuth.NONE;
        });
    return options;
  }

  private PemKeyCertOptions keyCert() {
    return new PemKeyCertOptions().setCertPath(certFile.toString()).setKeyPath(keyFile.toString());
  }

  private static void readable(Path file, String flag) {
    if (!Files.isRegularFile(file) || !Files.isReadable(file)) {
      throw new IllegalArgumentException(flag + ": " + file + " is not a readable file");
    }
  }
}
