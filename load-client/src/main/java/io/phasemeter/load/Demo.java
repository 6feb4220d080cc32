package io.phasemeter.load;

import io.phasemeter.core.Durations;
import io.phasemeter.load.join.Admins;
import io.phasemeter.load.schedule.WarmUp;
import io.phasemeter.load.workload.Api;
import io.phasemeter.proxy.PhasemeterProxy;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.InputStream;
import java.io.PrintWriter;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code phasemeter demo}: the simulator and the proxy in this JVM on free ports, then a stepped
 * load that crosses the knee in about a minute. The live table shows the queue phase grow while
 * generation stays flat, the BREACH line names the queue, and the report is written.
 */
@Command(
    name = "demo",
    mixinStandardHelpOptions = true,
    description = {
      "Runs the simulator and the proxy in-process and drives a stepped load across the knee"
          + " (about a minute): live phase table, the breach when the queue budget goes, and a"
          + " report. Needs nothing but Java.",
      "",
      "With --search: the same simulator and proxy, then `phasemeter load search` against them"
          + " with the demo's budgets and workload (512-token prompts, 64-token answers, from 1"
          + " req/s): one line per probe, then the capacity with its 95 %% interval and the phase"
          + " that gives first (the queue); search.json, report.html and probes/ in --out; the"
          + " search's exit code. About 5 minutes (8 when the confirmation moves the bracket)."
    })
public final class Demo implements Callable<Integer> {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Option(
      names = "--steps",
      paramLabel = "R1,R2,…",
      split = ",",
      description = "offered rates (default: 4,8,12,16 req/s; capacity is about 10)")
  List<Double> steps = new ArrayList<>(List.of(4.0, 8.0, 12.0, 16.0));

  @Option(
      names = "--step-duration",
      paramLabel = "D",
      defaultValue = "12s",
      description = "length of each step (default: ${DEFAULT-VALUE})")
  String stepDuration;

  @Option(
      names = "--out",
      paramLabel = "DIR",
      description = "where the report goes (default: phasemeter-out/demo-<time>)")
  Path out;

  @Option(
      names = "--report-interval",
      paramLabel = "D",
      defaultValue = "5s",
      description = "live table period (default: ${DEFAULT-VALUE})")
  String reportInterval;

  @Option(
      names = "--search",
      description =
          "run a capacity search (`phasemeter load search`) against the demo's simulator and"
              + " proxy instead of the stepped load")
  boolean search;

  @Option(
      names = "--probe-duration",
      paramLabel = "D",
      description =
          "with --search: each probe's measured duration (the search's --duration; default: "
              + SearchCommand.DEFAULT_PROBE
              + ")")
  String probeDuration;

  /**
   * More arguments for the search, after the demo's own (tests: a start near the answer, short
   * probes); empty for users.
   */
  List<String> searchArgs = List.of();

  /** The demo's pool: 8 slots in front of a simulator decoding 10 ms per token. */
  static final int SLOTS = 8;

