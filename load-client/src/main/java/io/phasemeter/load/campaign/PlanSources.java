package io.phasemeter.load.campaign;

import com.fasterxml.jackson.databind.JsonNode;
import io.phasemeter.core.Durations;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.Profile;
import io.phasemeter.load.workload.SessionSpec;
import io.phasemeter.load.workload.dataset.Dataset;
import io.phasemeter.load.workload.dataset.DatasetEntries;
import io.phasemeter.load.workload.replay.Replay;
import io.phasemeter.load.workload.replay.Replayed;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Reads a plan's {@code profiles} list into {@link Source}s: a string is a profile, a mapping a
 * replay, a dataset or sessions. Files are resolved against the plan's directory and read here,
 * once, with the readers {@code load run} uses: a bad file fails the plan with their {@code
 * FILE:LINE} message. Every error names the plan file, the entry (its place in the list) and the
 * key.
 */
final class PlanSources {
  private static final Set<String> REPLAY_KEYS =
      Set.of("replay", "format", "speed", "limit", "prefixes", "duration", "name");
  private static final Set<String> DATASET_KEYS = Set.of("dataset", "output_tokens", "name");
  private static final Set<String> SESSIONS_KEYS = Set.of("sessions", "name");
  private static final Set<String> SESSION_KEYS =
      Set.of("turns", "think_time", "max_tokens", "profile");
  private static final List<String> KINDS = List.of("replay", "dataset", "sessions");

  /** A point id's stem: it also names the runs' directories. */
  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");

  private final String file;
  private final Path base;
  private final Api api;

  /**
   * @param file the plan, as errors name it
   * @param base the directory the plan's files are resolved against
   * @param api the plan's API, which some entries cannot go with
   */
  PlanSources(String file, Path base, Api api) {
    this.file = file;
    this.base = base;
    this.api = api;
  }

  /** The entries of {@code profiles} (null: none given), in order. */
  List<Source> read(JsonNode list) {
    List<Source> out = new ArrayList<>();
    if (list == null) {
      return out;
    }
    int n = 0;
    for (JsonNode v : list) {
      n++;
      out.add(v.isObject() ? mapping(v, n) : new Source.Shape(profile(v, "profiles", null)));
    }
    return out;
  }

  /** Named profiles ({@code doc-qa}) or custom shapes written {@code IN:OUT} ({@code 512:64}). */
  private Profile profile(JsonNode v, String key, String where) {
    String t = v.isValueNode() ? v.asText().trim().toLowerCase(Locale.ROOT) : "";
    try {
      if (t.matches("\\d+:\\d+")) {
        String[] parts = t.split(":");
        return Profile.custom(Integer.parseInt(parts[0]), Integer.parseInt(parts[1]));
      }
      return Profile.named(t);
    } catch (IllegalArgumentException e) {
      String what =
          "holds '"
              + (v.isValueNode() ? v.asText() : v.toString())
              + "': give one of "
              + String.join(", ", Profile.names())
              + " or IN:OUT token counts such as 512:64"
              + (where == null ? ", or a mapping with replay:, dataset: or sessions:" : "");
      throw where == null ? Plan.error(file, key, what) : error(where, key, what);
    }
  }

  private Source mapping(JsonNode v, int n) {
    List<String> kinds = KINDS.stream().filter(v::has).toList();
    String where = file + ": profiles entry " + n;
    if (kinds.size() != 1) {
      throw new IllegalArgumentException(
          where
              + (kinds.isEmpty() ? " names none" : " names " + String.join(" and ", kinds))
              + ": an entry is a profile (doc-qa, 512:64) or a mapping with one of replay:,"
              + " dataset: or sessions:");
    }
    String kind = kinds.get(0);
    where += " (" + kind + ")";
    Set<String> known =
        switch (kind) {
          case "replay" -> REPLAY_KEYS;
          case "dataset" -> DATASET_KEYS;
          default -> SESSIONS_KEYS;
        };
    unknown(v, known, where, "a " + kind + " entry key");
    String name = v.has("name") ? name(v, where) : null;
    return switch (kind) {
      case "replay" -> replay(v, where, name);
      case "dataset" -> dataset(v, where, name);
      default -> sessions(v, where, name);
    };
  }

