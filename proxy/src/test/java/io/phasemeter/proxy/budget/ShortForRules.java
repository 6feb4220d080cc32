package io.phasemeter.proxy.budget;

import java.time.Duration;
import java.util.regex.Pattern;

/**
 * The generated rules for a test that runs a real Prometheus: {@link AlertRules#render} with every
 * {@code for:} shortened, since the generator's shortest is one minute. With a budget window of a
 * few seconds ({@code window: 10s}, scraped and evaluated every second) an alert fires within
 * seconds of its condition.
 */
public final class ShortForRules {
  private static final Pattern FOR_LINE = Pattern.compile("(?m)^(\\s+)for: \\S+$");

  private ShortForRules() {}

  /** The rules of {@code budgets}, every {@code for:} replaced by {@code forDuration}. */
  public static String render(Budgets budgets, Duration forDuration) {
    String text = AlertRules.render(budgets, "test budgets");
    return FOR_LINE
        .matcher(text)
        .replaceAll("$1for: " + io.phasemeter.core.Durations.format(forDuration));
  }
}
