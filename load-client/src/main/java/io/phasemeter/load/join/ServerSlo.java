package io.phasemeter.load.join;

import java.util.List;
import java.util.Map;

/**
 * The proxy's own goodput verdict on one request: the record's {@code slo} field (docs/design.md
 * §5), present when the proxy counted the request in {@code llm_slo_requests_total}. The proxy
 * judges only the figures it measures on its own clock ({@code server_ttft}, {@code tpot}, {@code
 * server_root}, its phases), with the objectives of its first matching budget and the request's
 * {@code x-slo-*} headers.
 *
 * @param met whether every objective held ({@code result: met})
 * @param objective {@code none} when met, {@code error} for a counted failure, else the catalogue
 *     key of the first objective missed
 * @param budget the budget whose objectives were used, or null when only headers gave them
 * @param objectivesMs catalogue key to limit in milliseconds, in the order judged
 * @param missed every objective missed, in order
 * @param overridden the keys a request header set
 */
public record ServerSlo(
    boolean met,
    String objective,
    String budget,
    Map<String, Double> objectivesMs,
    List<String> missed,
    List<String> overridden) {

  /** {@link #objective()} of a request the proxy counted as failed. */
  public static final String ERROR = "error";

  public ServerSlo {
    objectivesMs = objectivesMs == null ? Map.of() : objectivesMs;
    missed = missed == null ? List.of() : List.copyOf(missed);
    overridden = overridden == null ? List.of() : List.copyOf(overridden);
  }

  /** {@code met} or {@code missed}, as the record and pairs.csv say it. */
  public String result() {
    return met ? "met" : "missed";
  }

  /** The proxy's limit on {@code key} in milliseconds, or null when it judged no such objective. */
  public Double limitMs(String key) {
    return objectivesMs.get(key);
  }
}
