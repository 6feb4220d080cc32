package io.phasemeter.load.workload;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A weighted mix of request shapes, parsed from {@code --mix "1k:512=0.7,4k:300=0.3"}.
 *
 * @param entries the shapes in the order given; weights are normalised to sum to 1
 */
public record Mix(List<Mix.Entry> entries) {
  private static final Pattern ENTRY =
      Pattern.compile("(\\d+)(k?):(\\d+)(k?)=(\\d+(?:\\.\\d*)?|\\.\\d+)", Pattern.CASE_INSENSITIVE);

  /**
   * One shape of a mix.
   *
   * @param inputTokens prompt tokens
   * @param outputTokens completion tokens
   * @param weight share of requests, in (0, 1]
   * @param bucket low-cardinality tag such as {@code 1k-512}
   */
  public record Entry(int inputTokens, int outputTokens, double weight, String bucket) {
    /** This entry as a profile named by its bucket. */
    public Profile profile() {
      return new Profile(bucket, inputTokens, outputTokens);
    }
  }

  public Mix {
    if (entries == null || entries.isEmpty()) {
      throw new IllegalArgumentException("--mix must have at least one entry");
    }
    entries = List.copyOf(entries);
  }

  /** A mix of one profile (weight 1), bucket tag the profile's name. */
  public static Mix of(Profile profile) {
    return new Mix(
        List.of(new Entry(profile.inputTokens(), profile.outputTokens(), 1.0, profile.name())));
  }

  /**
   * Parses {@code input:output=weight,…}; {@code k} multiplies by 1,024. Weights need not sum to 1.
   *
   * @throws IllegalArgumentException naming {@code --mix} and the entry at fault
   */
  public static Mix parse(String text) {
    if (text == null || text.isBlank()) {
      throw new IllegalArgumentException("--mix must not be empty, e.g. \"1k:512=0.7,4k:300=0.3\"");
    }
    List<int[]> shapes = new ArrayList<>();
    List<Double> weights = new ArrayList<>();
    double sum = 0;
    for (String part : text.split(",", -1)) {
      String p = part.trim();
      Matcher m = ENTRY.matcher(p);
      if (!m.matches()) {
        throw new IllegalArgumentException(
            "--mix entries must look like 1k:512=0.7 (input:output=weight), got '" + p + "'");
      }
      int in = scaled(m.group(1), m.group(2), p);
      int out = scaled(m.group(3), m.group(4), p);
      double w = Double.parseDouble(m.group(5));
      if (in < 1 || out < 1 || !(w > 0)) {
        throw new IllegalArgumentException(
            "--mix entry '" + p + "' needs input and output of at least 1 and a positive weight");
      }
      shapes.add(new int[] {in, out});
      weights.add(w);
      sum += w;
    }
    List<Entry> entries = new ArrayList<>();
    for (int i = 0; i < shapes.size(); i++) {
      int[] s = shapes.get(i);
      entries.add(new Entry(s[0], s[1], weights.get(i) / sum, Profile.bucketOf(s[0], s[1])));
    }
    return new Mix(entries);
  }

  /**
   * The entry for a uniform draw {@code u} in [0, 1): entries own consecutive slices of the unit
   * interval in proportion to their weights.
   */
  public Entry pick(double u) {
    double acc = 0;
    for (Entry e : entries) {
      acc += e.weight();
      if (u < acc) {
        return e;
      }
    }
    return entries.get(entries.size() - 1);
  }

  private static int scaled(String digits, String k, String entry) {
    long v;
    try {
      v = Long.parseLong(digits) * (k.isEmpty() ? 1 : 1024);
    } catch (NumberFormatException e) {
      v = Long.MAX_VALUE;
    }
    if (v > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("--mix entry '" + entry + "' has a token count too large");
    }
    return (int) v;
  }

  static String tokens(int n) {
    return n % 1024 == 0 ? (n / 1024) + "k" : Integer.toString(n).toLowerCase(Locale.ROOT);
  }
}
