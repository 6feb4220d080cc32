package io.phasemeter.proxy.tls;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.phasemeter.core.testing.TestPki;
import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.net.ServerSSLOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Supplier;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The reload of a listener's certificate, one tick at a time ({@code reload}, the listener's side
 * of the hand-over played by the test): a good new pair is served once the listener took it, a bad
 * one or one the listener did not take is counted and logged once while the old one stays, and a
 * rotation caught half-way is no failure.
 */
class ListenerTlsTest {
  @TempDir Path dir;

  private Vertx vertx;
  private TestPki pki;
  private Path cert;
  private Path key;
  private final List<String> warnings = new CopyOnWriteArrayList<>();
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  // The listener's side of a hand-over: what it was offered and what it answers.
  private final List<ServerSSLOptions> offered = new CopyOnWriteArrayList<>();
  private Supplier<Future<Boolean>> listener = () -> Future.succeededFuture(true);

  @BeforeEach
  void setUp() {
    vertx = Vertx.vertx();
    pki = TestPki.create(dir.resolve("pki"), "ca");
    cert = dir.resolve("served.crt");
    key = dir.resolve("served.key");
    pki.server("first", "localhost", "127.0.0.1").installAs(cert, key);
  }

  @AfterEach
  void tearDown() {
    vertx.close().await();
  }

  private ListenerTls load() {
    ListenerTls tls =
        ListenerTls.load(
            vertx,
            new ProxyConfig.ServerTls(cert.toString(), key.toString(), null, Duration.ofSeconds(1)),
            "public",
            "listen.tls",
            List.of(io.vertx.core.http.HttpVersion.HTTP_1_1),
            Clock.systemUTC(),
            warnings::add);
    tls.bindTo(registry);
    tls.updatesThrough(
        options -> {
          offered.add(options);
          return listener.get();
        });
    return tls;
  }

  private double reloads(String result) {
    return registry.get("llm.tls.reloads").tag("result", result).counter().count();
  }

  /** Moves the files' modification time on, as a later write would (same-second writes). */
  private void touch() throws Exception {
    for (Path p : List.of(cert, key)) {
      Files.setLastModifiedTime(
          p,
          java.nio.file.attribute.FileTime.from(
              Files.getLastModifiedTime(p).toInstant().plusSeconds(1)));
    }
  }

  @Test
  void aGoodNewPairIsServedAndCounted() throws Exception {
    ListenerTls tls = load();
    var before = tls.serial();
    assertThat(tls.reload().await()).isFalse();

    TestPki.Issued second = pki.server("second", "localhost", "127.0.0.1");
    second.installAs(cert, key);
    touch();

    assertThat(tls.reload().await()).isTrue();
    assertThat(tls.serial()).isEqualTo(second.certificate().getSerialNumber()).isNotEqualTo(before);
    assertThat(tls.notAfter()).isEqualTo(second.certificate().getNotAfter().toInstant());
    assertThat(reloads("ok")).isEqualTo(1);
    assertThat(reloads("failed")).isZero();
    assertThat(registry.get("llm.tls.certificate.expiry.timestamp.seconds").gauge().value())
        .isEqualTo(second.certificate().getNotAfter().toInstant().getEpochSecond());
    // Nothing changed since: nothing reloaded.
    assertThat(tls.reload().await()).isFalse();
    assertThat(reloads("ok")).isEqualTo(1);
    assertThat(warnings).isEmpty();
  }

