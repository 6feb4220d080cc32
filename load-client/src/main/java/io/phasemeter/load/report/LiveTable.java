package io.phasemeter.load.report;

import io.phasemeter.core.Phases;
import io.phasemeter.load.budget.BudgetResult;
import io.phasemeter.load.budget.ClientBudgets;
import io.phasemeter.load.workload.Api;
import java.io.PrintWriter;
import java.util.List;
import java.util.Locale;

/** The compact table printed every few seconds while a run goes: window and cumulative. */
public final class LiveTable {
  /**
   * The phases shown, in the catalogue's report order; the request's own root and upload are in the
   * report, not here, and rows without data are skipped.
   */
  static final List<String> ROWS =
      Phases.inReportOrder().stream()
          .filter(p -> p != Phases.SERVER_ROOT && p != Phases.RECEIVE)
          .map(Phases::key)
          .toList();

  private LiveTable() {}

  public static void print(
      PrintWriter out,
      String header,
      PhaseStats window,
      PhaseStats total,
      List<BudgetResult> breaches,
      java.util.function.Function<BudgetResult, String> culprit) {
    print(out, header, window, total, breaches, culprit, null);
  }

  /**
   * One table; for an {@code api} without some phases (embeddings: TTFT, TPOT, ITL) a line under
   * the rows names them as not applicable, where a row would otherwise just be missing.
   */
  public static void print(
      PrintWriter out,
      String header,
      PhaseStats window,
      PhaseStats total,
      List<BudgetResult> breaches,
      java.util.function.Function<BudgetResult, String> culprit,
      Api api) {
    out.println(header);
    out.println(
        String.format(
            Locale.ROOT,
            "  %-17s %9s %9s %9s | %9s %9s %9s %7s",
            "phase (ms)",
            "win p50",
            "win p95",
            "win p99",
            "all p50",
            "all p95",
            "all p99",
            "n"));
    for (String name : ROWS) {
      PhaseStats.Summary all = total.summary(name);
      if (all.count() == 0 || (api != null && api.notApplicable().contains(name))) {
        continue;
      }
      PhaseStats.Summary w = window.summary(name);
      out.println(
          String.format(
              Locale.ROOT,
              "  %-17s %9s %9s %9s | %9s %9s %9s %7d%s",
              name,
              fmt(w.p50()),
              fmt(w.p95()),
              fmt(w.p99()),
              fmt(all.p50()),
              fmt(all.p95()),
              fmt(all.p99()),
              all.count(),
              total.negativeCount(name) > 0
                  ? "  (" + total.negativeCount(name) + " negative!)"
                  : ""));
    }
    if (api != null && !api.notApplicable().isEmpty()) {
      out.println(notApplicableLine(api));
    }
    for (BudgetResult b : breaches) {
      out.println(breachLine(b, culprit.apply(b)));
    }
    out.flush();
  }

  /** The line naming the phases {@code api} does not have. */
  static String notApplicableLine(Api api) {
    return "  "
        + String.join(", ", api.notApplicable())
        + ": not applicable ("
        + api.notApplicableReason()
        + ")";
  }

  /**
   * One BREACH line; {@code culprit} is the phase that broke it (the phase itself, or the largest
   * part of a sum such as total or TTFT), and it decides whom to page.
   */
  public static String breachLine(BudgetResult b, String culprit) {
    boolean rate = b.phase().equals("error_rate") || b.phase().equals("join_coverage");
    String because = culprit == null || culprit.equals(b.phase()) ? "" : ", mostly " + culprit;
    return String.format(
        Locale.ROOT,
        "  BREACH %s: %s %s %s %s%s (page: %s)",
        b.name(),
        b.phase(),
        rate ? String.format(Locale.ROOT, "%.4f", b.observedMs()) : fmt(b.observedMs()) + " ms",
        b.phase().equals("join_coverage") ? "<" : ">",
        rate ? String.format(Locale.ROOT, "%.4f", b.limitMs()) : fmt(b.limitMs()) + " ms limit",
        because,
        rate
            ? "the run's validity gate"
            : ClientBudgets.owner(culprit == null ? b.phase() : culprit));
  }

  static String fmt(double ms) {
    if (Double.isNaN(ms)) {
      return "-";
    }
    if (Math.abs(ms) >= 1000) {
      return String.format(Locale.ROOT, "%.0f", ms);
    }
    return String.format(Locale.ROOT, "%.1f", ms);
  }
}
