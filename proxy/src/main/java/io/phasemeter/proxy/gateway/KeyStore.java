package io.phasemeter.proxy.gateway;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.phasemeter.core.NanoClock;
import io.phasemeter.proxy.config.ConfigException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Executor;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

/**
 * Verifies presented API keys against the keys file and reloads that file when it changes.
 *
 * <p>A presented key is hashed (SHA-256 of its UTF-8 bytes) and the digest is compared with every
 * configured hash without stopping at a match, so the time taken does not reveal which entry, if
 * any, matched. Outcomes, negative ones included, are cached by the hex digest, never by the key;
 * the cache is bounded and entries expire a fixed time after they were written. A successful reload
 * that changes the keys takes effect for the next request: outcomes computed against the previous
 * keys are never served again.
 *
 * <p>A reload takes only a file that validates completely ({@link KeysFile}: every key with its
 * fields, the last line {@code ...}); anything less, such as a file caught while it is written in
 * place, keeps the previous keys. Write the file elsewhere and rename it into place.
 *
 * <p>{@link #verify} and {@link #verifyKey} do no IO and may run on an event loop. {@link #reload}
 * and {@link #reloadIfChanged} read the file and must run on a worker thread.
 */
public final class KeyStore implements MeterBinder {

  /** The outcome of a reload. */
  public enum ReloadStatus {
    /** The file was read and its keys differ from the previous ones; they are now in force. */
    RELOADED,
    /** The file (or its keys) did not change; nothing was swapped. */
    UNCHANGED,
    /**
     * The file could not be read or is invalid (half-written included); the previous keys stay in
     * force.
     */
    FAILED
  }

  /**
   * What a reload did.
   *
   * @param status whether the keys changed, stayed the same, or the file was refused
   * @param keys how many keys are in force after the reload
   * @param error the one-line {@link ConfigException} message when {@code status} is {@code
   *     FAILED}, otherwise empty
   */
  public record ReloadResult(ReloadStatus status, int keys, Optional<String> error) {
    public ReloadResult {
      Objects.requireNonNull(status, "status");
      Objects.requireNonNull(error, "error");
    }

    /** Whether the keys in force changed. */
    public boolean changed() {
      return status == ReloadStatus.RELOADED;
    }
  }

  /**
   * Counters since start.
   *
   * @param keys keys in force now
   * @param cacheHits verifications answered from the cache
   * @param cacheMisses verifications that compared against the key list
   * @param cacheSize outcomes held in the cache (an estimate)
   * @param reloads reloads that changed the keys
   * @param failedReloads reloads refused because the file was unreadable or invalid
   */
  public record Stats(
      int keys,
      long cacheHits,
      long cacheMisses,
      long cacheSize,
      long reloads,
      long failedReloads) {}

  /**
   * The keys in force, their hashes as bytes, the tenants they and {@code tenants.names} allowlist,
   * and a generation that tags cached outcomes.
   */
  private record Snapshot(
      long generation, List<ApiKey> keys, byte[][] hashes, TenantAllowlist tenants) {}

  /** A cached outcome, valid only while its generation is the one in force. */
  private record Cached(long generation, Verification outcome) {}

  /** What identifies one version of the file without reading it. */
  private record FileStamp(long modifiedNanos, long size, Object fileKey) {}

  private static final HexFormat HEX = HexFormat.of();
  private static final Verification MISSING = new Verification.Missing();
  private static final Verification INVALID = new Verification.Invalid();

  private final Path file;
  private final TenantAllowlist.Rules tenantRules;
  private final Cache<String, Cached> cache;
  private final AtomicReference<Snapshot> current;
  private final LongAdder hits = new LongAdder();
  private final LongAdder misses = new LongAdder();
  private final LongAdder reloads = new LongAdder();
  private final LongAdder failedReloads = new LongAdder();
  private final Object reloadLock = new Object();
  // Guarded by reloadLock.
  private FileStamp stamp;
  private byte[] contentHash;

