package io.phasemeter.proxy.config;

import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * What an admin token must be to guard a listener beyond loopback: not a placeholder, at least
 * {@value #MIN_LENGTH} characters, at least {@value #MIN_DISTINCT} different ones. A token that
 * {@code openssl rand -hex 8} or longer prints passes; what was shipped as an example ({@code
 * change-me}), typed in a hurry ({@code s3cret}) or left unexpanded ({@code
 * ${PHASEMETER_ADMIN_TOKEN}}) does not. The rule is deliberately small enough to state in one
 * sentence of the README; it is no password-strength meter.
 */
final class AdminToken {

  /** The fewest characters a token beyond loopback may have: 64 bits as hex. */
  static final int MIN_LENGTH = 16;

  /**
   * The fewest different characters: catches {@code aaaa…} and {@code abab…}. Sixteen random hex
   * digits have fewer than 5 different ones in 4 draws out of ten million; fewer than 8 in one draw
   * out of a hundred, which is why the bar is not higher.
   */
  static final int MIN_DISTINCT = 5;

  /**
   * Whole tokens, compared with case and everything but letters and digits ignored. All are shorter
   * than {@link #MIN_LENGTH}: listed so that the line says placeholder, not short.
   */
  private static final Set<String> PLACEHOLDERS =
      Set.of(
          "token", "passwd", "admin", "test", "testing", "default", "none", "null", "empty", "todo",
          "fixme", "tbd", "bearer");

  /**
   * Parts that mark a template, compared the same way: {@code change-me-in-production}, {@code
   * replace-with-your-token}, {@code my-example-token}, {@code phasemeter-admin-token} (the
   * variable's name for its value). None can occur in a random hex token; each has six letters or
   * more, so one turns up in less than one random 43-character base64 token ({@code openssl rand
   * -base64 32}) out of ten million.
   */
  private static final List<String> PLACEHOLDER_PARTS =
      List.of(
          "changeme",
          "replaceme",
          "placeholder",
          "example",
          "yourtoken",
          "yourown",
          "yourkey",
          "sample",
          "insecure",
          "password",
          "secret",
          "admintoken");

  private AdminToken() {}

  /**
   * Why {@code token} (already trimmed, not empty) must not guard a listener beyond loopback, or
   * null when it may. The answer never quotes the token, nor its length.
   */
  static String weakness(String token) {
    if (placeholder(token)) {
      return "looks like a placeholder";
    }
    if (token.length() < MIN_LENGTH) {
      return "shorter than " + MIN_LENGTH + " characters";
    }
    if (token.chars().distinct().count() < MIN_DISTINCT) {
      return "fewer than " + MIN_DISTINCT + " different characters";
    }
    return null;
  }

  private static boolean placeholder(String token) {
    // An unexpanded reference: ${VAR} or $(VAR) (a shell or Kubernetes variable that was not
    // set), <token>, {{ .Values.token }}.
    if ((token.startsWith("${") && token.endsWith("}"))
        || (token.startsWith("$(") && token.endsWith(")"))
        || (token.startsWith("<") && token.endsWith(">"))
        || (token.startsWith("{{") && token.endsWith("}}"))) {
      return true;
    }
    StringBuilder sb = new StringBuilder(token.length());
    for (char c : token.toLowerCase(Locale.ROOT).toCharArray()) {
      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
        sb.append(c);
      }
    }
    String letters = sb.toString();
    if (PLACEHOLDERS.contains(letters)) {
      return true;
    }
    for (String part : PLACEHOLDER_PARTS) {
      if (letters.contains(part)) {
        return true;
      }
    }
    return false;
  }
}
