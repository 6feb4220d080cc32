package io.phasemeter.load.search;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.load.LoadRun;
import io.phasemeter.load.workload.PromptSalt;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Map;

/**
 * A finished search: the outcome, the capacity and the limiting phase, the criteria and conditions,
 * and the exit code; {@link #write} puts it in search.json.
 *
 * @param objectives summary.json's {@code goodput.objectives_ms} and {@code source} from the first
 *     probe that had them, or null
 * @param conditions the first valid probe's conditions, then the search's own settings
 */
public record SearchResult(
    SearchRunner.Options options,
    CapacitySearch.Outcome outcome,
    Capacity capacity,
    LimitingPhase limiting,
    ObjectNode objectives,
    ObjectNode conditions,
    int exitCode,
    String exitReason) {

  private static final ObjectMapper JSON =
      new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  /** Puts an outcome together. */
  static SearchResult of(
      SearchRunner.Options o,
      CapacitySearch.Outcome outcome,
      Instant startedAt,
      double tookSeconds,
      boolean joined) {
    boolean closed = o.settings().closed();
    Capacity capacity = Capacity.of(outcome, closed);
    // No load held (or none had when the time ran out): the capacity lies below every probe, and
    // the lowest failing one names what gave way, as a fault present at every load needs.
    CapacitySearch.Status status = outcome.status();
    LimitingPhase limiting =
        status == CapacitySearch.Status.FATAL || status == CapacitySearch.Status.NO_VALID_PROBE
            ? null
            : LimitingPhase.decide(outcome.probes(), capacity.rate(), joined, closed);
    ObjectNode objectives = null;
    ObjectNode conditions = JsonNodeFactory.instance.objectNode();
    for (Probe p : outcome.probes()) {
      JsonNode s = read(p.dir());
      if (s == null) {
        continue;
      }
      if (objectives == null && s.path("goodput").isObject()) {
        objectives = JsonNodeFactory.instance.objectNode();
        objectives.set("objectives_ms", s.path("goodput").path("objectives_ms"));
        objectives.set("source", s.path("goodput").path("source"));
      }
      if (conditions.isEmpty() && s.path("conditions").isObject()) {
        conditions.setAll((ObjectNode) s.path("conditions").deepCopy());
        // Each probe's own: its seed, its prompt salt, its load, its warm-up.
        for (String k :
            new String[] {
              "seed", "prompt_salt", "arrival", "started_at", "trace_id_prefix", "warmup_at_load_s"
            }) {
          conditions.remove(k);
        }
      }
    }
    ObjectNode search = conditions.putObject("search");
    CapacitySearch.Settings s = o.settings();
    search.put("start", s.start());
    num(search, "max_rate", s.maxLoad());
    search.put("floor", s.floor());
    search.put("probe_duration_s", o.probeDuration().toMillis() / 1000.0);
    search.put("warmup_duration_s", o.warmupDuration().toMillis() / 1000.0);
    search.put("later_warmup_duration_s", o.laterWarmupDuration().toMillis() / 1000.0);
    search.put("repeats", s.repeats());
    search.put("seed", s.seed());
    // A salt the user gave holds for every probe; else each probe drew its own (its conditions).
    PromptSalt salt = o.base().promptSalt();
    search.put("prompt_salt", salt.drawn() ? "per probe" : salt.hex());
    search.put("max_duration_s", o.maxDuration().toSeconds());
    search.put("started_at", startedAt.toString());
    search.put("took_s", Math.round(tookSeconds * 10) / 10.0);
    search.put("probes", outcome.probes().size());
    int code;
    String reason;
    switch (outcome.status()) {
      case FATAL -> {
        Probe f = outcome.fatalProbe();
        code =
            f != null && f.exitCode() == LoadRun.USAGE
                ? SearchRunner.USAGE
                : SearchRunner.NO_VALID_PROBE;
        reason =
            "the search could not start: "
                + (f == null ? "?" : String.join("; ", f.reasons()))
                + (f == null ? "" : " (see " + f.dir().resolve("run.log") + ")");
      }
      case NO_VALID_PROBE -> {
        code = SearchRunner.NO_VALID_PROBE;
        reason = "no probe was valid";
      }
      case NOTHING_HOLDS -> {
        code = SearchRunner.BELOW_MIN_CAPACITY;
        reason = "no load held: the capacity is below the lowest load probed";
      }
      case OUT_OF_TIME -> {
        if (o.minCapacity() > 0 && outcome.fail() != null && outcome.fail() <= o.minCapacity()) {
          // What ran already shows it: a load at or below --min-capacity gave way.
          code = SearchRunner.BELOW_MIN_CAPACITY;
          reason =
              "the search did not finish within --max-duration, but "
                  + Format.load(outcome.fail(), closed)
                  + " already failed: the capacity is below --min-capacity "
                  + Format.load(o.minCapacity(), closed);
        } else {
          code = SearchRunner.UNFINISHED;
          reason =
              "the search did not finish within --max-duration; the bracket so far is reported";
        }
      }
      default -> {
        if (o.minCapacity() > 0 && capacity.rate() < o.minCapacity()) {
          code = SearchRunner.BELOW_MIN_CAPACITY;
          reason = "the capacity is below --min-capacity " + Format.load(o.minCapacity(), closed);
        } else {
          code = SearchRunner.FOUND;
          reason = capacity.atLeast() ? "found a lower bound of the capacity" : "capacity found";
        }
      }
    }
    return new SearchResult(o, outcome, capacity, limiting, objectives, conditions, code, reason);
  }

  private static JsonNode read(Path dir) {
    Path f = dir.resolve("summary.json");
    if (!Files.exists(f)) {
      return null;
    }
    try {
      return JSON.readTree(f.toFile());
    } catch (IOException e) {
      return null;
    }
  }

  /** Writes search.json into {@code dir}. */
  static void write(Path dir, SearchResult r) throws IOException {
    JSON.writeValue(dir.resolve("search.json").toFile(), json(r));
  }

  static ObjectNode json(SearchResult r) {
    boolean closed = r.options().settings().closed();
    ObjectNode root = JsonNodeFactory.instance.objectNode();
    root.put("v", 1);
    root.put("status", r.outcome().status().name().toLowerCase(java.util.Locale.ROOT));
    Capacity c = r.capacity();
    ObjectNode cap = root.putObject("capacity");
    num(cap, "rate", c.rate());
    num(cap, "ci95_low", c.ci95Low());
    num(cap, "ci95_high", c.ci95High());
    num(cap, "output_tokens_per_s", c.outputTokensPerS());
    num(cap, "goodput", c.goodput());
    cap.put("model", closed ? "closed" : "open");
    cap.put("unit", closed ? "concurrency" : "req/s");
    cap.put("at_least", c.atLeast());
    num(cap, "measured_at", c.measuredAt());
    num(cap, "crossing_mean", c.crossingMean());
    cap.put("censored_blocks", c.censoredBlocks());
    cap.put("method", c.method());
    CapacitySearch.Outcome o = r.outcome();
    ObjectNode bracket = cap.putObject("bracket");
    num(bracket, "pass", o.pass() == null ? Double.NaN : o.pass());
    num(bracket, "fail", o.fail() == null ? Double.NaN : o.fail());
    ArrayNode rates = cap.putArray("confirm_rates");
    o.confirmRates().forEach(rates::add);
    Confirmation.Result conf = o.confirmation();
    if (conf != null) {
      num(cap, "passed_every_block", conf.passedEveryBlock());
      ArrayNode blocks = cap.putArray("blocks");
      for (Confirmation.Block b : conf.blocks()) {
        ObjectNode bn = blocks.addObject();
        bn.put("block", b.block());
        num(bn, "rate", b.load());
        if (b.censored() == null) {
          bn.putNull("censored");
        } else {
          bn.put("censored", b.censored());
        }
        ArrayNode between = bn.putArray("between");
        b.between().forEach(between::add);
      }
    }
    LimitingPhase l = r.limiting();
    if (l == null) {
      root.putNull("limiting_phase");
    } else {
      ObjectNode lp = root.putObject("limiting_phase");
      lp.put("phase", l.phase());
      lp.put("owner", l.owner());
      lp.put("reason", l.reason());
      ArrayNode ties = lp.putArray("ties");
      for (LimitingPhase.Tie t : l.ties()) {
        ObjectNode tn = ties.addObject();
        tn.put("phase", t.phase());
        tn.put("owner", t.owner());
        num(tn, "figure", t.figure());
      }
      lp.put("basis", l.basis());
      lp.put("budget_phase", l.budgetPhase());
      lp.put("objective", l.objective());
      if (l.passProbe() == null) {
        lp.putNull("pass_probe");
      } else {
        lp.put("pass_probe", l.passProbe());
      }
      if (l.failProbe() == null) {
        lp.putNull("fail_probe");
      } else {
        lp.put("fail_probe", l.failProbe());
      }
    }
    probes(root.putArray("probes"), o.probes(), conf, r.options());
    ObjectNode criteria = root.putObject("criteria");
    var base = r.options().base();
    criteria.put("budgets_file", base.budgets() == null ? null : base.budgets().toString());
    criteria.put("budgets_sha256", r.options().budgets().sha256());
    if (r.objectives() == null) {
      criteria.putNull("objectives");
    } else {
      criteria.set("objectives", r.objectives());
    }
    criteria.put("min_attainment", r.options().minAttainment());
    if (closed) {
      criteria.put("resolution", "1 (concurrency)");
    } else {
      criteria.put("resolution", r.options().settings().resolution());
    }
    criteria.put("max_error_rate", base.maxErrorRate());
    criteria.put("schedule_lag_p95_limit_ms", ProbeJudge.SCHEDULE_LAG_LIMIT_MS);
    num(criteria, "min_capacity", r.options().minCapacity());
    ArrayNode notes = root.putArray("notes");
    o.notes().forEach(notes::add);
    root.set("conditions", r.conditions());
    root.put("exit_code", r.exitCode());
    root.put("exit_reason", r.exitReason());
    return root;
  }

  /**
   * Writes search.json while the search runs ({@code status: running}): the probes so far, so that
   * a search killed before its end (Ctrl-C, a Job's deadline) leaves its probes listed.
   */
  static void writeRunning(Path dir, SearchRunner.Options o, java.util.List<Probe> probes)
      throws IOException {
    ObjectNode root = JsonNodeFactory.instance.objectNode();
    root.put("v", 1);
    root.put("status", "running");
    root.putNull("capacity");
    root.putNull("limiting_phase");
    probes(root.putArray("probes"), probes, null, o);
    JSON.writeValue(dir.resolve("search.json").toFile(), root);
  }

  /** Each probe; a confirmation probe says whether its block counted ({@code counted}). */
  private static void probes(
      ArrayNode probes,
      java.util.List<Probe> list,
      Confirmation.Result conf,
      SearchRunner.Options options) {
    for (Probe p : list) {
      ObjectNode pn = probes.addObject();
      pn.put("index", p.index());
      pn.put("rate", p.load());
      pn.put("stage", p.stage().key());
      if (p.block() > 0) {
        pn.put("block", p.block());
      }
      pn.put("verdict", p.verdict().key());
      if (p.stage() == Probe.Stage.CONFIRM && conf != null) {
        pn.put("counted", conf.counted().contains(p.index()));
      }
      ArrayNode reasons = pn.putArray("reasons");
      p.reasons().forEach(reasons::add);
      if (!p.notes().isEmpty()) {
        ArrayNode notes = pn.putArray("notes");
        p.notes().forEach(notes::add);
      }
      num(pn, "margin", p.margin());
      num(pn, "attainment", p.attainment());
      num(pn, "request_throughput", p.requestThroughput());
      num(pn, "output_tokens_per_s", p.outputTokensPerS());
      num(pn, "request_goodput", p.requestGoodput());
      ObjectNode p95 = pn.putObject("p95_ms");
      for (Map.Entry<String, Double> e : new java.util.TreeMap<>(p.p95Ms()).entrySet()) {
        num(p95, e.getKey(), e.getValue());
      }
      pn.put("exit_code", p.exitCode());
      pn.put("dir", options.base().out().relativize(p.dir()).toString());
    }
  }

  private static void num(ObjectNode o, String field, double v) {
    if (Double.isFinite(v)) {
      o.put(field, v);
    } else {
      o.putNull(field);
    }
  }
}