  @Override
  public Integer call() throws Exception {
    PrintWriter stdout = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    if (probeDuration != null && !search) {
      err.println("phasemeter demo: --probe-duration goes with --search");
      return 2;
    }
    Path dir = out == null ? LoadMain.defaultOut("demo") : out;
    Files.createDirectories(dir);
    Path budgetsFile = dir.resolve("budgets.yaml");
    try (InputStream in = Demo.class.getResourceAsStream("/demo-budgets.yaml")) {
      Files.write(budgetsFile, in.readAllBytes());
    }
    Vertx servers = Vertx.vertx();
    try {
      Simulator sim =
          Simulator.start(
                  servers,
                  SimulatorConfig.defaults()
                      .withPort(0)
                      .withSlots(32)
                      .withDecodeStepMs(10)
                      .withDecodeStepGrowth(0.02)
                      .withPrefillTokensPerSecond(20_000))
              .await(10, TimeUnit.SECONDS);
      ProxyConfig config =
          ConfigLoader.parse(
              "listen: {host: 127.0.0.1, port: 0}\n"
                  + "admin: {host: 127.0.0.1, port: 0}\n"
                  + "pools:\n"
                  + "  - name: default\n"
                  + "    models: [sim-llama]\n"
                  + "    upstreams: [http://127.0.0.1:"
                  + sim.port()
                  + "]\n"
                  + "    slots: "
                  + SLOTS
                  + "\n"
                  + "    queue: {max: 1000, timeout: 60s}\n",
              "demo proxy config");
      PhasemeterProxy proxy =
          PhasemeterProxy.builder(servers, config)
              .budgets(Budgets.load(budgetsFile))
              .start()
              .await(10, TimeUnit.SECONDS);
      if (search) {
        return search(sim.port(), proxy.port(), proxy.adminPort(), budgetsFile, dir, stdout, err);
      }
      stdout.println(
          "phasemeter demo: simulator on :"
              + sim.port()
              + " (decode 10 ms/token), proxy on :"
              + proxy.port()
              + " ("
              + SLOTS
              + " slots), admin on :"
              + proxy.adminPort()
              + ". Offered load steps "
              + steps
              + " req/s of 512-token prompts and 64-token answers; the pool serves about 10 req/s,"
              + " so the later steps queue on purpose.");
      stdout.flush();
      Duration step = Durations.parsePositive("--step-duration", stepDuration);
      LoadOptions o =
          new LoadOptions(
              URI.create("http://127.0.0.1:" + proxy.port()),
              Admins.of(URI.create("http://127.0.0.1:" + proxy.adminPort())),
              null,
              "sim-llama",
              0,
              "poisson",
              1.0,
              0,
              steps,
              step,
              step.multipliedBy(steps.size()),
              1024,
              null,
              512,
              64,
              null,
              true,
              budgetsFile,
              dir,
              1,
              Duration.ofSeconds(90),
              Durations.parsePositive("--report-interval", reportInterval),
              Duration.ofSeconds(3),
              LoadOptions.DEFAULT_JOIN_FETCH_TIMEOUT,
              Api.COMPLETIONS,
              LoadOptions.DEFAULT_WARMUP,
              Duration.ZERO,
              false,
              true,
              null,
              LoadOptions.DEFAULT_MAX_ERROR_RATE,
              WarmUp.Target.SELF,
              true,
              null,
              null,
              null,
              null,
              null,
              null,
              null);
      int code = LoadRun.execute(o, stdout, err);
      if (code == LoadRun.BREACHED) {
        stdout.println(
            "phasemeter demo: the breach above is the point of the demo (a real run exits 3 on it).");
        return 0;
      }
      return code;
    } finally {
      servers.close().await(10, TimeUnit.SECONDS);
    }
  }

  /**
   * {@code load search} itself, through its own command line (the same validation, defaults and
   * code as a user's search), against the demo's servers with the demo's budgets and workload.
   */
  private int search(
      int simPort,
      int proxyPort,
      int adminPort,
      Path budgetsFile,
      Path dir,
      PrintWriter stdout,
      PrintWriter err) {
    stdout.println(
        "phasemeter demo: simulator on :"
            + simPort
            + " (decode 10 ms/token), proxy on :"
            + proxyPort
            + " ("
            + SLOTS
            + " slots), admin on :"
            + adminPort
            + ". A capacity search of 512-token prompts and 64-token answers against the demo's"
            + " budgets (queue p95 <= 250 ms, ...): the pool serves about 10 req/s.");
    stdout.flush();
    List<String> args =
        new ArrayList<>(
            List.of(
                "search",
                "--url",
                "http://127.0.0.1:" + proxyPort,
                "--admin",
                "http://127.0.0.1:" + adminPort,
                "--model",
                "sim-llama",
                "--input-tokens",
                "512",
                "--output-tokens",
                "64",
                "--budgets",
                budgetsFile.toString(),
                "--timeout",
                "90s",
                "--out",
                dir.toString()));
    if (probeDuration != null) {
      args.addAll(List.of("--duration", probeDuration));
    }
    args.addAll(searchArgs);
    return LoadMain.commandLine(stdout, err, Map.of()).execute(args.toArray(String[]::new));
  }
}
