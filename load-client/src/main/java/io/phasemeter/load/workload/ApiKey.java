package io.phasemeter.load.workload;

import java.util.Map;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * The API key a run sends as {@code Authorization: Bearer <key>} on its generation requests, read
 * once at start from the environment variable the user named ({@code --api-key-env NAME}, plan key
 * {@code api_key_env}). Only the variable's name is ever shown: {@link #toString}, {@link #envName}
 * and every error name the variable, never the key.
 */
public final class ApiKey {
  private static final Pattern NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");

  private final String envName;
  private final String key;

  private ApiKey(String envName, String key) {
    this.envName = envName;
    this.key = key;
  }

  /**
   * The key held by {@code env}'s variable {@code name}.
   *
   * @param source what named the variable, for errors ({@code --api-key-env}, a plan's key)
   * @throws IllegalArgumentException (one line, without the key) when the variable is unset, empty,
   *     or holds a character a header value cannot carry
   */
  public static ApiKey fromEnv(String source, String name, Map<String, String> env) {
    Objects.requireNonNull(env, "env");
    if (!isName(name)) {
      // Not echoed: what was given may be the key itself.
      throw new IllegalArgumentException(
          source
              + " takes the name of an environment variable (letters, digits and _, e.g."
              + " OPENAI_API_KEY), not the key");
    }
    String key = env.get(name);
    if (key == null) {
      throw new IllegalArgumentException(source + ": environment variable " + name + " is not set");
    }
    if (key.isEmpty()) {
      throw new IllegalArgumentException(source + ": environment variable " + name + " is empty");
    }
    for (int i = 0; i < key.length(); i++) {
      char c = key.charAt(i);
      // A bearer token is visible ASCII; anything else (a trailing newline from a file, say)
      // would be refused by the HTTP client with the value in its message.
      if (c <= ' ' || c >= 0x7f) {
        throw new IllegalArgumentException(
            source
                + ": environment variable "
                + name
                + " holds a space, control or non-ASCII character (a newline from the file the"
                + " key came from?)");
      }
    }
    return new ApiKey(name, key);
  }

  /** Whether {@code name} is an environment variable's name: letters, digits and _. */
  public static boolean isName(String name) {
    return name != null && NAME.matcher(name).matches();
  }

  /** The environment variable's name: the only part of the key that may be recorded. */
  public String envName() {
    return envName;
  }

  /** The header that carries the key. */
  public Map<String, String> headers() {
    return Map.of("authorization", "Bearer " + key);
  }

  /** Names the variable, never the key. */
  @Override
  public String toString() {
    return "ApiKey[env=" + envName + "]";
  }
}
