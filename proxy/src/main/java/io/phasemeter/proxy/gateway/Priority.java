package io.phasemeter.proxy.gateway;

import java.util.Locale;

/** A request's priority in the slot queue: higher is served first (DESIGN.md §9). */
public enum Priority {
  HIGH("high"),
  NORMAL("normal"),
  LOW("low");

  private final String label;

  Priority(String label) {
    this.label = label;
  }

  /** The lowercase name used in config, headers, spans ({@code llm.priority}) and records. */
  public String label() {
    return label;
  }

  /**
   * Parses {@code high}, {@code normal} or {@code low} (any case, surrounding blanks ignored).
   *
   * @throws IllegalArgumentException for anything else
   */
  public static Priority parse(String text) {
    if (text != null) {
      String t = text.trim().toLowerCase(Locale.ROOT);
      for (Priority p : values()) {
        if (p.label.equals(t)) {
          return p;
        }
      }
    }
    throw new IllegalArgumentException(
        "priority: must be high, normal or low (got " + (text == null ? "nothing" : text) + ")");
  }
}
