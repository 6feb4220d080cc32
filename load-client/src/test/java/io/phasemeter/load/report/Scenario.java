package io.phasemeter.load.report;

import static io.phasemeter.load.report.Fixtures.ns;

import io.phasemeter.load.budget.BudgetResult;
import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import io.phasemeter.load.join.Pair;
import io.phasemeter.load.schedule.StepInfo;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * A made-up stepped run past its knee: three 10-second steps at 4, 8 and 16 req/s; the queue grows
 * with the rate; some requests fail, a few never join, two have a negative envelope.
 */
final class Scenario {
  private Scenario() {}

  static final double[] RATES = {4, 8, 16};
  static final double STEP_SECONDS = 10;

  static ReportInput build(long seed) {
    Random random = new Random(seed);
    List<Pair> pairs = new ArrayList<>();
    List<StepInfo> steps = new ArrayList<>();
    PhaseStats stats = PhaseStats.create();
    long seq = 0;
    long start = 1_000_000_000L; // the monotonic clock does not start at 0
    long invalid = 0;
    for (int step = 0; step < RATES.length; step++) {
      double rate = RATES[step];
      long stepStart = start + ns(step * STEP_SECONDS * 1000);
      long sent = 0;
      long last = stepStart;
      int n = (int) (rate * STEP_SECONDS);
      for (int i = 0; i < n; i++) {
        double atMs = (step * STEP_SECONDS + i / rate) * 1000;
        double queue = step == 2 ? 200 + 1500.0 * i / n + random.nextInt(300) : random.nextInt(5);
        double generation = 800 + random.nextGaussian() * 100 + step * 150;
        double root = 1 + 0.5 + queue + generation + 0.5 + 0.5;
        double envelope = 3 + Math.abs(random.nextGaussian() * 2);
        if (seq == 17 || seq == 18) {
          envelope = -4; // a clock or unit mistake, to be shown, not hidden
        }
        double serverTtft = queue + 120 + random.nextInt(40);
        ErrorClass error = ErrorClass.NONE;
        if (step == 2 && i % 23 == 5) {
          error = ErrorClass.HTTP_5XX;
        } else if (seq == 30) {
          error = ErrorClass.INVALID;
          invalid++;
        }
        ClientResult base =
            Fixtures.client(seq, step, atMs, root + envelope, serverTtft + envelope, error);
        ClientResult c =
            new ClientResult(
                base.seq(),
                base.traceId(),
                i % 3 == 0 ? "doc-qa" : "1k",
                step,
                start + ns(atMs),
                start + ns(atMs + random.nextDouble()),
                base.transportSetupNanos(),
                base.ttfbNanos(),
                base.ttftNanos(),
                base.totalNanos(),
                ns(8 + step * 2 + random.nextDouble()),
                base.itlCount(),
                base.status(),
                error,
                error == ErrorClass.INVALID ? "usage.completion_tokens 12, \"expected\" 100" : null,
                base.promptTokens(),
                base.maxTokens(),
                base.usagePromptTokens(),
                base.usageCompletionTokens(),
                null);
        boolean joins = seq % 29 != 3;
        Pair p = new Pair(c, joins ? Fixtures.server(seq, root, queue, serverTtft) : null);
        pairs.add(p);
        stats.add(p);
        if (c.ok()) {
          for (int k = 0; k < 20; k++) {
            stats.addItl(ns(8 + step * 2 + random.nextDouble() * 4));
          }
        }
        sent++;
        last = start + ns(atMs);
        seq++;
      }
      steps.add(new StepInfo(step, rate, 0, stepStart, last, sent, step == 2 ? 3 : 0));
    }
    long end = start + ns(RATES.length * STEP_SECONDS * 1000 + 2500);
    long ok = pairs.stream().filter(p -> p.client().ok()).count();
    Map<String, Object> conditions = new LinkedHashMap<>();
    conditions.put("model", "sim-llama");
    conditions.put("target_url", "http://127.0.0.1:8080/v1/chat/completions?a=1&b=<2>");
    conditions.put("arrival", "steps 4,8,16 req/s, 10s each, constant");
    conditions.put("note", "<script>alert('x')</script>");
    conditions.put("admin_url", null);
    conditions.put("not_a_number", Double.NaN);
    conditions.put("workload", Map.of("profile", "doc-qa", "max_tokens", 100));
    List<BudgetResult> budgets =
        List.of(
            new BudgetResult(
                "chat-interactive",
                "network_envelope",
                120,
                stats.quantileMs("network_envelope", 0.95),
                false),
            new BudgetResult(
                "chat-interactive", "queue", 250, stats.quantileMs("queue", 0.95), true),
            new BudgetResult(
                "chat-interactive", "total", 6000, stats.quantileMs("client_total", 0.95), false),
            new BudgetResult("chat-interactive", "gateway", 60, Double.NaN, false),
            new BudgetResult(
                "chat-interactive",
                "error_rate",
                0.01,
                (double) (pairs.size() - ok) / pairs.size(),
                true),
            new BudgetResult(
                "chat-interactive", "join_coverage", 0.95, stats.joinCoverage(), false));
    return new ReportInput(
        pairs,
        steps,
        start,
        end,
        conditions,
        pairs.size(),
        ok,
        pairs.size() - ok,
        3,
        invalid,
        pairs.size() / ((end - start) / 1e9),
        budgets,
        stats);
  }
}
