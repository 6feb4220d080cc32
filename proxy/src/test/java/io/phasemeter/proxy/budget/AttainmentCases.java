package io.phasemeter.proxy.budget;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * {@code promtool test rules} cases for the attainment rules: synthetic {@code
 * llm_slo_requests_total} series of two tenants in one pool, as the proxy counts them (a {@code
 * result="met"} series and a {@code result="missed"} one per first missed objective, each created
 * on its first request).
 */
final class AttainmentCases {
  /** The tenant whose requests miss: the budget's own, or {@code team-a} for a budget of all. */
  private static final String SLOW = "team-a";

  /** The other tenant: healthy beside a budget of all, as slow but not selected beside one's. */
  private static final String OTHER = "team-b";

  private AttainmentCases() {}

  /** The tenant the rule is expected to fire for. */
  static String slowTenant(Budget b) {
    return b.anyTenant() ? SLOW : b.tenant();
  }

  /** The labels the rule's alert takes from the series. */
  static Map<String, String> firing(AlertRule r) {
    return Map.of("llm_tenant", slowTenant(r.budget()));
  }

  /**
   * The single-window form, target {@code m}, allowed share missed {@code a = 1 − m}. Two tenants:
   * the slow one misses {@code 2a} and fires alone, with its attainment as the value; the other
   * misses {@code a/2} and holds (beside a budget of one tenant it misses {@code 2a} too and is not
   * selected). A tenant whose every request missed (no {@code met} series at all) fires at 0 %. A
   * tenant with series but no request judged over the window (0 ÷ 0) does not fire, nor does a pool
   * with no series at all.
   */
  static void simple(StringBuilder t, AlertRule r, JsonNode annotations) {
    Budget b = r.budget();
    double a = 1 - b.minAttainment();
    Duration eval = PromtoolRulesTest.evalTime(r);
    long steps = eval.toMinutes() + 1;
    long judged = 1000;
    long slowMissed = Math.round(judged * a * 2);
    long otherMissed = b.anyTenant() ? Math.round(judged * a / 2) : slowMissed;

    PromtoolRulesTest.caseHeader(t, r.alert() + " two tenants, one below its target", "1m");
    tenant(t, b, slowTenant(b), List.of(new long[] {steps, judged, slowMissed}));
    tenant(t, b, OTHER, List.of(new long[] {steps, judged, otherMissed}));
    String value = GoFormat.humanizePercentage((double) (judged - slowMissed) / judged);
    PromtoolRulesTest.expectation(t, r, annotations, true, eval, value, firing(r));

    PromtoolRulesTest.caseHeader(t, r.alert() + " every request missed", "1m");
    tenant(t, b, slowTenant(b), List.of(new long[] {steps, 10, 10}));
    PromtoolRulesTest.expectation(
        t, r, annotations, true, eval, GoFormat.humanizePercentage(0), firing(r));

    // Judged at the start (half missed), then nothing for longer than the window and the for.
    PromtoolRulesTest.caseHeader(t, r.alert() + " no request judged in the window", "1m");
    tenant(
        t,
        b,
        slowTenant(b),
        List.of(new long[] {3, judged, judged / 2}, new long[] {steps - 3, 0, 0}));
    PromtoolRulesTest.expectation(t, r, annotations, false, eval, null, Map.of());

    PromtoolRulesTest.caseHeader(t, r.alert() + " no series", "1m");
    PromtoolRulesTest.series(
        t, "up{job=\"phasemeter\"}", List.<long[]>of(new long[] {steps}), new long[] {0});
    PromtoolRulesTest.expectation(t, r, annotations, false, eval, null, Map.of());
  }

  /**
   * The burn-rate forms' series: {@code segments} of {steps, judged per step, missed per step} for
   * the slow tenant, and beside it the other tenant, healthy (nothing missed), or, beside a budget
   * of one tenant, missing as much but not selected.
   */
  static void burnSeries(StringBuilder t, AlertRule r, List<long[]> segments) {
    Budget b = r.budget();
    tenant(t, b, slowTenant(b), segments);
    List<long[]> other = new ArrayList<>();
    for (long[] s : segments) {
      other.add(new long[] {s[0], s[1], b.anyTenant() ? 0 : s[2]});
    }
    tenant(t, b, OTHER, other);
  }

  /**
   * One tenant's counters over {@code segments} of {steps, judged per step, missed per step}: a
   * {@code met} and a {@code missed} series, each left out when it never counts (the proxy creates
   * a series on its first request).
   */
  private static void tenant(StringBuilder t, Budget b, String tenant, List<long[]> segments) {
    long[] met = new long[segments.size()];
    long[] missed = new long[segments.size()];
    List<long[]> steps = new ArrayList<>();
    for (int i = 0; i < segments.size(); i++) {
      met[i] = segments.get(i)[1] - segments.get(i)[2];
      missed[i] = segments.get(i)[2];
      steps.add(new long[] {segments.get(i)[0]});
    }
    String labels =
        PromtoolRulesTest.join(
            "budget=\"" + b.name() + "\"",
            "llm_pool=\"" + PromtoolRulesTest.POOL + "\"",
            "llm_tenant=\"" + tenant + "\"");
    if (java.util.Arrays.stream(met).anyMatch(v -> v > 0)) {
      PromtoolRulesTest.series(
          t,
          AttainmentRules.METRIC + "{" + labels + ",result=\"met\",objective=\"none\"}",
          steps,
          met);
    }
    if (java.util.Arrays.stream(missed).anyMatch(v -> v > 0)) {
      PromtoolRulesTest.series(
          t,
          AttainmentRules.METRIC + "{" + labels + ",result=\"missed\",objective=\"server_ttft\"}",
          steps,
          missed);
    }
  }
}
