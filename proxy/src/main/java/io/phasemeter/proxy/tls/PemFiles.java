package io.phasemeter.proxy.tls;

import io.phasemeter.proxy.config.ConfigException;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateExpiredException;
import java.security.cert.CertificateFactory;
import java.security.cert.CertificateNotYetValidException;
import java.security.cert.X509Certificate;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Date;
import java.util.List;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.X509KeyManager;

/**
 * PEM certificate and key files, read once and checked before anything is served with them: the
 * files are readable, hold PEM certificates and a private key (PKCS#8, or PKCS#1 RSA and SEC1 EC
 * keys, as Vert.x reads them), the key belongs to the first certificate, and that certificate is
 * valid now. Every failure is one line naming the configuration key and the file, for a start that
 * stops with exit 2 or a reload that keeps the old pair. The Vert.x options are built from the
 * bytes that were checked, so a file replaced between the check and the use cannot slip through.
 */
public final class PemFiles {
  /** Files larger than this are not certificate files; refused before they are read whole. */
  static final long MAX_FILE_BYTES = 1 << 20;

  private static final SecureRandom RANDOM = new SecureRandom();

  private PemFiles() {}

  /**
   * A certificate chain and its private key, checked.
   *
   * @param chain the certificates of the certificate file, the leaf first
   * @param options the Vert.x options made of the checked bytes
   */
  public record KeyPair(List<X509Certificate> chain, PemKeyCertOptions options) {
    public KeyPair {
      chain = List.copyOf(chain);
    }

    /** The leaf certificate. */
    public X509Certificate leaf() {
      return chain.get(0);
    }

    /** When the leaf certificate stops being valid. */
    public Instant notAfter() {
      return leaf().getNotAfter().toInstant();
    }

    /** The leaf's subject, RFC 2253 ({@code CN=proxy,O=Example}). */
    public String subject() {
      return leaf().getSubjectX500Principal().getName();
    }
  }

  /**
   * Reads and checks a certificate file and its key file.
   *
   * @param key the configuration key the files come from ({@code listen.tls}), for messages
   * @param now the instant the leaf must be valid at
   * @throws ConfigException one line naming {@code key} and the file at fault
   */
  public static KeyPair readKeyPair(
      Vertx vertx, Path certFile, Path keyFile, String key, Instant now) {
    return readKeyPair(
        vertx,
        read(certFile, key + ".cert_file"),
        read(keyFile, key + ".key_file"),
        certFile,
        keyFile,
        key,
        now);
  }

  /**
   * Checks a certificate file's and a key file's bytes, already read (by {@link #read}); reads no
   * file. The pair returned is made of exactly these bytes, so a caller that hashed them knows what
   * is served.
   *
   * @param certFile where {@code certBytes} came from, for messages
   * @param keyFile where {@code keyBytes} came from, for messages
   * @throws ConfigException one line naming {@code key} and the file at fault
   */
  public static KeyPair readKeyPair(
      Vertx vertx,
      byte[] certBytes,
      byte[] keyBytes,
      Path certFile,
      Path keyFile,
      String key,
      Instant now) {
    List<X509Certificate> chain = parseCertificates(certBytes, certFile, key + ".cert_file");
    PemKeyCertOptions options =
        new PemKeyCertOptions()
            .addCertValue(Buffer.buffer(certBytes))
            .addKeyValue(Buffer.buffer(keyBytes));
    PrivateKey privateKey = privateKey(vertx, options, keyFile, key + ".key_file");
    X509Certificate leaf = chain.get(0);
    if (!matches(privateKey, leaf.getPublicKey())) {
      throw new ConfigException(
          key
              + ".key_file: "
              + keyFile
              + " is not the key of the certificate in "
              + certFile
              + " ("
              + leaf.getSubjectX500Principal().getName()
              + ")");
    }
    checkValidity(leaf, certFile, key + ".cert_file", now);
    return new KeyPair(chain, options);
  }

  /**
   * Reads and checks a file of one or more PEM certificates (a CA bundle).
   *
   * @param key the configuration key the file comes from ({@code listen.tls.client_ca_file})
   * @throws ConfigException one line naming {@code key} and the file
   */
  public static List<X509Certificate> readCertificates(Path file, String key) {
    return parseCertificates(read(file, key), file, key);
  }

  /**
   * Checks a file of PEM certificates whose bytes are already read.
   *
   * @param file where {@code bytes} came from, for messages
   * @throws ConfigException one line naming {@code key} and the file
   */
  public static List<X509Certificate> readCertificates(byte[] bytes, Path file, String key) {
    return parseCertificates(bytes, file, key);
  }

