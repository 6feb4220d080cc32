package io.phasemeter.load.campaign;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Whether a run counts. A run is invalid when the client errored (an exit code other than 0, or no
 * report), when no request was sent, when any request failed, when an output length differs from
 * the one asked for, when an input length differs by more than 1 %, or when the offered load was
 * not generated (iterations dropped at the in-flight cap). Every reason is kept: invalid runs are
 * listed with them and left out of the statistics, never dropped silently.
 */
public final class Validity {
  /** Largest tolerated relative difference between the input tokens sent and those reported. */
  public static final double INPUT_TOLERANCE = 0.01;

  private static final Pattern PROMPT =
      Pattern.compile("prompt_tokens (-?\\d+) != prompt tokens sent (\\d+)");
  private static final Pattern COMPLETION =
      Pattern.compile("completion_tokens (-?\\d+) != max_tokens (\\d+)");

  /** Distinct reasons of invalid requests named in the line; the rest are "other reasons". */
  static final int INVALID_REASONS_NAMED = 5;

  private Validity() {}

  /**
   * Whether the run sent its load: the client ran to the end (exit 0, or 4 when it judged the run
   * invalid itself), wrote its report, sent requests and dropped no iteration. Such a run counts in
   * goodput's statistics even when requests failed: attainment is good ÷ sent, failures included,
   * and a point near the knee keeps its runs with timeouts. The other metrics take only valid runs
   * ({@link #reasons}).
   */
  public static boolean loadSent(int exitCode, RunData data, String clientError) {
    return clientError == null
        && data != null
        && (exitCode == 0 || exitCode == 4)
        && data.summary().path("requests").path("sent").asLong(0) > 0
        && data.summary().path("requests").path("dropped").asLong(0) == 0;
  }

  /**
   * The reasons a run is invalid; empty when it is valid.
   *
   * @param exitCode the load client's exit code (4 means it judged the run invalid itself: its
   *     reasons, such as drops, are found again in the data)
   * @param data what the run wrote, or null when it wrote nothing
   * @param clientError what went wrong in the client, or null
   */
  public static List<String> reasons(int exitCode, RunData data, String clientError) {
    List<String> reasons = new ArrayList<>();
    if (clientError != null) {
      reasons.add("the client errored: " + clientError);
    }
    if (data == null) {
      if (clientError == null) {
        reasons.add("the client errored: exit " + exitCode + ", no report written");
      }
      return reasons;
    }
    if (exitCode != 0 && exitCode != 4 && clientError == null) {
      reasons.add("the client errored: exit " + exitCode);
    }
    long sent = data.summary().path("requests").path("sent").asLong(0);
    long dropped = data.summary().path("requests").path("dropped").asLong(0);
    if (sent == 0) {
      reasons.add("no request was sent");
    }
    if (dropped > 0) {
      reasons.add(dropped + " iterations dropped: the offered load was not generated");
    }
    Map<String, Integer> failed = new TreeMap<>();
    int failedTotal = 0;
    int invalidReasons = 0;
    int outputWrong = 0;
    int inputWrong = 0;
    String outputExample = null;
    String inputExample = null;
    for (RunData.Request r : data.requests()) {
      switch (r.errorClass()) {
        case "NONE" -> {}
        case "INVALID" -> {
          String reason = r.invalidReason() == null ? "" : r.invalidReason();
          Matcher p = PROMPT.matcher(reason);
          Matcher c = COMPLETION.matcher(reason);
          if (p.find()) {
            long got = Long.parseLong(p.group(1));
            long asked = Long.parseLong(p.group(2));
            if (Math.abs(got - asked) > INPUT_TOLERANCE * asked) {
              inputWrong++;
              inputExample = inputExample == null ? reason : inputExample;
            }
          } else if (c.find() || reason.startsWith("no usage")) {
            outputWrong++;
            outputExample = outputExample == null ? reason : outputExample;
          } else {
            // An engine's messages can all differ: the line names a few, counts the rest.
            String key = "INVALID (" + reason + ")";
            if (!failed.containsKey(key) && ++invalidReasons > INVALID_REASONS_NAMED) {
              key = "INVALID (other reasons)";
            }
            failed.merge(key, 1, Integer::sum);
            failedTotal++;
          }
        }
        default -> {
          failed.merge(r.errorClass(), 1, Integer::sum);
          failedTotal++;
        }
      }
    }
    int total = data.requests().size();
    if (failedTotal > 0) {
      reasons.add(
          String.format(
              Locale.ROOT, "%d of %d requests failed %s", failedTotal, total, failed.toString()));
    }
    if (outputWrong > 0) {
      reasons.add(
          outputWrong
              + " of "
              + total
              + " outputs differ from the length asked for ("
              + outputExample
              + ")");
    }
    if (inputWrong > 0) {
      reasons.add(
          inputWrong + " of " + total + " inputs differ by more than 1 % (" + inputExample + ")");
    }
    return reasons;
  }
}