  private KeyStore(
      Path file,
      KeysFile initial,
      TenantAllowlist.Rules tenantRules,
      FileStamp stamp,
      byte[] contentHash,
      NanoClock clock,
      Duration cacheTtl,
      int cacheMax,
      Executor maintenance) {
    this.file = file;
    this.tenantRules = tenantRules;
    this.stamp = stamp;
    this.contentHash = contentHash;
    this.current = new AtomicReference<>(snapshot(0, initial, tenants(tenantRules, initial, file)));
    this.cache =
        Caffeine.newBuilder()
            .expireAfterWrite(cacheTtl)
            .maximumSize(cacheMax)
            .ticker(clock::nanoTime)
            .executor(maintenance)
            .build();
  }

  /**
   * Loads {@code keysFile} and returns a store over it. Does blocking file IO.
   *
   * @param keysFile the keys file (docs/design.md §9)
   * @param clock the time source of cache expiry
   * @param cacheTtl how long a verification outcome is reused
   * @param cacheMax how many outcomes are held at most
   * @throws ConfigException naming the file and the key when the file is unreadable or invalid
   */
  public static KeyStore create(Path keysFile, NanoClock clock, Duration cacheTtl, int cacheMax) {
    return create(keysFile, clock, cacheTtl, cacheMax, ForkJoinPool.commonPool());
  }

  /**
   * As {@link #create(Path, NanoClock, Duration, int)}, with the executor that runs the cache's
   * maintenance ({@code Runnable::run} makes it deterministic in tests).
   */
  public static KeyStore create(
      Path keysFile, NanoClock clock, Duration cacheTtl, int cacheMax, Executor maintenance) {
    return create(keysFile, clock, cacheTtl, cacheMax, maintenance, TenantAllowlist.Rules.NONE);
  }

  /**
   * As {@link #create(Path, NanoClock, Duration, int, Executor)}, with the tenants the keys add to
   * ({@code tenants.names}) and those that must stay: a keys file whose allowlist passes {@link
   * TenantAllowlist#MAX} values, or drops a needed tenant, is refused at start and on reload (the
   * previous keys stay).
   */
  public static KeyStore create(
      Path keysFile,
      NanoClock clock,
      Duration cacheTtl,
      int cacheMax,
      Executor maintenance,
      TenantAllowlist.Rules tenantRules) {
    Objects.requireNonNull(keysFile, "keysFile");
    Objects.requireNonNull(tenantRules, "tenantRules");
    Objects.requireNonNull(clock, "clock");
    if (cacheTtl == null || cacheTtl.isNegative()) {
      throw new IllegalArgumentException("cacheTtl: must be zero or positive");
    }
    if (cacheMax < 0) {
      throw new IllegalArgumentException("cacheMax: must be zero or positive");
    }
    FileStamp stamp = stat(keysFile);
    byte[] bytes = read(keysFile);
    KeysFile keys = KeysFile.parse(new String(bytes, StandardCharsets.UTF_8), keysFile.toString());
    return new KeyStore(
        keysFile, keys, tenantRules, stamp, sha256(bytes), clock, cacheTtl, cacheMax, maintenance);
  }

  /**
   * Verifies the value of an {@code Authorization} header, {@code Bearer <key>} with the scheme in
   * any case. Null or blank, or {@code Bearer} with no key, is {@link Verification.Missing}; any
   * other scheme is {@link Verification.Invalid}.
   */
  public Verification verify(String authorizationHeaderValue) {
    if (authorizationHeaderValue == null || authorizationHeaderValue.isBlank()) {
      return MISSING;
    }
    String value = authorizationHeaderValue.strip();
    int space = indexOfWhitespace(value);
    String scheme = space < 0 ? value : value.substring(0, space);
    if (!scheme.toLowerCase(Locale.ROOT).equals("bearer")) {
      return INVALID;
    }
    return space < 0 ? MISSING : verifyKey(value.substring(space).strip());
  }