  /** Trust options holding exactly {@code certificates}. */
  public static PemTrustOptions trustOptions(List<X509Certificate> certificates) {
    PemTrustOptions trust = new PemTrustOptions();
    for (X509Certificate c : certificates) {
      try {
        trust.addCertValue(Buffer.buffer(pem(c)));
      } catch (CertificateException e) {
        throw new IllegalStateException("a parsed certificate cannot be encoded again", e);
      }
    }
    return trust;
  }

  /**
   * The bytes of a regular file of at most 1 MiB.
   *
   * @param key the configuration key the file comes from ({@code listen.tls.cert_file})
   * @throws ConfigException one line naming {@code key} and the file
   */
  public static byte[] read(Path file, String key) {
    try {
      if (!Files.isRegularFile(file)) {
        throw new ConfigException(key + ": " + file + " is not a readable file");
      }
      long size = Files.size(file);
      if (size > MAX_FILE_BYTES) {
        throw new ConfigException(
            key + ": " + file + " has " + size + " bytes; a PEM file here has at most 1 MiB");
      }
      return Files.readAllBytes(file);
    } catch (IOException e) {
      throw new ConfigException(key + ": cannot read " + file + " (" + e.getMessage() + ")", e);
    }
  }

  private static List<X509Certificate> parseCertificates(byte[] bytes, Path file, String key) {
    Collection<? extends Certificate> all;
    try {
      all =
          CertificateFactory.getInstance("X.509")
              .generateCertificates(new ByteArrayInputStream(bytes));
    } catch (CertificateException e) {
      throw new ConfigException(key + ": " + file + " holds no PEM certificate");
    }
    List<X509Certificate> out = new ArrayList<>();
    for (Certificate c : all) {
      out.add((X509Certificate) c);
    }
    if (out.isEmpty()) {
      throw new ConfigException(key + ": " + file + " holds no PEM certificate");
    }
    return out;
  }

  private static PrivateKey privateKey(
      Vertx vertx, PemKeyCertOptions options, Path keyFile, String key) {
    KeyManagerFactory kmf;
    try {
      kmf = options.getKeyManagerFactory(vertx);
    } catch (Exception e) {
      // Vert.x's message may quote the file's first bytes: name the file, never its content.
      throw new ConfigException(
          key
              + ": "
              + keyFile
              + " holds no PEM private key that can be read (PKCS#8, PKCS#1 RSA"
              + " or SEC1 EC)");
    }
    for (KeyManager km : kmf.getKeyManagers()) {
      if (km instanceof X509KeyManager x) {
        for (String type : new String[] {"EC", "RSA", "EdDSA", "Ed25519", "DSA"}) {
          String[] aliases = x.getServerAliases(type, null);
          if (aliases != null && aliases.length > 0) {
            PrivateKey k = x.getPrivateKey(aliases[0]);
            if (k != null) {
              return k;
            }
          }
        }
      }
    }
    throw new ConfigException(key + ": " + keyFile + " holds no private key of a known type");
  }

  private static boolean matches(PrivateKey privateKey, PublicKey publicKey) {
    String algorithm =
        switch (privateKey.getAlgorithm()) {
          case "RSA" -> "SHA256withRSA";
          case "EC" -> "SHA256withECDSA";
          case "DSA" -> "SHA256withDSA";
          default -> privateKey.getAlgorithm(); // EdDSA, Ed25519, Ed448 sign under their own name
        };
    try {
      byte[] challenge = new byte[32];
      RANDOM.nextBytes(challenge);
      Signature signer = Signature.getInstance(algorithm);
      signer.initSign(privateKey);
      signer.update(challenge);
      byte[] signature = signer.sign();
      Signature verifier = Signature.getInstance(algorithm);
      verifier.initVerify(publicKey);
      verifier.update(challenge);
      return verifier.verify(signature);
    } catch (GeneralSecurityException e) {
      // A key of another algorithm than the certificate's, or one the JDK cannot sign with.
      return false;
    }
  }

  private static void checkValidity(X509Certificate leaf, Path file, String key, Instant now) {
    try {
      leaf.checkValidity(Date.from(now));
    } catch (CertificateExpiredException e) {
      throw new ConfigException(
          key + ": the certificate in " + file + " expired at " + leaf.getNotAfter().toInstant());
    } catch (CertificateNotYetValidException e) {
      throw new ConfigException(
          key
              + ": the certificate in "
              + file
              + " is not valid before "
              + leaf.getNotBefore().toInstant());
    }
  }

  private static String pem(X509Certificate c) throws CertificateException {
    return "-----BEGIN CERTIFICATE-----\n"
        + Base64.getMimeEncoder(64, new byte[] {'\n'}).encodeToString(c.getEncoded())
        + "\n-----END CERTIFICATE-----\n";
  }
}
