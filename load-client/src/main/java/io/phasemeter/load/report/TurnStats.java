package io.phasemeter.load.report;

import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.join.Pair;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.HdrHistogram.Histogram;

/**
 * The figures of each turn index of the requests that belong to sessions ({@code --sessions}, or
 * sessions of a replayed trace: {@link ClientResult#turn()} above 0), so that what a prefix cache
 * does to later turns shows: summary.json's {@code turns}, report.html's Turns table and the final
 * live table's lines per turn.
 *
 * <p>Per turn: requests finished ({@code sent}), succeeded ({@code ok}), the client TTFT of those
 * that succeeded (p50, p95, p99 from an HdrHistogram of 3 significant digits, microsecond units;
 * the mean exact) and their mean prompt length (usage.prompt_tokens as reported, else the tokens
 * sent when exact). Bounded: turns 1 to {@value #MAX_TURNS} have a row each, every later turn is
 * summed into one more row ({@code turn > 64}), whatever the number of turns.
 *
 * <p>Thread-safe.
 */
public final class TurnStats {
  /** Turn indexes with a row of their own; later ones share one. */
  public static final int MAX_TURNS = 64;

  /**
   * One turn index's figures.
   *
   * @param turn the turn, 1 to {@value #MAX_TURNS}; {@value #MAX_TURNS} + 1 for the row of every
   *     later turn
   * @param andLater whether the row sums every turn from {@code turn} on
   * @param sent requests of the turn that finished
   * @param ok those that succeeded
   * @param ttftCount successful requests with a TTFT
   * @param ttftP50Ms client TTFT p50 in milliseconds (NaN without any)
   * @param ttftP95Ms p95
   * @param ttftP99Ms p99
   * @param ttftMeanMs mean, exact
   * @param promptTokensMean mean prompt length of the successful requests (NaN when unknown)
   */
  public record Row(
      int turn,
      boolean andLater,
      long sent,
      long ok,
      long ttftCount,
      double ttftP50Ms,
      double ttftP95Ms,
      double ttftP99Ms,
      double ttftMeanMs,
      double promptTokensMean) {

    /** {@code 3}, or {@code > 64} for the row of the later turns. */
    public String label() {
      return andLater ? "> " + MAX_TURNS : Integer.toString(turn);
    }
  }

  /** One turn index's running figures. */
  private static final class Acc {
    long sent;
    long ok;
    Histogram ttftMicros;
    long ttftCount;
    double ttftSumNanos;
    long promptCount;
    double promptSum;
  }

  private final Acc[] accs = new Acc[MAX_TURNS + 1];
  private boolean any;

  /** The figures of every request of {@code pairs} that belongs to a session. */
  public static TurnStats of(List<Pair> pairs) {
    TurnStats t = new TurnStats();
    for (Pair p : pairs) {
      t.add(p.client());
    }
    return t;
  }

  /** One finished request; one outside any session (turn 0) is not counted. */
  public void add(ClientResult c) {
    if (c.turn() <= 0) {
      return;
    }
    synchronized (this) {
      any = true;
      int i = Math.min(c.turn(), MAX_TURNS + 1) - 1;
      Acc a = accs[i];
      if (a == null) {
        a = accs[i] = new Acc();
      }
      a.sent++;
      if (!c.ok()) {
        return;
      }
      a.ok++;
      if (c.ttftNanos() >= 0) {
        if (a.ttftMicros == null) {
          a.ttftMicros = new Histogram(3);
        }
        a.ttftMicros.recordValue(Math.max(0, c.ttftNanos() / 1000));
        a.ttftCount++;
        a.ttftSumNanos += c.ttftNanos();
      }
      long prompt = c.usagePromptTokens() >= 0 ? c.usagePromptTokens() : c.promptTokens();
      if (prompt >= 0) {
        a.promptCount++;
        a.promptSum += prompt;
      }
    }
  }

  /** Whether any request belonged to a session. */
  public synchronized boolean isEmpty() {
    return !any;
  }

  /** The rows of the turns that had requests, in turn order; the later turns' row last. */
  public synchronized List<Row> rows() {
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < accs.length; i++) {
      Acc a = accs[i];
      if (a == null) {
        continue;
      }
      Histogram h = a.ttftMicros;
      rows.add(
          new Row(
              i + 1,
              i == MAX_TURNS,
              a.sent,
              a.ok,
              a.ttftCount,
              quantileMs(h, 50),
              quantileMs(h, 95),
              quantileMs(h, 99),
              a.ttftCount == 0 ? Double.NaN : a.ttftSumNanos / a.ttftCount / 1e6,
              a.promptCount == 0 ? Double.NaN : a.promptSum / a.promptCount));
    }
    return rows;
  }

  private static double quantileMs(Histogram h, double percentile) {
    return h == null || h.getTotalCount() == 0
        ? Double.NaN
        : h.getValueAtPercentile(percentile) / 1e3;
  }

  /**
   * The final table's lines per turn: nothing when no request belonged to a session, else a header
   * and one line per turn index, at most {@value #MAX_TURNS} + 1.
   */
  public void print(PrintWriter out) {
    List<Row> rows = rows();
    if (rows.isEmpty()) {
      return;
    }
    out.println(
        "  per turn (client_ttft in ms, of the successful requests; prompt tokens as reported):");
    out.println(
        String.format(
            Locale.ROOT,
            "  %-11s %7s %7s %9s %9s %9s %9s %10s",
            "turn",
            "sent",
            "ok",
            "ttft p50",
            "ttft p95",
            "ttft p99",
            "ttft mean",
            "prompt tok"));
    for (Row r : rows) {
      out.println(
          String.format(
              Locale.ROOT,
              "  %-11s %7d %7d %9s %9s %9s %9s %10s",
              "turn " + r.label(),
              r.sent(),
              r.ok(),
              ms(r.ttftP50Ms()),
              ms(r.ttftP95Ms()),
              ms(r.ttftP99Ms()),
              ms(r.ttftMeanMs()),
              Double.isNaN(r.promptTokensMean())
                  ? "-"
                  : String.format(Locale.ROOT, "%.1f", r.promptTokensMean())));
    }
    out.flush();
  }

  private static String ms(double v) {
    return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%.1f", v);
  }
}
