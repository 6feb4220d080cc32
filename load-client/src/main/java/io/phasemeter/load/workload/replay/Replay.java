package io.phasemeter.load.workload.replay;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.DigestInputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Locale;
import java.util.function.Predicate;

/**
 * What {@code load run --replay FILE} was asked to replay (docs/design.md §7, "Replaying a trace"):
 * the file, its format, how fast, how many rows and whether their prefixes stay shared. {@link
 * #load} reads and checks the rows to replay, and hashes the whole file.
 *
 * @param file the trace file
 * @param format its format, or null: told from the file ({@link TraceReader})
 * @param speed trace times are divided by it ({@code --replay-speed}, above 0)
 * @param limit replay only the first {@code limit} rows ({@code --replay-limit}); 0 for all
 * @param prefixes whether rows keep the prefixes the trace says they share ({@code
 *     --replay-prefixes})
 */
public record Replay(Path file, Format format, double speed, long limit, Prefixes prefixes) {

  /** A trace file's format ({@code --replay-format}). */
  public enum Format {
    /** Mooncake JSONL: {@code timestamp} (ms), lengths, {@code hash_ids}, {@code session_id}. */
    MOONCAKE,
    /** The Azure LLM inference trace CSV: {@code TIMESTAMP,ContextTokens,GeneratedTokens}. */
    AZURE,
    /** Phasemeter's own JSONL: {@code offset_ms}, lengths, hash ids, sessions, named prefixes. */
    JSONL;

    /** The flag's word. */
    public String key() {
      return name().toLowerCase(Locale.ROOT);
    }

    /** {@code mooncake}, {@code azure} or {@code jsonl}. */
    public static Format parse(String flag, String text) {
      for (Format f : values()) {
        if (f.key().equalsIgnoreCase(text == null ? "" : text.trim())) {
          return f;
        }
      }
      throw new IllegalArgumentException(
          flag + " must be mooncake, azure or jsonl, got '" + text + "'");
    }
  }

  /** Whether rows share the prefixes of their trace ({@code --replay-prefixes}). */
  public enum Prefixes {
    /** As the trace says: rows with the same leading hash ids send the same leading tokens. */
    SHARED,
    /**
     * Every row's prompt its own: the same lengths and times, nothing shared (hash-id blocks keyed
     * by row and position, no session history, no named prefix): the control for what a prefix
     * cache buys.
     */
    DISTINCT;

    /** The flag's word. */
    public String key() {
      return name().toLowerCase(Locale.ROOT);
    }

    /** {@code shared} or {@code distinct}. */
    public static Prefixes parse(String flag, String text) {
      for (Prefixes p : values()) {
        if (p.key().equalsIgnoreCase(text == null ? "" : text.trim())) {
          return p;
        }
      }
      throw new IllegalArgumentException(flag + " must be shared or distinct, got '" + text + "'");
    }
  }

  /** {@code --replay-speed} when none is given: the trace's own times. */
  public static final double DEFAULT_SPEED = 1.0;

  public Replay {
    if (file == null) {
      throw new IllegalArgumentException("--replay needs a FILE");
    }
    if (!(speed > 0) || Double.isInfinite(speed)) {
      throw new IllegalArgumentException(
          "--replay-speed must be a positive number (2 replays twice as fast), got " + speed);
    }
    if (limit < 0) {
      throw new IllegalArgumentException("--replay-limit must be at least 1, got " + limit);
    }
    prefixes = prefixes == null ? Prefixes.SHARED : prefixes;
  }

  /**
   * The replay of {@code load run}'s flags, or null without {@code --replay}; a {@code --replay-*}
   * flag without it is refused.
   *
   * @param given whether the user gave the named option (the others take their defaults)
   */
  public static Replay fromFlags(
      Path file,
      String format,
      Double speed,
      Long limit,
      String prefixes,
      Predicate<String> given) {
    if (file == null) {
      for (String flag :
          new String[] {
            "--replay-format", "--replay-speed", "--replay-limit", "--replay-prefixes"
          }) {
        if (given.test(flag)) {
          throw new IllegalArgumentException(flag + " needs --replay FILE");
        }
      }
      return null;
    }
    for (String flag : new String[] {"--arrival", "--burstiness"}) {
      if (given.test(flag)) {
        throw new IllegalArgumentException(
            flag
                + " cannot go with --replay: the trace's own times are the arrivals (--replay-speed"
                + " scales them)");
      }
    }
    if (limit != null && limit < 1) {
      throw new IllegalArgumentException("--replay-limit must be at least 1, got " + limit);
    }
    return new Replay(
        file,
        format == null ? null : Format.parse("--replay-format", format),
        speed == null ? DEFAULT_SPEED : speed,
        limit == null ? 0 : limit,
        prefixes == null ? Prefixes.SHARED : Prefixes.parse("--replay-prefixes", prefixes));
  }

  /**
   * Reads and checks the rows to replay (past {@code --replay-limit} the file is only counted), and
   * hashes all of the file (SHA-256) on the way.
   *
   * @throws IllegalArgumentException one line, {@code --replay FILE:LINE: what}, for a bad file;
   *     {@code --replay-speed …}, for a replay that would last more than {@link Replayed#MAX_SPAN}
   */
  public Replayed load() {
    return load(TraceReader.Limits.DEFAULT);
  }

  /** {@link #load()} within other limits (tests of the limits). */
  Replayed load(TraceReader.Limits limits) {
    MessageDigest sha;
    try {
      sha = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
    Trace trace;
    try (InputStream in = new DigestInputStream(Files.newInputStream(file), sha)) {
      trace = new TraceReader(file.toString(), formatOrGuess(), limit, limits).read(in);
      // The rest of the file, if the reader stopped early, still belongs to the hash.
      in.transferTo(java.io.OutputStream.nullOutputStream());
    } catch (IOException e) {
      throw new IllegalArgumentException(
          "--replay " + file + ": cannot read it (" + e.getClass().getSimpleName() + ")");
    }
    return new Replayed(this, trace, HexFormat.of().formatHex(sha.digest()));
  }

  /** The format given, or AZURE for a {@code .csv} file; null: told from its first row. */
  Format formatOrGuess() {
    if (format != null) {
      return format;
    }
    String name = file.getFileName() == null ? "" : file.getFileName().toString();
    return name.toLowerCase(Locale.ROOT).endsWith(".csv") ? Format.AZURE : null;
  }
}
