package io.phasemeter.core.testing;

import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.bouncycastle.asn1.ASN1ObjectIdentifier;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.cert.X509CertificateHolder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509ExtensionUtils;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.bouncycastle.openssl.jcajce.JcaPKCS8Generator;
import org.bouncycastle.operator.ContentSigner;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

/**
 * A certificate authority made at test time, so that no private key is ever committed: a CA
 * certificate, and server and client certificates it signs, written as PEM files (certificates as
 * {@code CERTIFICATE}, keys as PKCS#8 {@code PRIVATE KEY}) into a directory the test owns. Keys are
 * EC P-256: fast to make, and accepted by the JDK, OpenSSL (curl, nginx, {@code openssl
 * s_client/s_server}), Go (k6) and Vert.x.
 *
 * <pre>{@code
 * TestPki pki = TestPki.create(tempDir, "test-ca");
 * TestPki.Issued server = pki.server("proxy", "localhost", "127.0.0.1");
 * TestPki.Issued client = pki.client("tenant-a");
 * // pki.caFile(), server.certFile(), server.keyFile(), client.certFile(), ...
 * }</pre>
 */
public final class TestPki {
  private static final AtomicLong SERIALS = new AtomicLong(System.nanoTime() & 0xffffffL);

  /** A certificate and its key, as PEM files. */
  public record Issued(Path certFile, Path keyFile, X509Certificate certificate) {
    /**
     * Replaces {@code certFile} and {@code keyFile} with this pair's contents, each by an atomic
     * move of a file written next to it: a reader sees either the old file or the new one, never
     * half of one (as a rotation by cert-manager or a {@code mv} does).
     */
    public void installAs(Path certFile, Path keyFile) {
      copyAtomically(this.keyFile, keyFile);
      copyAtomically(this.certFile, certFile);
    }
  }

  private final Path dir;
  private final String name;
  private final KeyPair caKeys;
  private final X509Certificate caCert;
  private final Path caFile;

  private TestPki(Path dir, String name, KeyPair caKeys, X509Certificate caCert, Path caFile) {
    this.dir = dir;
    this.name = name;
    this.caKeys = caKeys;
    this.caCert = caCert;
    this.caFile = caFile;
  }

