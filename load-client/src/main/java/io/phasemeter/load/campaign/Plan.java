package io.phasemeter.load.campaign;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.phasemeter.core.Durations;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.ApiKey;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * A campaign plan: which load points to measure and how often. Points are every profile (or
 * dataset) × every concurrency level (closed model) and × every rate (open model, {@code arrival});
 * sessions × every concurrency level (the sessions at once); each replay one point of its own (its
 * trace is its schedule). Each point gets one discarded warm-up run, then {@code repeats} measured
 * runs in randomized blocks.
 *
 * @param file where the plan came from, named in every error
 * @param model the model every request names
 * @param repeats measured runs per point, at least 3
 * @param seed seed of the block order (and of each run's arrivals and prompts)
 * @param duration length of each measured run
 * @param warmupDuration length of each point's discarded warm-up run
 * @param sources the {@code profiles} entries: request shapes, datasets, sessions and replays,
 *     their files read and checked ({@link PlanSources})
 * @param concurrency closed-model levels (may be empty when rates are given)
 * @param rates open-model rates in requests per second (may be empty when concurrency is given)
 * @param arrival open-model arrival process: constant, poisson or gamma
 * @param stream whether responses are streamed (default: yes, except for embeddings, which never
 *     stream)
 * @param api the API every run speaks (default completions); with chat and responses a profile
 *     gives only the output length asked for (their input is free text), with embeddings only the
 *     input length
 * @param maxInFlight the open model's cap; a run that reaches it drops iterations and is invalid
 * @param timeout per-request timeout
 * @param connectionReuse whether runs reuse keep-alive connections ({@code connection_reuse: on})
 * @param apiKeyEnv the environment variable whose API key every run sends ({@code api_key_env}, as
 *     {@code load run --api-key-env}), or null for none; the plan names it, never the key
 * @param slo goodput's objectives ({@code slo}: {@code ttft=500ms,tpot=50ms} or a mapping, the
 *     names and limits of {@code load run --slo}), or null: every run is then judged on them and
 *     reports its goodput, with its interval over the repeats
 */
