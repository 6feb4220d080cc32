package io.phasemeter.load.report;

import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.join.Pair;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The figures of each turn index of the requests that belong to sessions ({@code --sessions}, or
 * sessions of a replayed trace: {@link ClientResult#turn()} above 0), so that what a prefix cache
 * does to later turns shows: summary.json's {@code turns}, report.html's Turns table and the final
 * live table's lines per turn.
 *
 * <p>Per turn: requests finished ({@code finished}), succeeded ({@code ok}), the client TTFT of
 * those that succeeded (p50, p95, p99 of one {@link PhaseStats} per turn, as the run's {@code
 * client_ttft} and each step's are computed, so that one turn's equal the run's; the mean exact)
 * and their mean prompt length (usage.prompt_tokens as reported, else the tokens sent when exact).
 * Bounded: turns 1 to {@value #TURN_ROWS} have a row each, every later turn is summed into one more
 * row ({@code turn > 64}), whatever the number of turns.
 *
 * <p>Thread-safe.
 */
public final class TurnStats {
  /** Turn indexes with a row of their own; later ones share one. */
  public static final int TURN_ROWS = 64;

  /**
   * One turn index's figures.
   *
   * @param turn the turn, 1 to {@value #TURN_ROWS}; {@value #TURN_ROWS} + 1 for the row of every
   *     later turn
   * @param andLater whether the row sums every turn from {@code turn} on
   * @param finished requests of the turn that finished
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
      long finished,
      long ok,
      long ttftCount,
      double ttftP50Ms,
      double ttftP95Ms,
      double ttftP99Ms,
      double ttftMeanMs,
      double promptTokensMean) {

    /** {@code 3}, or {@code > 64} for the row of the later turns. */
    public String label() {
      return andLater ? "> " + TURN_ROWS : Integer.toString(turn);
    }
  }

  /** One turn index's running figures. */
  private static final class Acc {
    final PhaseStats stats = new PhaseStats();
    double ttftSumNanos;
    long promptCount;
    double promptSum;
  }

  private final Acc[] accs = new Acc[TURN_ROWS + 1];
  private boolean any;

  /** The figures of every request of {@code pairs} that belongs to a session. */
  public static TurnStats of(List<Pair> pairs) {
    TurnStats t = new TurnStats();
    for (Pair p : pairs) {
      t.add(p);
    }
    return t;
  }

  /** One finished request; one outside any session (turn 0) is not counted. */
  public void add(Pair pair) {
    ClientResult c = pair.client();
    if (c.turn() <= 0) {
      return;
    }
    synchronized (this) {
      any = true;
      int i = Math.min(c.turn(), TURN_ROWS + 1) - 1;
      Acc a = accs[i];
      if (a == null) {
        a = accs[i] = new Acc();
      }
      a.stats.add(pair);
      if (!c.ok()) {
        return;
      }
      if (c.ttftNanos() >= 0) {
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
      PhaseStats.Summary ttft = a.stats.summary("client_ttft");
      rows.add(
          new Row(
              i + 1,
              i == TURN_ROWS,
              a.stats.startedCount(),
              a.stats.okCount(),
              ttft.count(),
              ttft.p50(),
              ttft.p95(),
              ttft.p99(),
              ttft.count() == 0 ? Double.NaN : a.ttftSumNanos / ttft.count() / 1e6,
              a.promptCount == 0 ? Double.NaN : a.promptSum / a.promptCount));
    }
    return rows;
  }

  /**
   * The final table's lines per turn: nothing when no request belonged to a session, else a header
   * and one line per turn index, at most {@value #TURN_ROWS} + 1.
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
            "  %-11s %8s %7s %9s %9s %9s %9s %10s",
            "turn",
            "finished",
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
              "  %-11s %8d %7d %9s %9s %9s %9s %10s",
              "turn " + r.label(),
              r.finished(),
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