  /**
   * Verifies a raw key, as sent in an {@code x-api-key} or {@code api-key} header. Null or empty is
   * {@link Verification.Missing}.
   */
  public Verification verifyKey(String rawKey) {
    if (rawKey == null || rawKey.isEmpty()) {
      return MISSING;
    }
    byte[] digest = sha256(rawKey.getBytes(StandardCharsets.UTF_8));
    String hex = HEX.formatHex(digest);
    Snapshot snap = current.get();
    Cached cached = cache.getIfPresent(hex);
    if (cached != null && cached.generation() == snap.generation()) {
      hits.increment();
      return cached.outcome();
    }
    misses.increment();
    Verification outcome = match(snap, digest);
    cache.put(hex, new Cached(snap.generation(), outcome));
    return outcome;
  }

  /**
   * Re-reads the keys file. On success the new keys replace the old ones at once and, when they
   * differ, every cached outcome is dropped, so a removed key is refused from the next request on.
   * On failure the previous keys stay in force and the result carries the one-line error for the
   * caller to log. Does blocking file IO: call it on a worker thread.
   */
  public ReloadResult reload() {
    synchronized (reloadLock) {
      FileStamp newStamp;
      byte[] bytes;
      KeysFile parsed;
      TenantAllowlist tenants;
      try {
        // Stat before reading: a change that lands between the two then shows on the next check.
        newStamp = stat(file);
        bytes = read(file);
        parsed = KeysFile.parse(new String(bytes, StandardCharsets.UTF_8), file.toString());
        tenants = tenants(tenantRules, parsed, file);
      } catch (ConfigException e) {
        failedReloads.increment();
        return new ReloadResult(
            ReloadStatus.FAILED, current.get().keys().size(), Optional.of(e.getMessage()));
      }
      stamp = newStamp;
      contentHash = sha256(bytes);
      return apply(parsed, tenants);
    }
  }

  /**
   * Reloads only when the file changed: its modification time, size and identity are compared first
   * (one {@code stat}); when they differ, its content hash decides. Cheap enough for a periodic
   * timer, but it does blocking file IO: run it on a worker thread.
   */
  public ReloadResult reloadIfChanged() {
    synchronized (reloadLock) {
      FileStamp newStamp;
      try {
        newStamp = stat(file);
        if (newStamp.equals(stamp)) {
          return unchanged();
        }
        byte[] bytes = read(file);
        byte[] hash = sha256(bytes);
        if (Arrays.equals(hash, contentHash)) {
          stamp = newStamp;
          return unchanged();
        }
        // Remember this version even if it is broken: it is reported once, not on every tick.
        stamp = newStamp;
        contentHash = hash;
        KeysFile parsed =
            KeysFile.parse(new String(bytes, StandardCharsets.UTF_8), file.toString());
        return apply(parsed, tenants(tenantRules, parsed, file));
      } catch (ConfigException e) {
        failedReloads.increment();
        return new ReloadResult(
            ReloadStatus.FAILED, current.get().keys().size(), Optional.of(e.getMessage()));
      }
    }
  }

  /**
   * Verifies a key by its name, as a client certificate's subject CN names it ({@code
   * auth.client_cert}): the key of that name in force now, {@link Verification.Invalid} for a name
   * no key has, {@link Verification.Missing} for null. Does no IO.
   */
  public Verification verifyName(String name) {
    if (name == null) {
      return MISSING;
    }
    for (ApiKey k : current.get().keys()) {
      if (k.name().equals(name)) {
        return new Verification.Verified(k);
      }
    }
    return INVALID;
  }

  /** The keys in force, in file order. */
  public List<ApiKey> keys() {
    return current.get().keys();
  }

  /**
   * The tenants in force: {@code tenants.names} and the names of the keys in force marked {@code
   * tenant_metrics: true}. Does no IO.
   */
  public TenantAllowlist tenants() {
    return current.get().tenants();
  }

  /** True when no key is configured, so every client is refused. */
  public boolean refusesEveryone() {
    return current.get().keys().isEmpty();
  }

