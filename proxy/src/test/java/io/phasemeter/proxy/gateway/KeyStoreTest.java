package io.phasemeter.proxy.gateway;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.gateway.KeyStore.ReloadStatus;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class KeyStoreTest {
  static final String KEY_A = "pm-alpha-secret-key";
  static final String KEY_B = "pm-bravo-secret-key";
  static final Duration TTL = Duration.ofSeconds(30);

  @TempDir Path dir;
  Path file;
  final ManualClock clock = new ManualClock();

  @BeforeEach
  void writeFile() throws IOException {
    file = dir.resolve("keys.yaml");
    write(entry("team-a", KEY_A, "high"));
  }

  @Test
  void aConfiguredKeyIsVerifiedWhateverTheSchemeCase() {
    KeyStore store = store(100);

    for (String header : List.of("Bearer " + KEY_A, "bearer " + KEY_A, "BEARER  " + KEY_A)) {
      Verification v = store.verify(header);
      assertThat(v).isInstanceOf(Verification.Verified.class);
      assertThat(((Verification.Verified) v).key().name()).isEqualTo("team-a");
      assertThat(((Verification.Verified) v).key().priority()).isEqualTo(Priority.HIGH);
    }
    assertThat(store.verifyKey(KEY_A).verified()).isTrue();
  }

  @Test
  void aWrongKeyOrAForeignSchemeIsInvalid() {
    KeyStore store = store(100);

    assertThat(store.verify("Bearer " + KEY_B)).isEqualTo(new Verification.Invalid());
    assertThat(store.verify("Basic " + KEY_A)).isEqualTo(new Verification.Invalid());
    assertThat(store.verify(KEY_A)).isEqualTo(new Verification.Invalid());
    assertThat(store.verifyKey(KEY_A + "x")).isEqualTo(new Verification.Invalid());
  }

  @Test
  void noKeyIsMissing() {
    KeyStore store = store(100);

    for (String header : new String[] {null, "", "   ", "Bearer", "Bearer   "}) {
      assertThat(store.verify(header)).as("%s", header).isEqualTo(new Verification.Missing());
    }
    assertThat(store.verifyKey(null)).isEqualTo(new Verification.Missing());
    assertThat(store.verifyKey("")).isEqualTo(new Verification.Missing());
  }

  @Test
  void aRevokedKeyIsRefusedAtOnceDespiteTheCache() throws IOException {
    KeyStore store = store(100);
    assertThat(store.verify("Bearer " + KEY_A).verified()).isTrue();
    assertThat(store.verify("Bearer " + KEY_A).verified()).isTrue();
    assertThat(store.stats().cacheHits()).isEqualTo(1);

    write(entry("team-b", KEY_B, "low"));
    KeyStore.ReloadResult r = store.reload();

    assertThat(r.status()).isEqualTo(KeyStore.ReloadStatus.RELOADED);
    assertThat(r.changed()).isTrue();
    assertThat(r.keys()).isEqualTo(1);
    assertThat(store.verify("Bearer " + KEY_A)).isEqualTo(new Verification.Invalid());
  }

  @Test
  void aReloadPicksUpANewKey() throws IOException {
    KeyStore store = store(100);
    assertThat(store.verify("Bearer " + KEY_B)).isEqualTo(new Verification.Invalid());

    write(entry("team-a", KEY_A, "high"), entry("team-b", KEY_B, "low"));
    KeyStore.ReloadResult r = store.reload();

    assertThat(r).isEqualTo(new KeyStore.ReloadResult(KeyStore.ReloadStatus.RELOADED, 2, none()));
    assertThat(store.verify("Bearer " + KEY_B).verified()).isTrue();
    assertThat(store.keys()).extracting(ApiKey::name).containsExactly("team-a", "team-b");
    assertThat(store.stats().reloads()).isEqualTo(1);
  }

  @Test
  void aBadFileOnReloadKeepsThePreviousKeys() throws IOException {
    KeyStore store = store(100);
    Files.writeString(file, "keys:\n  - {name: team-a, sha256: \"nothex\"}\n...\n");

    KeyStore.ReloadResult r = store.reload();

    assertThat(r.status()).isEqualTo(KeyStore.ReloadStatus.FAILED);
    assertThat(r.keys()).isEqualTo(1);
    assertThat(r.error())
        .hasValueSatisfying(
            e -> assertThat(e).startsWith(file + ": keys[0].sha256: must be 64 hex characters"));
    assertThat(store.verify("Bearer " + KEY_A).verified()).isTrue();
    assertThat(store.stats().failedReloads()).isEqualTo(1);

    Files.delete(file);
    assertThat(store.reloadIfChanged().error()).hasValue(file + ": file not found");
    assertThat(store.verify("Bearer " + KEY_A).verified()).isTrue();
  }

  @Test
  void reloadIfChangedDoesNothingWhenTheFileIsUnchanged() throws IOException {
    KeyStore store = store(100);
    store.verify("Bearer " + KEY_A);

    assertThat(store.reloadIfChanged())
        .isEqualTo(new KeyStore.ReloadResult(KeyStore.ReloadStatus.UNCHANGED, 1, none()));
    // The same content written again changes the stamp but not the hash: still nothing to do.
    write(entry("team-a", KEY_A, "high"));
    assertThat(store.reloadIfChanged().status()).isEqualTo(KeyStore.ReloadStatus.UNCHANGED);

    store.verify("Bearer " + KEY_A);
    assertThat(store.stats().reloads()).isZero();
    assertThat(store.stats().cacheHits()).isEqualTo(1);
  }

  @Test
  void reloadIfChangedReloadsAChangedFile() throws IOException {
    KeyStore store = store(100);

    write(entry("team-a", KEY_A, "high"), entry("team-b", KEY_B, "low"));

    assertThat(store.reloadIfChanged().status()).isEqualTo(KeyStore.ReloadStatus.RELOADED);
    assertThat(store.verify("Bearer " + KEY_B).verified()).isTrue();
  }

  @Test
  void everyCutOfAFileWrittenInPlaceIsRefusedAndThePreviousKeysStay() throws IOException {
    KeyStore store = store(100);
    List<ApiKey> old = store.keys();
    String complete =
        "# written in place, as an editor or a script might\n"
            + "keys:\n"
            + "  - name: team-a\n"
            + "    sha256: \""
            + HashKeyMain.hash(KEY_A)
            + "\"\n"
            + "    rpm: 2\n"
            + "    tpm: 1000\n"
            + "    priority: high\n"
            + "  - name: team-b\n"
            + "    sha256: \""
            + HashKeyMain.hash(KEY_B)
            + "\"\n"
            + "    rpm: 60\n"
            + "    allow_priority_header: true\n"
            + "  - name: batch\n"
            + "    sha256: \""
            + HashKeyMain.hash("pm-batch-secret-key")
            + "\"\n"
            + "    priority: low\n"
            + "...\n";
    byte[] bytes = complete.getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    // Every byte prefix is what a reader may find while the file is being written in place:
    // each one, a cut after "rpm:" or after a whole entry included, is refused.
    for (int n = 0; n < bytes.length; n++) {
      Files.write(file, java.util.Arrays.copyOf(bytes, n));
      KeyStore.ReloadResult r = store.reloadIfChanged();

      String cut = complete.substring(0, n);
      assertThat(r.status()).as("cut after %d bytes:%n%s", n, cut).isEqualTo(ReloadStatus.FAILED);
      assertThat(store.keys()).as("cut after %d bytes:%n%s", n, cut).isEqualTo(old);
      if (n > 0 && bytes[n - 1] == '\n') {
        assertThat(r.error()).hasValueSatisfying(e -> assertThat(e).contains("half-written"));
      }
    }
    assertThat(store.verify("Bearer " + KEY_A).verified()).isTrue();
    assertThat(store.verify("Bearer " + KEY_B).verified()).isFalse();

    Files.write(file, bytes);
    assertThat(store.reloadIfChanged().status()).isEqualTo(ReloadStatus.RELOADED);
    assertThat(store.keys())
        .containsExactly(
            new ApiKey("team-a", HashKeyMain.hash(KEY_A), 2, 1000, Priority.HIGH, false),
            new ApiKey("team-b", HashKeyMain.hash(KEY_B), 60, 0, Priority.NORMAL, true),
            new ApiKey(
                "batch", HashKeyMain.hash("pm-batch-secret-key"), 0, 0, Priority.LOW, false));
    assertThat(store.verify("Bearer " + KEY_B).verified()).isTrue();
  }

  @Test
  void theCacheIsKeyedByTheDigestNeverTheKey() {
    KeyStore store = store(100);
    store.verify("Bearer " + KEY_A);
    store.verify("Bearer " + KEY_B);

    assertThat(store.cachedDigests())
        .containsExactlyInAnyOrder(HashKeyMain.hash(KEY_A), HashKeyMain.hash(KEY_B))
        .allSatisfy(
            d -> assertThat(d).doesNotContain(KEY_A).doesNotContain(KEY_B).doesNotContain("pm-"));
  }

  @Test
  void noOutcomeNorReloadResultShowsThePresentedKey() throws IOException {
    KeyStore store = store(100);
    String secret = "pm-do-not-print-me";
    write(entry("team-s", secret, "normal"));
    store.reload();

    List<Object> shown =
        List.of(
            store.verify("Bearer " + secret),
            store.verify("Bearer " + secret + "-wrong"),
            store.verify("Basic " + secret),
            store.verify(null),
            store.reload(),
            store.stats(),
            store.keys());
    for (Object o : shown) {
      assertThat(o.toString()).doesNotContain("do-not-print").doesNotContain(secret);
    }
  }

  @Test
  void outcomesExpireAfterTheTtlAndNegativeOnesAreBounded() {
    KeyStore store = store(5);
    store.verify("Bearer " + KEY_A);
    clock.advance(TTL.minusNanos(1));
    store.verify("Bearer " + KEY_A);
    assertThat(store.stats().cacheHits()).isEqualTo(1);
    clock.advance(Duration.ofNanos(1));
    store.verify("Bearer " + KEY_A);
    assertThat(store.stats().cacheMisses()).isEqualTo(2);

    for (int i = 0; i < 100; i++) {
      assertThat(store.verifyKey("pm-wrong-" + i).verified()).isFalse();
    }
    store.cleanUp();
    assertThat(store.stats().cacheSize()).isLessThanOrEqualTo(5);
  }

  @Test
  void aBadFileAtStartIsAConfigError() throws IOException {
    Files.writeString(file, "keys:\n  - {name: a}\n...\n");

    assertThatThrownBy(() -> store(10))
        .isInstanceOf(ConfigException.class)
        .hasMessage(file + ": keys[0].sha256: missing");
  }

  @Test
  void aKeysFilePastTheTenantBoundIsRefusedAtStartAndOnReloadTheOldKeysStay() throws IOException {
    List<String> names = new java.util.ArrayList<>();
    for (int i = 0; i < 63; i++) {
      names.add("n" + i);
    }
    TenantAllowlist.Rules rules = new TenantAllowlist.Rules(names, java.util.Map.of());
    write(tenant("team-a", KEY_A));
    KeyStore store = KeyStore.create(file, clock, TTL, 100, Runnable::run, rules);
    assertThat(store.tenants().values()).hasSize(64).contains("n0", "team-a");

    write(tenant("team-a", KEY_A), tenant("team-b", KEY_B));
    KeyStore.ReloadResult r = store.reloadIfChanged();

    assertThat(r.status()).isEqualTo(ReloadStatus.FAILED);
    assertThat(r.error().orElseThrow())
        .startsWith(file + ": keys[1].tenant_metrics: 'team-b' would be tenant 65; at most 64")
        .contains("tenants.names: 63, keys with tenant_metrics: true: 2");
    assertThat(store.keys()).extracting(ApiKey::name).containsExactly("team-a");
    assertThat(store.verifyKey(KEY_B).verified()).isFalse();
    assertThat(store.tenants().contains("team-b")).isFalse();
    assertThatThrownBy(() -> KeyStore.create(file, clock, TTL, 100, Runnable::run, rules))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("keys[1].tenant_metrics: 'team-b' would be tenant 65");
  }

  @Test
  void aReloadThatDropsABudgetsTenantIsRefused() throws IOException {
    write(tenant("team-a", KEY_A));
    KeyStore store =
        KeyStore.create(
            file,
            clock,
            TTL,
            100,
            Runnable::run,
            new TenantAllowlist.Rules(
                List.of(), java.util.Map.of("team-a", "budgets.yaml: budgets[0] (a).tenant")));

    write(entry("team-a", KEY_A, "high"));
    KeyStore.ReloadResult r = store.reload();

    assertThat(r.status()).isEqualTo(ReloadStatus.FAILED);
    assertThat(r.error().orElseThrow())
        .contains("no key named 'team-a' has tenant_metrics: true")
        .contains("budgets.yaml: budgets[0] (a).tenant names that tenant");
    assertThat(store.tenants().values()).containsExactly("team-a");
  }

  private static String tenant(String name, String key) {
    return "{name: " + name + ", sha256: \"" + HashKeyMain.hash(key) + "\", tenant_metrics: true}";
  }

  private KeyStore store(int cacheMax) {
    return KeyStore.create(file, clock, TTL, cacheMax, Runnable::run);
  }

  private void write(String... entries) throws IOException {
    Files.writeString(file, KeysFileTest.entries(entries));
  }

  private static String entry(String name, String key, String priority) {
    return "{name: "
        + name
        + ", sha256: \""
        + HashKeyMain.hash(key)
        + "\", rpm: 60, tpm: 1000, priority: "
        + priority
        + "}";
  }

  private static java.util.Optional<String> none() {
    return java.util.Optional.empty();
  }
}
