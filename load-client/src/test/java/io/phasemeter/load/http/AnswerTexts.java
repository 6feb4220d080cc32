package io.phasemeter.load.http;

/** Fills an {@link AnswerText} as an exchange would, for tests outside this package. */
public final class AnswerTexts {
  private AnswerTexts() {}

  /** Appends {@code content} as one content event's delta. */
  public static void append(AnswerText answer, String content) {
    answer.append(content);
  }
}
