package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.PhasemeterProxy;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.PriorityQueue;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * A queue whose truth is known, for the search's end-to-end tests: the simulator with no batch
 * growth serves every request in a fixed T = in ÷ prefill + (out − 1) × step behind a proxy pool of
 * S slots, so requests wait in the proxy's {@code queue} phase exactly as in an M/D/S queue
 * (Poisson arrivals, deterministic service, S servers, first come first served), and the engine
 * serves at most S ÷ T per second. {@link #knee} gives the rate at which that queue's wait p95
 * reaches a budget, from a discrete-event simulation of it.
 */
final class QueueingPool implements AutoCloseable {
  /**
   * The engine and the pool.
   *
   * @param slots the pool's slots (the simulator has more, so it never queues itself)
   * @param input prompt tokens of every request
   * @param prefillTps the simulator's prefill tokens per second
   * @param output output tokens of every request
   * @param stepMs the simulator's decode step
   */
  record Engine(int slots, int input, double prefillTps, int output, double stepMs) {
    /** The time to the first token, in seconds: in ÷ prefill. */
    double prefillS() {
      return input / prefillTps;
    }

    /** T, in seconds. */
    double serviceS() {
      return prefillS() + (output - 1) * stepMs / 1000;
    }

    /** S ÷ T: the most the engine serves per second. */
    double bound() {
      return slots / serviceS();
    }
  }

  final Engine engine;
  private final Vertx servers;
  private final PhasemeterProxy proxy;

  private QueueingPool(Engine engine, Vertx servers, PhasemeterProxy proxy) {
    this.engine = engine;
    this.servers = servers;
    this.proxy = proxy;
  }

  /** Starts the simulator (64 slots) and the proxy (the pool's slots, a long queue) on port 0. */
  static QueueingPool start(Engine e) throws Exception {
    Vertx servers = Vertx.vertx();
    try {
      Simulator sim =
          Simulator.start(
                  servers,
                  SimulatorConfig.defaults()
                      .withPort(0)
                      .withSlots(64)
                      .withDecodeStepMs(e.stepMs())
                      .withDecodeStepGrowth(0)
                      .withPrefillTokensPerSecond(e.prefillTps())
                      // T's prefill is every prompt's: the warm-up and the probes send the same
                      // seeds' prompts again, which the prefix cache would serve.
                      .withPrefixCacheBlocks(0))
              .await(10, TimeUnit.SECONDS);
      PhasemeterProxy proxy =
          PhasemeterProxy.builder(
                  servers,
                  ConfigLoader.parse(
                      "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                          + "pools:\n  - name: default\n    models: [sim-llama]\n"
                          + "    upstreams: [http://127.0.0.1:"
                          + sim.port()
                          + "]\n    slots: "
                          + e.slots()
                          + "\n    queue: {max: 1000, timeout: 60s}\n",
                      "test.yaml"))
              .start()
              .await(10, TimeUnit.SECONDS);
      return new QueueingPool(e, servers, proxy);
    } catch (Exception x) {
      servers.close();
      throw x;
    }
  }

  String url() {
    return "http://127.0.0.1:" + proxy.port();
  }

  String admin() {
    return "http://127.0.0.1:" + proxy.adminPort();
  }

  /**
   * One run at {@code rate} for {@code duration}, discarded: the proxy and the simulator run in the
   * test's JVM, cold, and a search meets long-running servers (a cold JIT made the first probe's
   * service time 180 ms at p95).
   *
   * @param joined with {@code --admin}, as the search's probes that follow (its record feed warmed
   *     too); SearchQueueKneeTest keeps the warm-up it was measured with, without
   */
  void warm(Path out, double rate, String duration, boolean joined) {
    java.util.List<String> join =
        joined ? java.util.List.of("--admin", admin()) : java.util.List.of();
    int code =
        LoadMain.commandLine(
                new PrintWriter(new StringWriter(), true),
                new PrintWriter(new StringWriter(), true))
            .execute(
                RunArgs.quiet(
                    java.util.stream.Stream.concat(
                            java.util.stream.Stream.of(
                                "run",
                                "--url",
                                url(),
                                "--model",
                                "sim-llama",
                                "--input-tokens",
                                "" + engine.input(),
                                "--output-tokens",
                                "" + engine.output(),
                                "--rate",
                                "" + Math.round(rate),
                                "--duration",
                                duration,
                                "--out",
                                out.toString()),
                            join.stream())
                        .toList()));
    assertThat(code).as("the warm-up run").isZero();
  }

  @Override
  public void close() throws Exception {
    servers.close().await(10, TimeUnit.SECONDS);
  }

  /**
   * The rate at which an M/D/S queue's wait p95 is {@code budget}: bisection on a discrete-event
   * simulation with common random numbers (the same unit-rate arrival stream scaled to each rate,
   * so the p95 grows with the rate).
   */
  static double knee(int servers, double service, double budget) {
    Random r = new Random(34);
    int n = 200_000;
    double[] unitGaps = new double[n];
    for (int i = 0; i < n; i++) {
      unitGaps[i] = -Math.log(1 - r.nextDouble());
    }
    double lo = 0;
    double hi = servers / service;
    for (int i = 0; i < 40; i++) {
      double mid = (lo + hi) / 2;
      if (waitP95(unitGaps, mid, servers, service) <= budget) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  /** p95 of the wait for a server, FIFO, after the first tenth (the start from empty). */
  static double waitP95(double[] unitGaps, double rate, int servers, double service) {
    double[] w = waits(unitGaps, rate, servers, service);
    Arrays.sort(w);
    return w[(int) Math.ceil(0.95 * w.length) - 1];
  }

  /** Every wait for a server, FIFO, after the first tenth (the start from empty). */
  static double[] waits(double[] unitGaps, double rate, int servers, double service) {
    PriorityQueue<Double> free = new PriorityQueue<>();
    for (int i = 0; i < servers; i++) {
      free.add(0.0);
    }
    double t = 0;
    int skip = unitGaps.length / 10;
    double[] waits = new double[unitGaps.length - skip];
    for (int i = 0; i < unitGaps.length; i++) {
      t += unitGaps[i] / rate;
      double start = Math.max(t, free.poll());
      free.add(start + service);
      if (i >= skip) {
        waits[i - skip] = start - t;
      }
    }
    return waits;
  }
}
