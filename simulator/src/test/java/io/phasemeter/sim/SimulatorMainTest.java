package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** The command line, run in-process; only paths that return (bad usage, help, version). */
class SimulatorMainTest {
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  private int run(String... args) {
    CommandLine cl = SimulatorMain.commandLine();
    cl.setOut(new PrintWriter(out, true));
    cl.setErr(new PrintWriter(err, true));
    return cl.execute(args);
  }

  @Test
  void unparsableValueIsExitCode2WithOneLine() {
    assertThat(run("--slots", "many")).isEqualTo(2);
    assertThat(err.toString().strip().lines()).hasSize(1);
    assertThat(err.toString()).contains("--slots").contains("many");
  }

  @Test
  void unknownOptionIsExitCode2() {
    assertThat(run("--slotz", "4")).isEqualTo(2);
    assertThat(err.toString().strip().lines()).hasSize(1);
  }

  @Test
  void invalidValueIsExitCode2NamingTheFlag() {
    assertThat(run("--slots", "0")).isEqualTo(2);
    assertThat(err.toString().strip().lines()).hasSize(1);
    assertThat(err.toString()).contains("--slots must be at least 1");
    assertThat(run("--error-rate", "2")).isEqualTo(2);
    assertThat(err.toString()).contains("--error-rate");
  }

  @Test
  void helpListsEveryFlag() {
    assertThat(run("--help")).isZero();
    assertThat(out.toString())
        .contains("--port", "--host", "--model", "--slots", "--max-queue")
        .contains("--prefill-tokens-per-s", "--decode-step-ms", "--decode-step-growth")
        .contains("--step-clock", "per-sequence|shared", "(default: per-sequence)")
        .contains("--default-max-tokens", "--max-model-len", "--seed")
        .contains("--error-rate", "--stall-rate", "--stall-ms", "--disconnect-rate")
        .contains("--prefix-cache-blocks", "16384, 262144 tokens", "0 = off")
        .contains("--prompt-tokens-details", "cached_tokens")
        .contains("x-sim-ttft-ms", "error_event", "x-sim-reasoning-tokens")
        .contains("/v1/responses", "/v1/embeddings", "/v1/audio/transcriptions", "/tokenize");
  }

  @Test
  void stepClockIsPerSequenceUnlessAskedForShared() {
    SimulatorMain main = new SimulatorMain();
    new CommandLine(main).parseArgs("--port", "0");
    assertThat(main.config().stepClock()).isEqualTo(SimulatorConfig.StepClock.PER_SEQUENCE);
    main = new SimulatorMain();
    new CommandLine(main).parseArgs("--step-clock=shared");
    assertThat(main.config().stepClock()).isEqualTo(SimulatorConfig.StepClock.SHARED);
    main = new SimulatorMain();
    new CommandLine(main).parseArgs("--step-clock", "per-sequence");
    assertThat(main.config().stepClock()).isEqualTo(SimulatorConfig.StepClock.PER_SEQUENCE);
  }

  @Test
  void badStepClockIsExitCode2NamingTheFlag() {
    assertThat(run("--step-clock", "lockstep")).isEqualTo(2);
    assertThat(err.toString().strip().lines()).hasSize(1);
    assertThat(err.toString()).contains("--step-clock must be per-sequence or shared");
  }

  @Test
  void prefixCacheFlagsBuildTheConfigAndANegativeSizeIsExitCode2() {
    SimulatorMain main = new SimulatorMain();
    new CommandLine(main).parseArgs("--prefix-cache-blocks", "0", "--prompt-tokens-details");
    assertThat(main.config().prefixCacheBlocks()).isZero();
    assertThat(main.config().promptTokensDetails()).isTrue();
    assertThat(run("--prefix-cache-blocks", "-1")).isEqualTo(2);
    assertThat(err.toString().strip().lines()).hasSize(1);
    assertThat(err.toString())
        .contains("--prefix-cache-blocks must be between 0 (off) and 1048576, got -1");
  }

  @Test
  void versionPrints() {
    assertThat(run("--version")).isZero();
    assertThat(out.toString()).startsWith("phasemeter sim");
  }

  @Test
  void repeatedModelsBuildTheConfig() {
    SimulatorMain main = new SimulatorMain();
    new CommandLine(main).parseArgs("--model", "a", "--model", "b", "--port", "0");
    assertThat(main.config().models()).containsExactly("a", "b");
    assertThat(main.config().port()).isZero();
  }
}
