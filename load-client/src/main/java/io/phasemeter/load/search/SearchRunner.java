package io.phasemeter.load.search;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.core.NanoClock;
import io.phasemeter.load.LoadOptions;
import io.phasemeter.load.LoadRun;
import io.phasemeter.load.budget.ClientBudgets;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Runs a capacity search: each probe a {@link LoadRun} of its own in this JVM (its log in {@code
 * probes/NN-rate-X/run.log}, its whole report beside it), judged by {@link ProbeJudge}; one
 * progress line per probe; then search.json and report.html. The client's own warm-up and floor run
 * before the first probe only (the JVM stays warm); every probe warms the server at its load first
 * ({@code --warmup-duration}).
 */
public final class SearchRunner {
  /** Exit codes of {@code phasemeter load search}. */
  public static final int FOUND = 0;

  public static final int USAGE = 2;
  public static final int BELOW_MIN_CAPACITY = 3;
  public static final int NO_VALID_PROBE = 4;
  public static final int UNFINISHED = 5;

  /**
   * An open-model probe offers at least this many requests: below {@code MIN_REQUESTS / duration}
   * req/s a probe lasts longer than {@code --duration}.
   */
  public static final int MIN_REQUESTS = 20;

  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * What the search is asked, beside the load settings.
   *
   * @param base the run options every probe starts from (the search's own command line)
   * @param probeDuration each probe's measured duration
   * @param warmupDuration the first probe's warm-up at its load, before its clock, rising from 0
   * @param laterWarmupDuration the later probes' warm-up at their load, at the full rate from its
   *     start (the JVM has compiled the load path in the first probe)
   * @param minAttainment the attainment a probe must reach when there are objectives
   * @param minCapacity below it the search exits 3 (0: never)
   * @param maxDuration the whole search's time
   */
  public record Options(
      LoadOptions base,
      CapacitySearch.Settings settings,
      Duration probeDuration,
      Duration warmupDuration,
      Duration laterWarmupDuration,
      double minAttainment,
      double minCapacity,
      Duration maxDuration,
      ClientBudgets budgets) {}

  private final Options o;
  private final PrintWriter out;
  private final NanoClock clock;
  private final ProbeJudge judge;
  private final Path dir;
  private int index;
  private long start;
  private final ProbeTime time;
  private final List<Probe> done = new ArrayList<>();

  public SearchRunner(Options options, PrintWriter out, NanoClock clock) {
    this.o = options;
    this.out = out;
    this.clock = clock;
    this.dir = options.base().out();
    this.time = new ProbeTime(clock, options.maxDuration());
    Map<String, Double> quantiles = new LinkedHashMap<>();
    for (ClientBudgets.Budget b : options.budgets().forModel(options.base().model())) {
      quantiles.put(b.name(), b.quantile());
    }
    this.judge = new ProbeJudge(quantiles, options.minAttainment());
  }

  /** Runs the search, writes search.json and report.html, and returns the exit code. */
  public int run() throws IOException {
    Files.createDirectories(dir.resolve("probes"));
    CapacitySearch.Settings s = o.settings();
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter load search: from %s%s, probes of %s after %s at load each (the first"
                + " after %s), resolution %s, %d confirmation blocks (seed %d), at most %s -> %s",
            Format.load(s.start(), s.closed()),
            Double.isInfinite(s.maxLoad()) ? "" : " up to " + Format.load(s.maxLoad()),
            human(o.probeDuration()),
            human(o.laterWarmupDuration()),
            human(o.warmupDuration()),
            s.closed() ? "1" : Format.pct(s.resolution()),
            s.repeats(),
            s.seed(),
            human(o.maxDuration()),
            dir));
    out.flush();
    start = clock.nanoTime();
    time.start();
    Instant startedAt = Instant.now();
    CapacitySearch.Outcome outcome = new CapacitySearch(s, this::probeAndRecord).run();
    SearchResult result =
        SearchResult.of(
            o, outcome, startedAt, (clock.nanoTime() - start) / 1e9, o.base().admin() != null);
    SearchResult.write(dir, result);
    Files.writeString(dir.resolve("report.html"), SearchHtml.render(result));
    finalLines(result);
    return result.exitCode();
  }

  private Probe probe(double load, Probe.Stage stage, int block) {
    long now = clock.nanoTime();
    boolean closed = o.settings().closed();
    Duration duration = probeDuration(load, closed, o.probeDuration());
    boolean first = index == 0;
    Duration warm = first ? o.warmupDuration() : o.laterWarmupDuration();
    if (!time.allows(warm, duration, o.base().joinGrace())) {
      return null;
    }
    int i = ++index;
    Path probeDir =
        dir.resolve("probes")
            .resolve(
                String.format(
                    Locale.ROOT, "%02d-%s-%s", i, closed ? "concurrency" : "rate", name(load)));
    LoadOptions po =
        o.base()
            .withLoad(
                closed ? 0 : load,
                closed ? (int) load : 0,
                duration,
                first ? o.base().warmup() : 0,
                warm,
                first && o.base().clientFloor(),
                probeDir,
                o.base().seed() + i);
    int code;
    String clientError = null;
    try {
      Files.createDirectories(probeDir);
      try (PrintWriter log =
          new PrintWriter(
              Files.newBufferedWriter(probeDir.resolve("run.log"), StandardCharsets.UTF_8), true)) {
        try {
          code = LoadRun.execute(po, log, log, !first);
        } catch (RuntimeException e) {
          code = LoadRun.INVALID_RUN;
          clientError = e.toString();
        }
      }
    } catch (IOException e) {
      code = LoadRun.INVALID_RUN;
      clientError = e.toString();
    }
    JsonNode summary = null;
    try {
      if (Files.exists(probeDir.resolve("summary.json"))) {
        summary = JSON.readTree(probeDir.resolve("summary.json").toFile());
      }
    } catch (IOException e) {
      clientError = "summary.json unreadable: " + e.getMessage();
    }
    time.ended(now, warm, duration, first);
    Probe p =
        judge.judge(
            new ProbeJudge.Run(
                i,
                load,
                stage,
                block,
                probeDir,
                code,
                summary,
                clientError,
                logReasons(probeDir.resolve("run.log"), code),
                first));
    progress(p);
    return p;
  }