  private Source.Trace replay(JsonNode v, String where, String name) {
    if (api != Api.COMPLETIONS) {
      throw new IllegalArgumentException(
          where
              + ": a replay sends the trace's exact lengths as token ids on completions: it cannot"
              + " go with api: "
              + api.key());
    }
    Path path = file(v, "replay", where);
    Replay.Format format = null;
    String f = text(v, "format", where);
    if (f != null) {
      try {
        format = Replay.Format.parse("format", f);
      } catch (IllegalArgumentException e) {
        throw error(where, "format", "must be mooncake, azure or jsonl, got '" + f + "'");
      }
    }
    double speed = Replay.DEFAULT_SPEED;
    if (v.has("speed")) {
      JsonNode s = v.get("speed");
      if (!s.isNumber() || !(s.doubleValue() > 0) || Double.isInfinite(s.doubleValue())) {
        throw error(
            where,
            "speed",
            "must be a positive number (2 replays twice as fast), got '" + s.asText() + "'");
      }
      speed = s.doubleValue();
    }
    long limit = 0;
    if (v.has("limit")) {
      JsonNode l = v.get("limit");
      if (!l.isIntegralNumber() || !l.canConvertToLong() || l.longValue() < 1) {
        throw error(where, "limit", "must be a whole number of rows, at least 1, got " + l);
      }
      limit = l.longValue();
    }
    Replay.Prefixes prefixes = Replay.Prefixes.SHARED;
    String p = text(v, "prefixes", where);
    if (p != null) {
      try {
        prefixes = Replay.Prefixes.parse("prefixes", p);
      } catch (IllegalArgumentException e) {
        throw error(where, "prefixes", "must be shared or distinct, got '" + p + "'");
      }
    }
    Duration cut = null;
    String d = text(v, "duration", where);
    if (d != null) {
      try {
        cut = Durations.parsePositive("duration", d);
      } catch (IllegalArgumentException e) {
        throw error(
            where, "duration", "must be a duration such as 500ms, 30s or 2m, got '" + d + "'");
      }
    }
    Replay replay = new Replay(path, format, speed, limit, prefixes);
    Replayed replayed;
    try {
      replayed = replay.load();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(where + ": " + planWords(e.getMessage()), e);
    }
    return new Source.Trace(
        name != null ? name : "replay-" + stem(path) + "-x" + Plan.trim(speed),
        replay,
        replayed,
        cut);
  }

  private Source.FromDataset dataset(JsonNode v, String where, String name) {
    if (api != Api.COMPLETIONS && api != Api.CHAT) {
      throw new IllegalArgumentException(
          where + ": a dataset sends its prompts on completions or chat, not api: " + api.key());
    }
    String t = text(v, "dataset", where);
    Dataset given;
    try {
      given = Dataset.parse("dataset", t);
    } catch (IllegalArgumentException e) {
      throw error(where, "dataset", "must be sharegpt:FILE or jsonl:FILE, got '" + t + "'");
    }
    Dataset dataset = Dataset.of(given.kind(), base.resolve(given.file()).normalize());
    int output = 0;
    if (v.has("output_tokens")) {
      JsonNode o = v.get("output_tokens");
      if (!o.isIntegralNumber() || !o.canConvertToInt() || o.intValue() < 1) {
        throw error(where, "output_tokens", "must be a whole number, at least 1, got " + o);
      }
      output = o.intValue();
    }
    DatasetEntries entries;
    try {
      entries = dataset.load(output);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(where + ": " + planWords(e.getMessage()), e);
    }
    return new Source.FromDataset(
        name != null ? name : "dataset-" + stem(dataset.file()), dataset, output, entries);
  }

