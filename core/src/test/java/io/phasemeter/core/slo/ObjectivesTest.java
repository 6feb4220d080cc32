package io.phasemeter.core.slo;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.core.Phases;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class ObjectivesTest {

  private static final String WHERE = "budgets.yaml: budgets[0] (chat).slo_ms";

  @Test
  void vllmNamesMeanTheClientsFigures() {
    Objectives o = Objectives.parse("--slo", "ttft=500ms,tpot=50ms,e2el=10s");
    assertThat(o.list())
        .containsExactly(
            new Objective(Phases.CLIENT_TTFT, 500_000_000L),
            new Objective(Phases.TPOT, 50_000_000L),
            new Objective(Phases.CLIENT_TOTAL, 10_000_000_000L));
    assertThat(o.limitsMs())
        .containsExactly(
            Map.entry("client_ttft", 500.0),
            Map.entry("tpot", 50.0),
            Map.entry("client_total", 10_000.0));
  }

  @Test
  void colonAndBareMillisecondsAsVllm() {
    assertThat(Objectives.parse("--slo", "ttft:500,tpot:50.5"))
        .isEqualTo(Objectives.parse("--slo", "ttft=0.5s, tpot = 50.5ms"));
    assertThat(Objectives.parse("--slo", "e2el:1m30s").list().get(0).limitNanos())
        .isEqualTo(90_000_000_000L);
  }

  @Test
  void catalogueNamesToo() {
    Objectives o = Objectives.parse("--slo", "queue=250ms,network_envelope=20,server_ttft=1s");
    assertThat(o.keys()).containsExactly("queue", "network_envelope", "server_ttft");
  }

  @Test
  void readsBackItsOwnForm() {
    Objectives o = Objectives.parse("--slo", "ttft=500ms,tpot=0.25,e2el=10s");
    assertThat(o.toString()).isEqualTo("client_ttft=500ms,tpot=0.25ms,client_total=10s");
    assertThat(Objectives.parse("--slo", o.toString())).isEqualTo(o);
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "''|--slo: give objectives such as ttft=500ms,tpot=50ms,e2el=10s",
        "ttft|--slo: 'ttft' is not name=limit (e.g. ttft=500ms, tpot:50, e2el=10s; a bare number"
            + " is milliseconds)",
        "ttft=|--slo: 'ttft=' is not name=limit",
        "ttft=1s,,tpot=1|--slo: '' is not name=limit",
        "ttfx=1s|--slo: ttfx: unknown objective (known: ttft, tpot, e2el, client_total,"
            + " client_ttft, transport_setup, network_envelope, ttft_envelope, server_root,"
            + " server_ttft, gateway, receive, queue, generation, engine_queue, prefill, decode,"
            + " write, unattributed)",
        "auth=1s|--slo: auth: unknown objective (known: ttft",
        "total=1s|--slo: total: ambiguous: in limits_ms 'total' means the server's figure; write"
            + " client_total (the client's) or server_root (the proxy's)",
        "itl=5ms|--slo: itl: itl is one value per token, not per request; set the objective on"
            + " tpot",
        "schedule_lag=5ms|--slo: schedule_lag: schedule_lag is the load client's own lateness",
        "ttft=0|--slo: ttft: must be above zero, got '0'",
        "ttft=0ms|--slo: ttft: must be above zero, got '0ms'",
        "ttft=-5ms|--slo: ttft: '-5ms' is not a limit (e.g. 500ms, 10s, or a bare number of"
            + " milliseconds)",
        "ttft=fast|--slo: ttft: 'fast' is not a limit",
        "ttft=2d|--slo: ttft: '2d' is not a limit",
        "e2el=25h|--slo: e2el: must be at most a day, got '25h'",
        "ttft=1s,ttft=2s|--slo: ttft: given twice",
        "ttft=1s,client_ttft=2s|--slo: client_ttft: client_ttft is already given (as ttft)",
        "e2el=1s,client_total=2s|--slo: client_total: client_total is already given (as e2el)",
      })
  void everyCommandLineErrorIsOneLineNamingTheFlag(String text, String message) {
    assertThatThrownBy(() -> Objectives.parse("--slo", text))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith(message)
        .satisfies(e -> assertThat(e.getMessage()).doesNotContain("\n"));
  }

  @Test
  void vllmsSpaceSeparatedGoodputIsTheSameObjectives() {
    // vLLM: --goodput ttft:500 tpot:50 e2el:10000 (several arguments, or one quoted).
    Objectives o = Objectives.parse("--slo", "ttft=500ms,tpot=50ms,e2el=10s");
    assertThat(Objectives.parse("--slo", "ttft:500 tpot:50 e2el:10000")).isEqualTo(o);
    assertThat(Objectives.parse("--slo", "  ttft:500   tpot:50,e2el : 10000 ")).isEqualTo(o);
  }

  @Test
  void millisecondsAreRoundedAsEveryLatencyLimit() {
    for (double ms : new double[] {0.001, 250.5, 0.1 + 0.2, 1234.5678901}) {
      assertThat(Objectives.parse("--slo", "queue=" + ms).list().get(0).limitNanos())
          .as("%s ms", ms)
          .isEqualTo(io.phasemeter.core.budget.LatencyLimit.nanos(ms));
      assertThat(
              Objectives.fromSloMs("slo_ms", java.util.Map.of("queue", ms))
                  .list()
                  .get(0)
                  .limitNanos())
          .isEqualTo(io.phasemeter.core.budget.LatencyLimit.nanos(ms));
    }
  }

  @Test
  void planMapTakesTheSameNamesAndNumbersAsMilliseconds() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("ttft", 500);
    m.put("tpot", "50ms");
    m.put("queue", 250.5);
    assertThat(Objectives.parse("plan.yaml: slo", m).toString())
        .isEqualTo("client_ttft=500ms,tpot=50ms,queue=250.5ms");
    assertThatThrownBy(() -> Objectives.parse("plan.yaml: slo", Map.of("ttfx", 5)))
        .hasMessageStartingWith("plan.yaml: slo.ttfx: unknown objective (known: ttft, tpot");
    assertThatThrownBy(() -> Objectives.parse("plan.yaml: slo", Map.of()))
        .hasMessageStartingWith("plan.yaml: slo: give objectives such as");
  }

  @Test
  void sloMsTakesCatalogueNamesOnly() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("client_ttft", 500);
    m.put("tpot", 50);
    m.put("client_total", 10000.0);
    m.put("queue", 250);
    assertThat(Objectives.fromSloMs(WHERE, m).keys())
        .containsExactly("client_ttft", "tpot", "client_total", "queue");
    assertThat(Objectives.fromSloMs(WHERE, Map.of())).isEqualTo(Objectives.NONE);
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "ttft|500|"
            + WHERE
            + ".ttft: ambiguous: in limits_ms 'ttft' means the server's figure;"
            + " write client_ttft (the client's) or server_ttft (the proxy's)",
        "total|500|"
            + WHERE
            + ".total: ambiguous: in limits_ms 'total' means the server's"
            + " figure; write client_total (the client's) or server_root (the proxy's)",
        "e2el|500|"
            + WHERE
            + ".e2el: vLLM's name, for --slo; slo_ms takes the catalogue's names:"
            + " client_total",
        "quue|500|" + WHERE + ".quue: unknown objective (known: client_total, client_ttft,",
        "queue|fast|" + WHERE + ".queue: expected a number of milliseconds, got 'fast'",
        "queue|500ms|" + WHERE + ".queue: expected a number of milliseconds, got '500ms'",
      })
  void sloMsErrorsNameTheKey(String key, String value, String message) {
    Object v;
    try {
      v = Double.parseDouble(value);
    } catch (NumberFormatException e) {
      v = value;
    }
    Map<String, Object> m = Map.of(key, v);
    assertThatThrownBy(() -> Objectives.fromSloMs(WHERE, m)).hasMessageStartingWith(message);
  }

  @Test
  void sloMsRefusesNonPositiveAndInfiniteLimits() {
    assertThatThrownBy(() -> Objectives.fromSloMs(WHERE, Map.of("queue", 0)))
        .hasMessage(WHERE + ".queue: must be above zero, got '0'");
    assertThatThrownBy(() -> Objectives.fromSloMs(WHERE, Map.of("queue", -3)))
        .hasMessage(WHERE + ".queue: must be above zero, got '-3'");
    assertThatThrownBy(() -> Objectives.fromSloMs(WHERE, Map.of("queue", Double.NaN)))
        .hasMessage(WHERE + ".queue: must be a finite limit, got 'NaN'");
    assertThatThrownBy(() -> Objectives.fromSloMs(WHERE, Map.of("queue", Double.POSITIVE_INFINITY)))
        .hasMessage(WHERE + ".queue: must be a finite limit, got 'Infinity'");
  }

  private static final Objectives SLO = Objectives.parse("--slo", "ttft=500,tpot=50,e2el=10s");

  private static Figures figures(double ttftMs, double tpotMs, double totalMs) {
    return p ->
        switch (p) {
          case CLIENT_TTFT -> ttftMs * 1e6;
          case TPOT -> tpotMs * 1e6;
          case CLIENT_TOTAL -> totalMs * 1e6;
          default -> Double.NaN;
        };
  }

  @Test
  void goodWhenEveryObjectiveHoldsAtOrBelowItsLimit() {
    Verdict v = SLO.judge(true, figures(500, 50, 10_000));
    assertThat(v.good()).isTrue();
    assertThat(v.firstMissed()).isNull();
    assertThat(v.missed()).isEmpty();
  }

  @Test
  void firstMissedFollowsTheObjectivesOrderAndMissedHasThemAll() {
    Verdict v = SLO.judge(true, figures(400, 50.000001, 10_001));
    assertThat(v.good()).isFalse();
    assertThat(v.firstMissed()).isEqualTo("tpot");
    assertThat(v.missed()).extracting(Objective::key).containsExactly("tpot", "client_total");
    Objectives reversed = Objectives.parse("--slo", "e2el=10s,tpot=50");
    assertThat(reversed.judge(true, figures(400, 51, 10_001)).firstMissed())
        .isEqualTo("client_total");
  }

  @Test
  void aFailedRequestIsNeverGood() {
    Verdict v = SLO.judge(false, figures(1, 1, 1));
    assertThat(v.good()).isFalse();
    assertThat(v.firstMissed()).isEqualTo(Verdict.ERROR).isEqualTo("error");
    assertThat(v.missed()).isEmpty();
    assertThat(Objectives.NONE.judge(false, p -> 0).good()).isFalse();
    assertThat(Objectives.NONE.judge(true, p -> Double.NaN).good()).isTrue();
  }

  @Test
  void oneOutputTokenHasTpotZeroWhichHolds() {
    // The Figures convention: TPOT of a request with at most one output token is 0, not absent.
    assertThat(SLO.judge(true, figures(100, 0, 100)).good()).isTrue();
  }

  @Test
  void anAbsentFigureIsUnjudgedAndNeverGood() {
    Objectives o = Objectives.parse("--slo", "ttft=500,queue=250,network_envelope=20");
    Verdict v = o.judge(true, figures(100, 1, 100)); // not joined: queue and envelope absent
    assertThat(v.good()).isFalse();
    assertThat(v.firstMissed()).isEqualTo("queue");
    assertThat(v.missed()).isEmpty();
    assertThat(v.unjudged())
        .extracting(Objective::key)
        .containsExactly("queue", "network_envelope");
  }

  @Test
  void aNegativeEnvelopeHolds() {
    Objectives o = Objectives.parse("--slo", "network_envelope=20");
    assertThat(o.judge(true, p -> -0.3e6).good()).isTrue();
  }

  @Test
  void acceptsOnlyPerRequestServiceFigures() {
    assertThat(Objectives.catalogueNames())
        .contains("client_ttft", "tpot", "client_total", "queue", "server_ttft", "gateway")
        .doesNotContain("itl", "schedule_lag", "ttft", "total", "auth", "prepare", "route");
    assertThat(List.of(Phases.values()).stream().filter(Objectives::accepts).count())
        .isEqualTo(Objectives.catalogueNames().size());
  }
}