  /**
   * Registers {@code llm_auth_keys} (keys accepted now) and {@code llm_auth_reloads_total} by
   * {@code result} ({@code reloaded}, {@code failed}: a bad file, the previous keys stay).
   */
  @Override
  public void bindTo(MeterRegistry registry) {
    Gauge.builder("llm.auth.keys", this, k -> k.stats().keys())
        .strongReference(true)
        .description("API keys accepted now")
        .register(registry);
    FunctionCounter.builder("llm.auth.reloads", this, k -> k.stats().reloads())
        .tags("result", "reloaded")
        .description("Keys file reloads")
        .register(registry);
    FunctionCounter.builder("llm.auth.reloads", this, k -> k.stats().failedReloads())
        .tags("result", "failed")
        .description("Keys file reloads")
        .register(registry);
  }

  /** Counters since start. */
  public Stats stats() {
    return new Stats(
        current.get().keys().size(),
        hits.sum(),
        misses.sum(),
        cache.estimatedSize(),
        reloads.sum(),
        failedReloads.sum());
  }

  /** The cache's keys (hex digests), for tests that check no raw key is held. */
  Set<String> cachedDigests() {
    return Set.copyOf(cache.asMap().keySet());
  }

  /** Runs pending cache maintenance (expiry, eviction) now; for tests. */
  void cleanUp() {
    cache.cleanUp();
  }

  private ReloadResult apply(KeysFile parsed, TenantAllowlist tenants) {
    Snapshot old = current.get();
    if (old.keys().equals(parsed.keys())) {
      return new ReloadResult(ReloadStatus.UNCHANGED, old.keys().size(), Optional.empty());
    }
    current.set(snapshot(old.generation() + 1, parsed, tenants));
    // Entries of the old generation are already ignored; dropping them frees the memory.
    cache.invalidateAll();
    reloads.increment();
    return new ReloadResult(ReloadStatus.RELOADED, parsed.keys().size(), Optional.empty());
  }

  private ReloadResult unchanged() {
    return new ReloadResult(ReloadStatus.UNCHANGED, current.get().keys().size(), Optional.empty());
  }

  private static Verification match(Snapshot snap, byte[] digest) {
    ApiKey found = null;
    // Every hash is compared, and isEqual itself does not stop early, so timing does not tell
    // how far down the list (if at all) the key sits.
    for (int i = 0; i < snap.hashes().length; i++) {
      boolean equal = MessageDigest.isEqual(snap.hashes()[i], digest);
      found = equal ? snap.keys().get(i) : found;
    }
    return found == null ? INVALID : new Verification.Verified(found);
  }

  private static Snapshot snapshot(long generation, KeysFile file, TenantAllowlist tenants) {
    List<ApiKey> keys = file.keys();
    byte[][] hashes = new byte[keys.size()][];
    for (int i = 0; i < hashes.length; i++) {
      hashes[i] = HEX.parseHex(keys.get(i).sha256());
    }
    return new Snapshot(generation, keys, hashes, tenants);
  }

  /** The allowlist of {@code keys}, or the file and the key that break its bound. */
  private static TenantAllowlist tenants(TenantAllowlist.Rules rules, KeysFile keys, Path file) {
    try {
      return rules.allowlist(keys.keys());
    } catch (IllegalArgumentException e) {
      throw new ConfigException(file + ": " + e.getMessage());
    }
  }

  private static int indexOfWhitespace(String s) {
    for (int i = 0; i < s.length(); i++) {
      if (Character.isWhitespace(s.charAt(i))) {
        return i;
      }
    }
    return -1;
  }

  private static FileStamp stat(Path file) {
    try {
      BasicFileAttributes a = Files.readAttributes(file, BasicFileAttributes.class);
      return new FileStamp(a.lastModifiedTime().to(TimeUnit.NANOSECONDS), a.size(), a.fileKey());
    } catch (NoSuchFileException e) {
      throw new ConfigException(file + ": file not found");
    } catch (IOException e) {
      throw new ConfigException(file + ": cannot read (" + e.getMessage() + ")");
    }
  }

  private static byte[] read(Path file) {
    try {
      return Files.readAllBytes(file);
    } catch (NoSuchFileException e) {
      throw new ConfigException(file + ": file not found");
    } catch (IOException e) {
      throw new ConfigException(file + ": cannot read (" + e.getMessage() + ")");
    }
  }

  static byte[] sha256(byte[] bytes) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(bytes);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java runtime provides SHA-256", e);
    }
  }
}