  private Source.Sessions sessions(JsonNode v, String where, String name) {
    if (api != Api.COMPLETIONS && api != Api.CHAT) {
      throw new IllegalArgumentException(
          where
              + ": sessions go with api: completions or chat, not "
              + api.key()
              + " (a session's turns send back the history)");
    }
    JsonNode s = v.get("sessions");
    if (!s.isObject()) {
      throw error(
          where,
          "sessions",
          "must be a mapping of turns, think_time, max_tokens and profile ({} for the defaults)");
    }
    unknown(s, SESSION_KEYS, where, "a key of sessions:");
    int turns = SessionSpec.DEFAULT_TURNS;
    if (s.has("turns")) {
      JsonNode t = s.get("turns");
      if (!t.isIntegralNumber()
          || !t.canConvertToInt()
          || t.intValue() < 1
          || t.intValue() > SessionSpec.MAX_TURNS) {
        throw error(
            where,
            "turns",
            "must be a whole number from 1 to " + SessionSpec.MAX_TURNS + ", got " + t);
      }
      turns = t.intValue();
    }
    Duration think = Duration.ZERO;
    String tt = text(s, "think_time", where);
    if (tt != null) {
      try {
        think = Durations.parse(tt);
      } catch (IllegalArgumentException e) {
        throw error(
            where, "think_time", "must be a duration such as 0s, 500ms or 2s, got '" + tt + "'");
      }
    }
    int maxTokens = SessionSpec.DEFAULT_MAX_TOKENS;
    if (s.has("max_tokens")) {
      if (api != Api.COMPLETIONS) {
        throw error(
            where,
            "max_tokens",
            "is for api: completions, whose lengths are exact; a chat session ends when its"
                + " history would pass its share of the run's (1 MiB, less beyond 256 sessions)");
      }
      JsonNode m = s.get("max_tokens");
      if (!m.isIntegralNumber() || !m.canConvertToInt() || m.intValue() < 1) {
        throw error(where, "max_tokens", "must be a whole number, at least 1, got " + m);
      }
      maxTokens = m.intValue();
    }
    Profile profile =
        s.has("profile") ? profile(s.get("profile"), "profile", where) : Profile.DOC_QA;
    if (api == Api.COMPLETIONS
        && (long) profile.inputTokens() + profile.outputTokens() > maxTokens) {
      throw error(
          where,
          "max_tokens",
          maxTokens
              + " is below the first turn's "
              + profile.inputTokens()
              + " input + "
              + profile.outputTokens()
              + " output tokens ("
              + profile.name()
              + "): no session could start");
    }
    return new Source.Sessions(
        name != null ? name : "sessions-" + turns + "t", turns, think, maxTokens, profile);
  }

  private String name(JsonNode v, String where) {
    String n = text(v, "name", where);
    if (n == null || !NAME.matcher(n).matches()) {
      throw error(
          where,
          "name",
          "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, got '"
              + n
              + "'");
    }
    return n;
  }

  /** A file the entry names, resolved against the plan's directory; it must be there. */
  private Path file(JsonNode v, String key, String where) {
    String t = text(v, key, where);
    if (t == null || t.isBlank()) {
      throw error(where, key, "must name a file");
    }
    Path p = base.resolve(t).normalize();
    if (!Files.isRegularFile(p)) {
      throw error(where, key, p + ": no such file");
    }
    if (!Files.isReadable(p)) {
      throw error(where, key, p + ": not readable");
    }
    return p;
  }

  private void unknown(JsonNode v, Set<String> known, String where, String what) {
    for (Iterator<String> it = v.fieldNames(); it.hasNext(); ) {
      String key = it.next();
      if (!known.contains(key)) {
        throw error(
            where,
            key,
            "is not "
                + what
                + " (known: "
                + String.join(", ", known.stream().sorted().toList())
                + ")");
      }
    }
  }

  private String text(JsonNode v, String key, String where) {
    JsonNode n = v.get(key);
    if (n == null || n.isNull()) {
      return null;
    }
    if (!n.isValueNode()) {
      throw error(where, key, "must be a single value");
    }
    return n.asText();
  }

  private static IllegalArgumentException error(String where, String key, String message) {
    return new IllegalArgumentException(where + ": key '" + key + "' " + message);
  }

  /** A file's name without its last extension, made safe for a point id. */
  static String stem(Path p) {
    String s = p.getFileName() == null ? "file" : p.getFileName().toString();
    int dot = s.lastIndexOf('.');
    s = dot > 0 ? s.substring(0, dot) : s;
    s = s.replaceAll("[^A-Za-z0-9._-]", "-");
    return s.length() > 48 ? s.substring(0, 48) : s;
  }

  /** A reader's message in a plan's words: the entry's keys, not load run's flags. */
  static String planWords(String message) {
    return message
        .replaceFirst("^--replay ", "replay ")
        .replaceFirst("^--dataset ", "dataset ")
        .replace("--replay-format", "format:")
        .replace("--replay-limit", "limit:")
        .replace("--replay-speed", "speed:")
        .replace("--replay-prefixes", "prefixes:")
        .replace("--output-tokens", "output_tokens:");
  }
}
