package io.phasemeter.proxy.pipeline;

import io.phasemeter.core.Phases;
import io.phasemeter.core.budget.LatencyLimit;
import io.phasemeter.core.slo.Objective;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.proxy.gateway.ApiKey;
import io.vertx.core.MultiMap;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * A request's own objectives, from the headers the Gateway API Inference Extension and
 * inference-perf send: {@code x-slo-ttft-ms} ({@code server_ttft}), {@code x-slo-tpot-ms} ({@code
 * tpot}) and {@code x-slo-e2e-ms} ({@code server_root}). Each is a positive decimal number of
 * milliseconds ({@code 250}, {@code 12.5}), at most a day, at most {@link #MAX_CHARS} characters,
 * given once; anything else is refused with 400 {@code invalid_slo_header} naming the header, and a
 * key with {@code slo_override: false} sending any of them gets 403 {@code slo_override_denied}.
 */
final class SloHeaders {
  static final String TTFT = "x-slo-ttft-ms";
  static final String TPOT = "x-slo-tpot-ms";
  static final String E2E = "x-slo-e2e-ms";

  /** The longest value read: a day to the nanosecond, 86400000.000001, takes 15. */
  static final int MAX_CHARS = 16;

  /** A day, as for every objective. */
  static final double MAX_MS = 86_400_000;

  private static final String[] NAMES = {TTFT, TPOT, E2E};
  private static final Phases[] FIGURES = {Phases.SERVER_TTFT, Phases.TPOT, Phases.SERVER_ROOT};
  private static final Pattern NUMBER = Pattern.compile("[0-9]+(?:\\.[0-9]+)?");

  private SloHeaders() {}

  /**
   * The objectives the headers set, in the order ttft, tpot, e2e; {@link Objectives#NONE} (and no
   * allocation) when the request carries none of them.
   *
   * @param key the verified key, or null with auth off (every request may then set them)
   * @throws ProxyFailure {@code invalid_slo_header} or {@code slo_override_denied}, {@code param}
   *     naming the header
   */
  static Objectives parse(MultiMap headers, ApiKey key) {
    List<Objective> out = null;
    for (int i = 0; i < NAMES.length; i++) {
      String name = NAMES[i];
      String value = headers.get(name);
      if (value == null) {
        continue;
      }
      if (key != null && !key.sloOverride()) {
        throw ProxyFailure.ofParam(
            ProxyFailure.Kind.SLO_OVERRIDE_DENIED,
            "Key '"
                + key.name()
                + "' may not set its own objectives: remove the "
                + name
                + " header (the budgets' objectives apply).",
            name);
      }
      if (headers.getAll(name).size() > 1) {
        throw invalid(name, "is given more than once; give it once");
      }
      out = out == null ? new ArrayList<>(NAMES.length) : out;
      out.add(new Objective(FIGURES[i], nanos(name, value)));
    }
    return out == null ? Objectives.NONE : new Objectives(out);
  }

  private static long nanos(String name, String raw) {
    String value = raw.strip();
    if (value.length() > MAX_CHARS || !NUMBER.matcher(value).matches()) {
      throw invalid(
          name,
          "must be a positive number of milliseconds of at most "
              + MAX_CHARS
              + " characters, e.g. 250 or 12.5");
    }
    double ms = Double.parseDouble(value);
    if (ms > MAX_MS) {
      throw invalid(name, "must be at most a day (86400000 ms)");
    }
    long nanos = LatencyLimit.nanos(ms);
    if (nanos < 1) {
      throw invalid(name, "must be above zero");
    }
    return nanos;
  }

  private static ProxyFailure invalid(String name, String why) {
    return ProxyFailure.ofParam(
        ProxyFailure.Kind.INVALID_SLO_HEADER, "The " + name + " header " + why + ".", name);
  }
}