  /**
   * A new CA named {@code CN=name}, valid from a day ago for a year; its certificate is written to
   * {@code dir/name.pem}.
   */
  public static TestPki create(Path dir, String name) {
    try {
      Files.createDirectories(dir);
      KeyPair keys = newKeys();
      X500Name subject = new X500Name("O=Phasemeter tests,CN=" + name);
      Instant now = Instant.now();
      JcaX509v3CertificateBuilder b =
          new JcaX509v3CertificateBuilder(
              subject,
              serial(),
              Date.from(now.minus(Duration.ofDays(1))),
              Date.from(now.plus(Duration.ofDays(365))),
              subject,
              keys.getPublic());
      JcaX509ExtensionUtils ext = new JcaX509ExtensionUtils();
      b.addExtension(Extension.basicConstraints, true, new BasicConstraints(0));
      b.addExtension(
          Extension.keyUsage, true, new KeyUsage(KeyUsage.keyCertSign | KeyUsage.cRLSign));
      b.addExtension(
          Extension.subjectKeyIdentifier, false, ext.createSubjectKeyIdentifier(keys.getPublic()));
      X509Certificate cert = sign(b, keys.getPrivate());
      Path caFile = dir.resolve(name + ".pem");
      Files.writeString(caFile, pem(cert));
      return new TestPki(dir, name, keys, cert, caFile);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The CA certificate's PEM file (what a client trusts, or {@code client_ca_file}). */
  public Path caFile() {
    return caFile;
  }

  /** The CA certificate. */
  public X509Certificate caCertificate() {
    return caCert;
  }

  /**
   * A server certificate for {@code names} (DNS names and IP literals, each a subject alternative
   * name; the first is also the CN), valid from a day ago for 30 days, written to {@code
   * dir/file.crt} and {@code dir/file.key}.
   */
  public Issued server(String file, String... names) {
    Instant now = Instant.now();
    return issue(file, names, true, now.minus(Duration.ofDays(1)), now.plus(Duration.ofDays(30)));
  }

  /** A server certificate valid only between {@code notBefore} and {@code notAfter}. */
  public Issued server(String file, Instant notBefore, Instant notAfter, String... names) {
    return issue(file, names, true, notBefore, notAfter);
  }

  /**
   * A client certificate whose subject is {@code CN=commonName} (mTLS), valid from a day ago for 30
   * days, written to {@code dir/file.crt} and {@code dir/file.key}.
   */
  public Issued client(String file, String commonName) {
    Instant now = Instant.now();
    return issue(
        file,
        new String[] {commonName},
        false,
        now.minus(Duration.ofDays(1)),
        now.plus(Duration.ofDays(30)));
  }

  /**
   * As {@link #client(String, String)}, with the extended key usages given by their OIDs instead of
   * clientAuth (e.g. {@code 2.5.29.37.0}, anyExtendedKeyUsage).
   */
  public Issued client(String file, String commonName, List<String> extendedKeyUsageOids) {
    Instant now = Instant.now();
    KeyPurposeId[] usages =
        extendedKeyUsageOids.stream()
            .map(oid -> KeyPurposeId.getInstance(new ASN1ObjectIdentifier(oid)))
            .toArray(KeyPurposeId[]::new);
    return issue(
        file,
        new String[] {commonName},
        false,
        usages,
        now.minus(Duration.ofDays(1)),
        now.plus(Duration.ofDays(30)));
  }

  private Issued issue(
      String file, String[] names, boolean server, Instant notBefore, Instant notAfter) {
    return issue(
        file,
        names,
        server,
        new KeyPurposeId[] {server ? KeyPurposeId.id_kp_serverAuth : KeyPurposeId.id_kp_clientAuth},
        notBefore,
        notAfter);
  }

  private Issued issue(
      String file,
      String[] names,
      boolean server,
      KeyPurposeId[] usages,
      Instant notBefore,
      Instant notAfter) {
    if (names.length == 0) {
      throw new IllegalArgumentException("a certificate needs at least one name");
    }
    try {
      KeyPair keys = newKeys();
      JcaX509v3CertificateBuilder b =
          new JcaX509v3CertificateBuilder(
              caCert,
              serial(),
              Date.from(notBefore),
              Date.from(notAfter),
              new X500Name("O=Phasemeter tests,CN=" + names[0]),
              keys.getPublic());
      JcaX509ExtensionUtils ext = new JcaX509ExtensionUtils();
      b.addExtension(Extension.basicConstraints, true, new BasicConstraints(false));
      b.addExtension(
          Extension.keyUsage,
          true,
          new KeyUsage(KeyUsage.digitalSignature | KeyUsage.keyAgreement));
      b.addExtension(Extension.extendedKeyUsage, false, new ExtendedKeyUsage(usages));
      b.addExtension(
          Extension.authorityKeyIdentifier, false, ext.createAuthorityKeyIdentifier(caCert));
      if (server) {
        List<GeneralName> sans = new ArrayList<>();
        for (String n : names) {
          sans.add(
              isIpLiteral(n)
                  ? new GeneralName(GeneralName.iPAddress, n)
                  : new GeneralName(GeneralName.dNSName, n));
        }
        b.addExtension(
            Extension.subjectAlternativeName,
            false,
            new GeneralNames(sans.toArray(GeneralName[]::new)));
      }
      X509Certificate cert = sign(b, caKeys.getPrivate());
      Path certFile = dir.resolve(file + ".crt");
      Path keyFile = dir.resolve(file + ".key");
      Files.writeString(certFile, pem(cert));
      Files.writeString(keyFile, pem(keys.getPrivate()));
      return new Issued(certFile, keyFile, cert);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public String toString() {
    return "TestPki[" + name + " in " + dir + "]";
  }

  private static boolean isIpLiteral(String n) {
    if (n.indexOf(':') >= 0) {
      return true;
    }
    return n.matches("[0-9]{1,3}(\\.[0-9]{1,3}){3}");
  }

  private static KeyPair newKeys() throws GeneralSecurityException {
    KeyPairGenerator g = KeyPairGenerator.getInstance("EC");
    g.initialize(new ECGenParameterSpec("secp256r1"));
    return g.generateKeyPair();
  }

  private static BigInteger serial() {
    return BigInteger.valueOf(SERIALS.incrementAndGet()).shiftLeft(16).add(BigInteger.ONE);
  }

  private static X509Certificate sign(JcaX509v3CertificateBuilder b, PrivateKey key)
      throws GeneralSecurityException {
    try {
      ContentSigner signer = new JcaContentSignerBuilder("SHA256withECDSA").build(key);
      X509CertificateHolder holder = b.build(signer);
      return new JcaX509CertificateConverter().getCertificate(holder);
    } catch (OperatorCreationException e) {
      throw new GeneralSecurityException(e);
    }
  }

  private static String pem(X509Certificate cert) throws IOException {
    StringWriter out = new StringWriter();
    try (JcaPEMWriter w = new JcaPEMWriter(out)) {
      w.writeObject(cert);
    }
    return out.toString();
  }

  private static String pem(PrivateKey key) throws IOException {
    StringWriter out = new StringWriter();
    try (JcaPEMWriter w = new JcaPEMWriter(out)) {
      w.writeObject(new JcaPKCS8Generator(key, null));
    }
    return out.toString();
  }

  private static void copyAtomically(Path from, Path to) {
    try {
      Path tmp = to.resolveSibling(to.getFileName() + ".tmp");
      Files.write(tmp, Files.readAllBytes(from));
      Files.move(tmp, to, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
