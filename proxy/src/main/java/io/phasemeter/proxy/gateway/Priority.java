package io.phasemeter.proxy.gateway;

import java.util.Locale;

/** A key's scheduling priority in the slot queue; the keys file and {@code x-priority} spell it. */
public enum Priority {
  HIGH("high"),
  NORMAL("normal"),
  LOW("low");

  private final String label;

  Priority(String label) {
    this.label = label;
  }

  /** The lower-case spelling used in the keys file, the header and span attributes. */
  public String label() {
    return label;
  }

  /**
   * Parses {@code high}, {@code normal} or {@code low}, ignoring case and surrounding blanks.
   *
   * @throws IllegalArgumentException naming the accepted values when {@code text} is none of them
   */
  public static Priority parse(String text) {
    String t = text == null ? "" : text.trim().toLowerCase(Locale.ROOT);
    for (Priority p : values()) {
      if (p.label.equals(t)) {
        return p;
      }
    }
    throw new IllegalArgumentException(
        "'" + (text == null ? "" : text) + "' is not a priority (use high, normal or low)");
  }
}