  @Test
  void aMismatchedKeyKeepsTheOldPairAndIsCountedAndLoggedOnce() throws Exception {
    ListenerTls tls = load();
    var served = tls.serial();
    // The certificate of one pair with the key of another.
    Files.copy(
        pki.server("other", "localhost").keyFile(),
        key,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    touch();

    for (int tick = 0; tick < 5; tick++) {
      assertThat(tls.reload().await()).isFalse();
    }

    assertThat(tls.serial()).isEqualTo(served);
    assertThat(reloads("failed")).isEqualTo(1);
    assertThat(reloads("ok")).isZero();
    assertThat(warnings).hasSize(1);
    assertThat(warnings.get(0))
        .startsWith("listen.tls.key_file: " + key)
        .contains("still serving the certificate valid until");
    // A key never shows in the line, only its file's name.
    assertThat(warnings.get(0)).doesNotContain("PRIVATE KEY");
  }

  @Test
  void anExpiredReplacementKeepsTheOldPair() throws Exception {
    ListenerTls tls = load();
    var served = tls.serial();
    Instant now = Instant.now();
    pki.server(
            "expired", now.minus(Duration.ofDays(10)), now.minus(Duration.ofDays(1)), "localhost")
        .installAs(cert, key);
    touch();

    for (int tick = 0; tick < 3; tick++) {
      tls.reload().await();
    }

    assertThat(tls.serial()).isEqualTo(served);
    assertThat(reloads("failed")).isEqualTo(1);
    assertThat(warnings).singleElement().asString().contains("expired at");
  }

  @Test
  void aRemovedFileIsOneFailureAndTheFileComingBackIsServed() throws Exception {
    ListenerTls tls = load();
    Files.delete(cert);

    for (int tick = 0; tick < 3; tick++) {
      tls.reload().await();
    }
    assertThat(reloads("failed")).isEqualTo(1);
    assertThat(warnings).singleElement().asString().startsWith("listen.tls: cannot read " + cert);

    TestPki.Issued back = pki.server("back", "localhost");
    back.installAs(cert, key);
    assertThat(tls.reload().await()).isTrue();
    assertThat(tls.serial()).isEqualTo(back.certificate().getSerialNumber());
    assertThat(reloads("ok")).isEqualTo(1);
  }

  @Test
  void aRotationCaughtBetweenItsTwoFileMovesIsNoFailure() throws Exception {
    ListenerTls tls = load();
    TestPki.Issued next = pki.server("next", "localhost");
    // The key is moved into place first (as Issued.installAs does); a look lands here.
    Files.copy(next.keyFile(), key, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    touch();
    assertThat(tls.reload().await()).isFalse();
    // Then the certificate.
    next.installAs(cert, key);
    touch();

    assertThat(tls.reload().await()).isTrue();

    assertThat(tls.serial()).isEqualTo(next.certificate().getSerialNumber());
    assertThat(reloads("failed")).isZero();
    assertThat(reloads("ok")).isEqualTo(1);
    assertThat(warnings).isEmpty();
  }

  @Test
  void aPairTheListenerDidNotTakeIsNotReportedServedAndIsOfferedAgain() throws Exception {
    ListenerTls tls = load();
    var before = tls.serial();
    Instant notAfter = tls.notAfter();
    TestPki.Issued second = pki.server("second", "localhost", "127.0.0.1");
    second.installAs(cert, key);
    touch();

    listener = () -> Future.failedFuture(new IllegalArgumentException("cannot build it"));
    assertThat(tls.reload().await()).isFalse();
    // The old pair is served, and everything says so.
    assertThat(tls.serial()).isEqualTo(before);
    assertThat(tls.notAfter()).isEqualTo(notAfter);
    assertThat(registry.get("llm.tls.certificate.expiry.timestamp.seconds").gauge().value())
        .isEqualTo(notAfter.getEpochSecond());
    assertThat(reloads("ok")).isZero();
    assertThat(reloads("failed")).isEqualTo(1);
    assertThat(warnings)
        .singleElement()
        .asString()
        .startsWith("listen.tls: the listener did not take the new certificate")
        .contains("IllegalArgumentException", "still serving the certificate valid until");

    // Offered again on the next tick though the files did not change; not counted again.
    listener = () -> Future.succeededFuture(false);
    assertThat(tls.reload().await()).isFalse();
    assertThat(offered).hasSize(2);
    assertThat(reloads("failed")).isEqualTo(1);
    assertThat(warnings).hasSize(1);

    listener = () -> Future.succeededFuture(true);
    assertThat(tls.reload().await()).isTrue();
    assertThat(offered).hasSize(3);
    assertThat(tls.serial()).isEqualTo(second.certificate().getSerialNumber());
    assertThat(reloads("ok")).isEqualTo(1);
    assertThat(reloads("failed")).isEqualTo(1);
    // Every tick is one look at the files.
    assertThat(registry.get("llm.tls.reload.checks").counter().count()).isEqualTo(3);
  }

  @Test
  void aListenerThatNoLongerListensEndsTheReloadWithoutAFailure() throws Exception {
    ListenerTls tls = load();
    var before = tls.serial();
    pki.server("second", "localhost").installAs(cert, key);
    touch();
    // What Vert.x throws once the listener closed.
    listener =
        () -> {
          throw new IllegalStateException("Not listening");
        };

    assertThat(tls.reload().await()).isFalse();

    assertThat(tls.serial()).isEqualTo(before);
    assertThat(reloads("ok")).isZero();
    assertThat(reloads("failed")).isZero();
    assertThat(warnings).isEmpty();
  }

  @Test
  void afterCloseATickOffersNothing() throws Exception {
    ListenerTls tls = load();
    var before = tls.serial();
    tls.close().await();
    pki.server("second", "localhost").installAs(cert, key);
    touch();

    assertThat(tls.reload().await()).isFalse();

    assertThat(offered).isEmpty();
    assertThat(tls.serial()).isEqualTo(before);
    assertThat(reloads("ok") + reloads("failed")).isZero();
    // Nothing was looked at, so nothing is counted as a look.
    assertThat(checks()).isZero();
  }

  @Test
  void aTickBeforeTheListenerListensOrDuringAHandOverLooksAtNothing() throws Exception {
    ListenerTls tls =
        ListenerTls.load(
            vertx,
            new ProxyConfig.ServerTls(cert.toString(), key.toString(), null, Duration.ofSeconds(1)),
            "public",
            "listen.tls",
            List.of(io.vertx.core.http.HttpVersion.HTTP_1_1),
            Clock.systemUTC(),
            warnings::add);
    tls.bindTo(registry);
    pki.server("second", "localhost").installAs(cert, key);
    touch();
    // Not listening yet: no look.
    assertThat(tls.reload().await()).isFalse();
    assertThat(checks()).isZero();

    Promise<Boolean> answer = Promise.promise();
    tls.updatesThrough(
        options -> {
          offered.add(options);
          return answer.future();
        });
    Future<Boolean> handingOver = tls.reload();
    Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> offered.size() == 1);
    assertThat(checks()).isEqualTo(1);
    // The listener has not answered: a tick now looks at nothing and offers nothing.
    assertThat(tls.reload().await()).isFalse();
    assertThat(checks()).isEqualTo(1);
    assertThat(offered).hasSize(1);

    answer.complete(true);
    assertThat(handingOver.await()).isTrue();
    assertThat(reloads("ok")).isEqualTo(1);
  }

  @Test
  void aHandOverTheClosingListenerFailsIsNoFailure() throws Exception {
    ListenerTls tls = load();
    var before = tls.serial();
    Promise<Boolean> answer = Promise.promise();
    listener = answer::future;
    pki.server("second", "localhost").installAs(cert, key);
    touch();
    Future<Boolean> handingOver = tls.reload();
    Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> offered.size() == 1);

    // The proxy stops: the reload first, then the listener, which fails the hand-over under way.
    tls.close().await();
    answer.fail(new IllegalStateException("closed"));

    assertThat(handingOver.await()).isFalse();
    assertThat(tls.serial()).isEqualTo(before);
    assertThat(reloads("ok") + reloads("failed")).isZero();
    assertThat(warnings).isEmpty();
  }