  /** A probe, then search.json rewritten with {@code status: running} and every probe so far. */
  private Probe probeAndRecord(double load, Probe.Stage stage, int block) {
    Probe p = probe(load, stage, block);
    if (p != null) {
      done.add(p);
      try {
        SearchResult.writeRunning(dir, o, done);
      } catch (IOException e) {
        out.println("phasemeter load search: search.json not written: " + e.getMessage());
      }
    }
    return p;
  }

  private void progress(Probe p) {
    boolean closed = o.settings().closed();
    String stage = p.stage() == Probe.Stage.CONFIRM ? "confirm " + p.block() : p.stage().key();
    String verdict =
        switch (p.verdict()) {
          case PASS -> "pass (" + passText(p) + ")";
          case FAIL -> "fail (" + String.join("; ", p.reasons()) + ")";
          case INVALID -> "invalid (" + String.join("; ", p.reasons()) + ")";
        };
    out.println(
        String.format(
            Locale.ROOT,
            "[probe %d] %-9s %s … %s",
            p.index(),
            stage,
            Format.load(p.load(), closed),
            verdict));
    for (String n : p.notes()) {
      out.println("          note: " + n);
    }
    out.flush();
  }

  /** What a pass held: the budgeted phases' p95 and the attainment. */
  private String passText(Probe p) {
    List<String> parts = new ArrayList<>();
    if (Double.isFinite(p.attainment())) {
      parts.add("attainment " + Format.pct(p.attainment()));
    }
    for (ClientBudgets.Budget b : o.budgets().forModel(o.base().model())) {
      for (String phase : b.limitsMs().keySet()) {
        String key = ClientBudgets.canonicalKey(phase);
        String text = key + " p95 " + Format.ms(p.p95(key));
        if (!parts.contains(text) && parts.size() < 4) {
          parts.add(text);
        }
      }
    }
    parts.add(String.format(Locale.ROOT, "%.2f req/s ok", p.requestThroughput()));
    return String.join(", ", parts);
  }

  private void finalLines(SearchResult r) {
    boolean closed = o.settings().closed();
    Capacity c = r.capacity();
    String capacity;
    if (Double.isNaN(c.rate())) {
      capacity = "no capacity found";
    } else {
      capacity =
          "capacity "
              + (c.atLeast() ? "at least " : "")
              + Format.load(c.rate(), closed)
              + (Double.isFinite(c.ci95Low())
                  ? " (95 % interval "
                      + Format.load(c.ci95Low())
                      + " – "
                      + Format.load(c.ci95High())
                      + ")"
                  : "");
    }
    LimitingPhase l = r.limiting();
    String limiting =
        l == null
            ? ""
            : l.phase() == null
                ? "; no limiting phase named: " + l.reason()
                : "; limiting phase: " + l.phase() + " (page: " + l.owner() + "): " + l.reason();
    for (String n : r.outcome().notes()) {
      out.println("phasemeter load search: note: " + n);
    }
    out.println("phasemeter load search: " + capacity + limiting);
    out.println(
        "phasemeter load search: "
            + r.exitReason()
            + " (exit "
            + r.exitCode()
            + "); search.json and report.html in "
            + dir.toAbsolutePath());
    out.flush();
  }

  /**
   * The run's own reasons: the lines under "INVALID RUN (exit 4):" or "budget breached", or the
   * last lines of the log when it exited otherwise.
   */
  static List<String> logReasons(Path log, int code) {
    List<String> lines;
    try {
      lines = Files.readAllLines(log, StandardCharsets.UTF_8);
    } catch (IOException e) {
      return List.of();
    }
    List<String> out = new ArrayList<>();
    boolean in = false;
    for (String l : lines) {
      if (l.startsWith("phasemeter load: INVALID RUN")) {
        in = true;
        continue;
      }
      if (in) {
        if (l.startsWith("  ")) {
          out.add(l.trim());
        } else {
          in = false;
        }
      }
    }
    if (out.isEmpty() && code != LoadRun.OK && code != LoadRun.BREACHED) {
      for (int i = Math.max(0, lines.size() - 3); i < lines.size(); i++) {
        if (!lines.get(i).isBlank()) {
          out.add(lines.get(i).trim());
        }
      }
    }
    return out;
  }

  /** A probe's duration: {@code --duration}, longer at a rate that would offer too few requests. */
  static Duration probeDuration(double load, boolean closed, Duration duration) {
    if (closed || load * duration.toNanos() / 1e9 >= MIN_REQUESTS) {
      return duration;
    }
    return Duration.ofMillis((long) Math.ceil(MIN_REQUESTS / load * 1000));
  }

  /** A load as a directory-safe name: {@code 24}, {@code 12.5}. */
  private static String name(double load) {
    return Format.load(load).replace('-', '_');
  }

  static String human(Duration d) {
    return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : d.toMillis() + " ms";
  }
}