public record Plan(
    String file,
    String model,
    int repeats,
    long seed,
    Duration duration,
    Duration warmupDuration,
    List<Source> sources,
    List<Integer> concurrency,
    List<Double> rates,
    String arrival,
    boolean stream,
    Api api,
    int maxInFlight,
    Duration timeout,
    boolean connectionReuse,
    String apiKeyEnv,
    Objectives slo) {

  /** Fewer repeats give no usable interval (n = 3 already needs t = 4.30). */
  public static final int MIN_REPEATS = 3;

  private static final Set<String> KEYS =
      Set.of(
          "model",
          "repeats",
          "seed",
          "duration",
          "warmup_duration",
          "profiles",
          "concurrency",
          "rates",
          "arrival",
          "stream",
          "api",
          "max_in_flight",
          "timeout",
          "connection_reuse",
          "api_key_env",
          "slo");

  public Plan {
    if (model == null || model.isBlank()) {
      throw error(file, "model", "is required (the model every request names)");
    }
    if (repeats < MIN_REPEATS) {
      throw error(file, "repeats", "must be at least " + MIN_REPEATS + ", got " + repeats);
    }
    positive(file, "duration", duration);
    positive(file, "warmup_duration", warmupDuration);
    positive(file, "timeout", timeout);
    if (sources == null || sources.isEmpty()) {
      throw error(file, "profiles", "needs at least one profile, e.g. [doc-qa] or [512:64]");
    }
    sources = List.copyOf(sources);
    concurrency = List.copyOf(concurrency == null ? List.of() : concurrency);
    rates = List.copyOf(rates == null ? List.of() : rates);
    boolean crossed = sources.stream().anyMatch(s -> s.closed() && s.open());
    if (crossed && concurrency.isEmpty() && rates.isEmpty()) {
      throw error(file, "concurrency", "give concurrency levels, rates, or both");
    }
    for (Source s : sources) {
      if (s instanceof Source.Sessions && concurrency.isEmpty()) {
        throw error(
            file,
            "concurrency",
            "is needed by sessions entry '"
                + s.name()
                + "': each level is the number of sessions at once (rates do not apply to"
                + " sessions)");
      }
    }
    for (int c : concurrency) {
      if (c < 1) {
        throw error(file, "concurrency", "every level must be at least 1, got " + c);
      }
    }
    for (double r : rates) {
      if (!(r > 0) || Double.isInfinite(r)) {
        throw error(file, "rates", "every rate must be a positive number, got " + r);
      }
    }
    if (concurrency.size() != Set.copyOf(concurrency).size()) {
      throw error(file, "concurrency", "lists a level twice: " + concurrency);
    }
    if (rates.size() != Set.copyOf(rates).size()) {
      throw error(file, "rates", "lists a rate twice: " + rates);
    }
    Set<String> names = new java.util.HashSet<>();
    for (Source s : sources) {
      if (!names.add(s.name())) {
        throw error(
            file,
            "profiles",
            "lists '"
                + s.name()
                + "' twice: give one entry another name: (two replays of one file, another"
                + " speed)");
      }
    }
    if (!List.of("constant", "poisson", "gamma").contains(arrival)) {
      throw error(file, "arrival", "must be constant, poisson or gamma, got '" + arrival + "'");
    }
    if (maxInFlight < 1) {
      throw error(file, "max_in_flight", "must be at least 1, got " + maxInFlight);
    }
    int most = concurrency.stream().mapToInt(Integer::intValue).max().orElse(0);
    if (most > maxInFlight && sources.stream().anyMatch(s -> s instanceof Source.Sessions)) {
      throw error(
          file,
          "max_in_flight",
          maxInFlight
              + " is below concurrency "
              + most
              + ": each session has a turn in flight at a time; raise max_in_flight");
    }
    api = api == null ? Api.COMPLETIONS : api;
    if (api == Api.EMBEDDINGS && stream) {
      throw error(file, "stream", "cannot be true with api: embeddings (never streamed)");
    }
    if (apiKeyEnv != null && !ApiKey.isName(apiKeyEnv)) {
      // Not echoed: what was written may be the key itself.
      throw error(
          file,
          "api_key_env",
          "must name an environment variable (letters, digits and _, e.g. OPENAI_API_KEY), not"
              + " hold the key");
    }
  }

  /**
   * Refuses objectives no run of the plan could be judged on ({@code Goodput#check}): TTFT or TPOT
   * of embeddings or of responses not streamed, a figure of the proxy's record without {@code
   * --admin}.
   *
   * @throws IllegalArgumentException naming the file and the key
   */
  public void checkSlo(boolean joining) {
    if (slo == null) {
      return;
    }
    try {
      new io.phasemeter.load.report.Goodput(slo, io.phasemeter.load.report.Goodput.FLAG)
          .check(api, stream, joining);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          file + ": slo: " + e.getMessage().replaceFirst("^--slo: ", ""));
    }
  }

  /**
   * One load point: an entry at one concurrency (closed model; sessions: the sessions at once), at
   * one rate (open model), or a replay on its trace's own schedule (both 0).
   */
  public record Point(String id, Source source, int concurrency, double rate) {
    /** Whether this is an open-model (rate) point. */
    public boolean open() {
      return rate > 0;
    }

    /** The load in words: {@code concurrency 4}, {@code 0.3 req/s}, {@code 4 sessions at once}. */
    public String load() {
      if (source instanceof Source.Trace t) {
        return "trace replay at speed " + trim(t.replay().speed());
      }
      if (source instanceof Source.Sessions) {
        return concurrency + " sessions at once";
      }
      return open() ? trim(rate) + " req/s" : "concurrency " + concurrency;
    }
  }

  /**
   * Every point, entries outermost, then concurrency levels, then rates; a replay is one point,
   * sessions take no rate.
   */
  public List<Point> points() {
    List<Point> points = new ArrayList<>();
    for (Source s : sources) {
      if (!s.closed() && !s.open()) {
        points.add(new Point(s.name(), s, 0, 0));
      }
      if (s.closed()) {
        for (int c : concurrency) {
          points.add(new Point(s.name() + "/c" + c, s, c, 0));
        }
      }
      if (s.open()) {
        for (double r : rates) {
          points.add(new Point(s.name() + "/r" + trim(r), s, 0, r));
        }
      }
    }
    return List.copyOf(points);
  }

  /**
   * What the plan's summary says of its entries before the runs: each file read (its rows or
   * entries and hash), how long a replay runs, and the loads an entry does not take.
   */
  public List<String> notes() {
    List<String> notes = new ArrayList<>();
    for (Source s : sources) {
      if (s instanceof Source.Trace t) {
        Duration length = t.length(t.duration());
        notes.add(
            String.format(
                Locale.ROOT,
                "%s: one point, on the trace's own schedule (concurrency and rates do not apply):"
                    + " %d rows of %s, %s a run%s, sha256 %s…",
                s.name(),
                t.replayed().rowsSentMax(t.duration()),
                t.file(),
                CampaignRunner.human(length),
                t.duration() == null ? " (its span ÷ speed " + trim(t.replay().speed()) + ")" : "",
                s.sha256().substring(0, 12)));
      } else if (s instanceof Source.FromDataset d) {
        notes.add(
            String.format(
                Locale.ROOT,
                "%s: %d usable entries of %s, sha256 %s…",
                s.name(),
                d.entries().size(),
                s.file(),
                s.sha256().substring(0, 12)));
      } else if (s instanceof Source.Sessions && !rates.isEmpty()) {
        notes.add(
            s.name()
                + ": crossed with concurrency only (the sessions at once): rates do not apply to"
                + " sessions, so "
                + rates.size()
                + (rates.size() == 1 ? " rate is" : " rates are")
                + " skipped for it");
      }
    }
    return notes;
  }

  /** Reads a plan file; every error names the file and the key. */
  public static Plan load(Path file) throws IOException {
    return parse(
        Files.readString(file), file.toString(), file.toAbsolutePath().normalize().getParent());
  }

  /**
   * Parses plan YAML; errors name {@code source} and the key. The files it names are resolved
   * against {@code source}'s directory.
   */
  public static Plan parse(String yaml, String source) {
    Path parent = Path.of(source).toAbsolutePath().normalize().getParent();
    return parse(yaml, source, parent == null ? Path.of("") : parent);
  }

  /**
   * Parses plan YAML; errors name {@code source} and the key. The files it names (replays,
   * datasets) are resolved against {@code base}, and read and checked here.
   */
  public static Plan parse(String yaml, String source, Path base) {
    JsonNode root;
    try {
      root = new ObjectMapper(new YAMLFactory()).readTree(yaml);
    } catch (IOException e) {
      throw new IllegalArgumentException(
          source + ": not valid YAML: " + e.getMessage().lines().findFirst().orElse(""), e);
    }
    if (root == null || !root.isObject()) {
      throw new IllegalArgumentException(
          source + ": a plan is a YAML mapping (model, profiles, …)");
    }
    for (Iterator<String> it = root.fieldNames(); it.hasNext(); ) {
      String key = it.next();
      if (!KEYS.contains(key)) {
        throw error(source, key, "is not a plan key (known: " + String.join(", ", sorted()) + ")");
      }
    }
    Duration duration = duration(root, source, "duration", null);
    Api api = api(root, source);
    return new Plan(
        source,
        text(root, source, "model", null),
        integer(root, source, "repeats", MIN_REPEATS),
        root.has("seed") ? longValue(root, source, "seed") : 1L,
        duration,
        duration(root, source, "warmup_duration", duration),
        new PlanSources(source, base, api).read(list(root, source, "profiles")),
        integers(root, source, "concurrency"),
        numbers(root, source, "rates"),
        text(root, source, "arrival", "poisson"),
        bool(root, source, "stream", api.generates()),
        api,
        integer(root, source, "max_in_flight", 1024),
        duration(root, source, "timeout", Duration.ofSeconds(120)),
        onOff(root, source, "connection_reuse", true),
        text(root, source, "api_key_env", null),
        slo(root, source));
  }

  /** {@code slo}: the text of {@code --slo}, or a mapping of the same names to limits. */
  private static Objectives slo(JsonNode root, String file) {
    JsonNode n = root.get("slo");
    if (n == null || n.isNull()) {
      return null;
    }
    String where = file + ": slo";
    if (n.isObject()) {
      Map<String, Object> entries = new LinkedHashMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = n.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        JsonNode v = e.getValue();
        entries.put(e.getKey(), v.isNumber() ? v.numberValue() : v.asText());
      }
      return Objectives.parse(where, entries);
    }
    if (!n.isTextual()) {
      throw error(
          file,
          "slo",
          "must be objectives such as 'ttft=500ms,tpot=50ms,e2el=10s' or a mapping {ttft: 500ms}");
    }
    return Objectives.parse(where, n.asText());
  }

  /** The plan's {@code api}, completions when it has none. */
  private static Api api(JsonNode root, String file) {
    String v = text(root, file, "api", null);
    if (v == null) {
      return Api.COMPLETIONS;
    }
    try {
      return Api.parse("api", v);
    } catch (IllegalArgumentException e) {
      throw error(
          file, "api", "must be one of " + String.join(", ", Api.keys()) + ", got '" + v + "'");
    }
  }

  /** {@code on} / {@code off} (YAML may read them as booleans too). */
  private static boolean onOff(JsonNode root, String file, String key, boolean fallback) {
    JsonNode n = root.get(key);
    if (n == null || n.isNull()) {
      return fallback;
    }
    if (n.isBoolean()) {
      return n.booleanValue();
    }
    String v = n.isValueNode() ? n.asText().toLowerCase(Locale.ROOT) : "";
    if (v.equals("on")) {
      return true;
    }
    if (v.equals("off")) {
      return false;
    }
    throw error(file, key, "must be on or off, got '" + n.asText() + "'");
  }

  private static List<String> sorted() {
    return KEYS.stream().sorted().toList();
  }

  static IllegalArgumentException error(String file, String key, String message) {
    return new IllegalArgumentException(file + ": key '" + key + "' " + message);
  }

  private static void positive(String file, String key, Duration d) {
    if (d == null) {
      throw error(file, key, "is required, e.g. 60s");
    }
    if (d.isZero() || d.isNegative()) {
      throw error(file, key, "must be positive");
    }
  }

  private static String text(JsonNode root, String file, String key, String fallback) {
    JsonNode n = root.get(key);
    if (n == null || n.isNull()) {
      return fallback;
    }
    if (!n.isValueNode()) {
      throw error(file, key, "must be a single value");
    }
    return n.asText();
  }

  private static int integer(JsonNode root, String file, String key, int fallback) {
    JsonNode n = root.get(key);
    if (n == null || n.isNull()) {
      return fallback;
    }
    if (!n.isIntegralNumber() || !n.canConvertToInt()) {
      throw error(file, key, "must be a whole number, got '" + n.asText() + "'");
    }
    return n.intValue();
  }

  private static long longValue(JsonNode root, String file, String key) {
    JsonNode n = root.get(key);
    if (!n.isIntegralNumber() || !n.canConvertToLong()) {
      throw error(file, key, "must be a whole number, got '" + n.asText() + "'");
    }
    return n.longValue();
  }

  private static boolean bool(JsonNode root, String file, String key, boolean fallback) {
    JsonNode n = root.get(key);
    if (n == null || n.isNull()) {
      return fallback;
    }
    if (!n.isBoolean()) {
      throw error(file, key, "must be true or false, got '" + n.asText() + "'");
    }
    return n.booleanValue();
  }

  private static Duration duration(JsonNode root, String file, String key, Duration fallback) {
    String t = text(root, file, key, null);
    if (t == null) {
      return fallback;
    }
    try {
      return Durations.parsePositive(key, t);
    } catch (IllegalArgumentException e) {
      throw error(file, key, "must be a duration such as 500ms, 30s or 2m, got '" + t + "'");
    }
  }

  private static JsonNode list(JsonNode root, String file, String key) {
    JsonNode n = root.get(key);
    if (n == null || n.isNull()) {
      return null;
    }
    if (!n.isArray()) {
      throw error(file, key, "must be a list, e.g. [1, 2, 4]");
    }
    return n;
  }

  private static List<Integer> integers(JsonNode root, String file, String key) {
    JsonNode n = list(root, file, key);
    List<Integer> out = new ArrayList<>();
    if (n != null) {
      for (JsonNode v : n) {
        if (!v.isIntegralNumber() || !v.canConvertToInt()) {
          throw error(file, key, "holds '" + v.asText() + "', not a whole number");
        }
        out.add(v.intValue());
      }
    }
    return out;
  }

  private static List<Double> numbers(JsonNode root, String file, String key) {
    JsonNode n = list(root, file, key);
    List<Double> out = new ArrayList<>();
    if (n != null) {
      for (JsonNode v : n) {
        if (!v.isNumber()) {
          throw error(file, key, "holds '" + v.asText() + "', not a number");
        }
        out.add(v.doubleValue());
      }
    }
    return out;
  }

  static String trim(double v) {
    if (v == Math.rint(v) && Math.abs(v) < 1e15) {
      return String.valueOf((long) v);
    }
    return String.format(Locale.ROOT, "%s", v);
  }
}