  private double checks() {
    return registry.get("llm.tls.reload.checks").counter().count();
  }

  @Test
  void aBadPairAtStartIsOneLineNamingTheKeyAndTheFile() throws Exception {
    Files.copy(
        pki.server("other", "localhost").keyFile(),
        key,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);

    assertThatThrownBy(this::load)
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("listen.tls.key_file: " + key + " is not the key of");
  }

  @Test
  void theConfigNamesTheKeyOfAnIncompleteBlock() {
    String pools = "pools: [{name: p, models: [m], upstreams: ['http://127.0.0.1:1']}]\n";
    assertThatThrownBy(
            () -> ConfigLoader.parse("listen: {tls: {cert_file: a.crt}}\n" + pools, "p.yaml"))
        .hasMessage("p.yaml: listen.tls.key_file: required with tls.cert_file");
    assertThatThrownBy(
            () -> ConfigLoader.parse("admin: {tls: {client_ca_file: ca.pem}}\n" + pools, "p.yaml"))
        .hasMessageStartingWith("p.yaml: admin.tls.cert_file: required with tls.client_ca_file");
    assertThatThrownBy(
            () ->
                ConfigLoader.parse(
                    "listen: {tls: {cert_file: a, key_file: b, reload_interval: -1s}}\n" + pools,
                    "p.yaml"))
        .hasMessageContaining("listen.tls.reload_interval");
    assertThatThrownBy(
            () ->
                ConfigLoader.parse(
                    "listen: {tls: {cert_file: a, key_file: b}}\n"
                        + "auth: {enabled: true, keys_file: k.yaml, client_cert: true}\n"
                        + pools,
                    "p.yaml"))
        .hasMessage(
            "p.yaml: auth.client_cert: needs listen.tls.client_ca_file (client certificates are"
                + " asked for only when a CA to check them is set)");

    ProxyConfig plain = ConfigLoader.parse(pools, "p.yaml");
    assertThat(plain.listen().tls()).isNull();
    assertThat(plain.admin().tls()).isNull();
    ProxyConfig tls =
        ConfigLoader.parse(
            "listen: {tls: {cert_file: a.crt, key_file: a.key, client_ca_file: ca.pem}}\n" + pools,
            "p.yaml");
    assertThat(tls.listen().tls().mutual()).isTrue();
    assertThat(tls.listen().tls().reloadInterval()).isEqualTo(Duration.ofSeconds(10));
    assertThat(tls.withListenPort(0).listen().tls()).isEqualTo(tls.listen().tls());
  }
}
