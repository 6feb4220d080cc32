package io.phasemeter.proxy.gateway;

import java.util.Locale;
import java.util.regex.Pattern;

/**
 * One client key as configured in the keys file: its name, the SHA-256 of the key (never the key
 * itself), its rate limits and its priority. Validation errors name the offending field, e.g.
 * {@code sha256: must be 64 hex characters}; {@link KeysFile} adds the file and the list index.
 *
 * @param name 1–64 characters of {@code [A-Za-z0-9_.-]}; what logs, metrics and headers show
 * @param sha256 the lower-case hex SHA-256 of the key's UTF-8 bytes (upper case is normalised)
 * @param rpm requests per minute; 0 means unlimited
 * @param tpm tokens per minute (input plus output); 0 means unlimited
 * @param priority the priority of this key's requests in the slot queue
 * @param allowPriorityHeader whether a request may choose its priority with {@code x-priority}
 * @param admin whether the key may use routes marked {@code admin_only} (the engine's
 *     administrative endpoints, when proxy.yaml allows them)
 * @param sloOverride whether the key's requests may set their own objectives with the {@code
 *     x-slo-*} headers (docs/design.md, "Server-side goodput"); when false they get 403
 */
public record ApiKey(
    String name,
    String sha256,
    long rpm,
    long tpm,
    Priority priority,
    boolean allowPriorityHeader,
    boolean admin,
    boolean sloOverride) {

  /**
   * The largest rpm or tpm accepted; the rate limiter's fixed-point arithmetic stays exact below
   * it.
   */
  public static final long MAX_LIMIT = 10_000_000_000L;

  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9_.-]{1,64}");
  private static final Pattern HEX = Pattern.compile("[0-9a-f]{64}");

  public ApiKey {
    if (name == null || !NAME.matcher(name).matches()) {
      throw new IllegalArgumentException(
          "name: must be 1 to 64 characters of letters, digits, '_', '.' or '-'");
    }
    sha256 = sha256 == null ? "" : sha256.toLowerCase(Locale.ROOT);
    if (!HEX.matcher(sha256).matches()) {
      throw new IllegalArgumentException(
          "sha256: must be 64 hex characters (the output of 'phasemeter hash-key')");
    }
    checkLimit("rpm", rpm);
    checkLimit("tpm", tpm);
    if (priority == null) {
      throw new IllegalArgumentException("priority: missing (use high, normal or low)");
    }
  }

  /** A key whose requests may carry the {@code x-slo-*} headers. */
  public ApiKey(
      String name,
      String sha256,
      long rpm,
      long tpm,
      Priority priority,
      boolean allowPriorityHeader,
      boolean admin) {
    this(name, sha256, rpm, tpm, priority, allowPriorityHeader, admin, true);
  }

  /** A key that is not an admin key. */
  public ApiKey(
      String name,
      String sha256,
      long rpm,
      long tpm,
      Priority priority,
      boolean allowPriorityHeader) {
    this(name, sha256, rpm, tpm, priority, allowPriorityHeader, false);
  }

  /** A key with the default priority ({@code normal}) and no {@code x-priority} override. */
  public static ApiKey of(String name, String sha256, long rpm, long tpm) {
    return new ApiKey(name, sha256, rpm, tpm, Priority.NORMAL, false);
  }

  /** Whether requests per minute are limited. */
  public boolean limitsRequests() {
    return rpm > 0;
  }

  /** Whether tokens per minute are limited. */
  public boolean limitsTokens() {
    return tpm > 0;
  }

  // The hash is left out: it is a verifier for the key, and log lines need only the name.
  @Override
  public String toString() {
    return "ApiKey[name="
        + name
        + ", rpm="
        + rpm
        + ", tpm="
        + tpm
        + ", priority="
        + priority.label()
        + ", allowPriorityHeader="
        + allowPriorityHeader
        + (admin ? ", admin=true" : "")
        + (sloOverride ? "" : ", sloOverride=false")
        + "]";
  }

  private static void checkLimit(String field, long value) {
    if (value < 0 || value > MAX_LIMIT) {
      throw new IllegalArgumentException(
          field + ": must be between 0 (unlimited) and " + MAX_LIMIT + ", got " + value);
    }
  }
}
