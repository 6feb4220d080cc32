package io.phasemeter.proxy.gateway;

/**
 * The outcome of checking a presented key. No variant holds the presented key or any part of it, so
 * an outcome may be logged or attached to a failure as it is.
 */
public sealed interface Verification
    permits Verification.Verified, Verification.Missing, Verification.Invalid {

  /** The key matched a configured one. */
  record Verified(ApiKey key) implements Verification {
    public Verified {
      if (key == null) {
        throw new IllegalArgumentException("key: missing");
      }
    }
  }

  /** No key was presented (no header, an empty one, or {@code Bearer} with nothing after it). */
  record Missing() implements Verification {}

  /** A key was presented but matches no configured key (wrong, revoked, or a foreign scheme). */
  record Invalid() implements Verification {}

  /** Whether the client may proceed. */
  default boolean verified() {
    return this instanceof Verified;
  }
}
