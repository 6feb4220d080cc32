package io.phasemeter.load.campaign;

import io.phasemeter.core.Durations;
import io.phasemeter.load.LoadMain;
import io.phasemeter.load.LoadOptions;
import io.phasemeter.load.LoadRun;
import io.phasemeter.load.http.Transport;
import io.phasemeter.load.join.Admins;
import io.phasemeter.load.workload.ApiKey;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code phasemeter load campaign}. */
@Command(
    name = "campaign",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    description = {
      "Runs a benchmark campaign: every load point of the plan (profiles and datasets ×"
          + " concurrency levels and × rates, sessions × concurrency levels, each trace replay one"
          + " point), one discarded warm-up run per point, then the repeats in blocks"
          + " that each run every point once in a fresh seeded random order. Runs with failed"
          + " requests, wrong output lengths, inputs off by more than 1 %%, client errors or drops"
          + " are listed as invalid with their reasons and left out of the statistics. Per point"
          + " and metric: mean, standard deviation and the 95 %% Student-t interval (n = 3 gives"
          + " t = 4.30), plus every run's figures. Conditions (version, commit, hashes, the"
          + " upstream's /v1/models and server headers, the proxy's settings, your --label"
          + " values) are recorded beside the results.",
      "",
      "Writes campaign.json, runs.csv, report.html and runs/<run>/ (each run's own report) into"
          + " --out. One progress line per run.",
      "",
      "Exit codes: 0 every measured run valid; 4 some run invalid (listed; the report is still"
          + " written) or the --start-cmd server never became ready; 2 bad usage or plan."
    },
    exitCodeOnInvalidInput = 2)
public final class CampaignCommand implements Callable<Integer> {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @CommandLine.ParentCommand LoadMain parent;

  @Option(
      names = "--plan",
      required = true,
      paramLabel = "FILE",
      description =
          "the plan (YAML), e.g. config/campaign.yaml; its key api_key_env: NAME sends the API key"
              + " held by environment variable NAME on every run's requests, as load run"
              + " --api-key-env; the trace and dataset files it names are resolved against its"
              + " directory and read, and checked, before any run")
  Path plan;

  @Option(
      names = "--url",
      required = true,
      paramLabel = "URL",
      description = "target base URL (the proxy or the server), e.g. http://127.0.0.1:8080")
  String url;

  @Option(
      names = "--ca-file",
      paramLabel = "FILE",
      description =
          "PEM certificates to trust over https INSTEAD of the platform's trust store, for --url,"
              + " --admin and --server-url, as load run (a flag only: a plan has no key for it)")
  Path caFile;

  @Option(
      names = "--insecure",
      description =
          "over https, verify neither the server's certificate nor its name, as load run (a"
              + " warning at start; each run's conditions say tls_verify off; a flag only)")
  boolean insecure;

  @Option(
      names = "--http2",
      description =
          "every run speaks HTTP/2 (h2 via ALPN over https, h2c with prior knowledge over http),"
              + " as load run (a flag only: a plan has no key for it)")
  boolean http2;

  @Option(
      names = "--admin",
      paramLabel = "URL",
      description =
          "the proxy's admin URL: join each run with its records (queue p95) and record its"
              + " version, sampling and slot capacity; repeatable, one per replica behind a"
              + " Service (each run joins across all, as load run)")
  List<String> admins = new ArrayList<>();

  @Option(
      names = "--admin-discover",
      paramLabel = "dns://NAME:PORT",
      description =
          "every replica's admin address from a name (a Kubernetes headless Service), resolved"
              + " again every 10 s, as load run")
  String adminDiscover;

  @Option(
      names = "--join-fetch-timeout",
      paramLabel = "D",
      defaultValue = "10s",
      description =
          "with --admin: after each run, look the requests still unjoined up by trace id on every"
              + " replica for at most D; 0 = off (default: ${DEFAULT-VALUE})")
  String joinFetchTimeout;

  @Option(names = "--admin-token", paramLabel = "TOKEN", description = "admin bearer token")
  String adminToken;

  @Option(
      names = "--out",
      paramLabel = "DIR",
      description = "where the campaign goes (default: phasemeter-out/campaign-<time>)")
  Path out;

  @Option(
      names = "--label",
      paramLabel = "KEY=VALUE",
      description =
          "a condition only you know, recorded with the results (repeatable): e.g. --label"
              + " gpu=A100-40GB --label engine=vllm@sha256:… --label quant=fp8")
  Map<String, String> labels = new LinkedHashMap<>();

  @Option(
      names = "--proxy-config",
      paramLabel = "FILE",
      description = "the proxy's config file: its SHA-256, pools and limits are recorded")
  Path proxyConfig;

  @Option(
      names = "--start-cmd",
      paramLabel = "CMD",
      description =
          "start the inference server with this shell command, time cold and warm starts"
              + " (/health, then the first completion) in pairs, keep the last one running for"
              + " the campaign and stop it at the end")
  String startCmd;

  @Option(
      names = "--cold-cmd",
      paramLabel = "CMD",
      description =
          "shell command run before each cold start (e.g. drop the page cache or the compile"
              + " cache); without it only the first cold start is sure to be cold")
  String coldCmd;

  @Option(
      names = "--server-url",
      paramLabel = "URL",
      description = "where --start-cmd's server answers /health (default: --url)")
  String serverUrl;

  @Option(
      names = "--start-pairs",
      paramLabel = "N",
      defaultValue = "3",
      description = "cold/warm start pairs to time, at least 3 (default: ${DEFAULT-VALUE})")
  int startPairs;

  @Option(
      names = "--ready-timeout",
      paramLabel = "D",
      defaultValue = "10m",
      description = "longest wait for a started server to be ready (default: ${DEFAULT-VALUE})")
  String readyTimeout;

  @Option(
      names = "--join-grace",
      paramLabel = "D",
      defaultValue = "3s",
      description = "with --admin: wait for the proxy's last records (default: ${DEFAULT-VALUE})")
  String joinGrace;

  @Override
  public Integer call() throws Exception {
    PrintWriter stdout = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    Plan p;
    CampaignRunner.Options o;
    try {
      p = Plan.load(plan);
      ApiKey apiKey =
          p.apiKeyEnv() == null
              ? null
              : ApiKey.fromEnv(
                  p.file() + ": key 'api_key_env'",
                  p.apiKeyEnv(),
                  parent == null ? System.getenv() : parent.environment());
      Admins admin = Admins.parse(admins, adminDiscover);
      Transport transport = Transport.of(caFile, insecure, http2);
      p.checkSlo(admin != null);
      if (startCmd == null && (coldCmd != null || serverUrl != null)) {
        throw new IllegalArgumentException("--cold-cmd and --server-url go with --start-cmd");
      }
      if (startCmd != null && startPairs < 3) {
        throw new IllegalArgumentException("--start-pairs must be at least 3, got " + startPairs);
      }
      o =
          new CampaignRunner.Options(
              plan,
              httpUrl("--url", url),
              admin,
              adminToken,
              out == null ? defaultOut() : out,
              labels,
              proxyConfig,
              startCmd,
              coldCmd,
              serverUrl == null ? null : httpUrl("--server-url", serverUrl),
              startCmd == null ? 0 : startPairs,
              Durations.parsePositive("--ready-timeout", readyTimeout),
              Durations.parsePositive("--join-grace", joinGrace),
              LoadOptions.joinFetchTimeout("--join-fetch-timeout", joinFetchTimeout),
              apiKey,
              transport);
      if (proxyConfig != null && !Files.isReadable(proxyConfig)) {
        throw new IllegalArgumentException("--proxy-config " + proxyConfig + ": not readable");
      }
      new CampaignRunner(p, o, stdout).check();
    } catch (IllegalArgumentException | IOException e) {
      err.println("phasemeter load campaign: " + e.getMessage());
      return LoadRun.USAGE;
    }
    if (insecure) {
      err.println(
          "phasemeter load campaign: warning: --insecure: the server's certificate and name are not"
              + " verified");
      err.flush();
    }
    CampaignRunner.Result r;
    try {
      r = new CampaignRunner(p, o, stdout).run();
    } catch (CampaignRunner.ServerStartException e) {
      err.println("phasemeter load campaign: " + e.getMessage());
      return LoadRun.INVALID_RUN;
    }
    long invalid = r.runs().stream().filter(x -> !x.entry().warmup() && !x.valid()).count();
    long measured = r.runs().stream().filter(x -> !x.entry().warmup()).count();
    stdout.println(
        "phasemeter campaign: "
            + (measured - invalid)
            + " of "
            + measured
            + " measured runs valid; report written to "
            + o.out().toAbsolutePath().resolve(CampaignReport.HTML_FILE));
    if (invalid > 0) {
      stdout.println(
          "phasemeter campaign: "
              + invalid
              + " invalid run(s), listed in the report and left out of the statistics (exit 4)");
    }
    stdout.flush();
    return invalid > 0 ? LoadRun.INVALID_RUN : LoadRun.OK;
  }

  private static URI httpUrl(String flag, String text) {
    URI u;
    try {
      u = URI.create(text);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(flag + " is not a URL: " + text);
    }
    if (u.getScheme() == null
        || !(u.getScheme().equals("http") || u.getScheme().equals("https"))
        || u.getHost() == null) {
      throw new IllegalArgumentException(flag + " must be an http(s) URL, got " + text);
    }
    return u;
  }

  private static Path defaultOut() {
    return Path.of(
        "phasemeter-out",
        "campaign-" + LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")));
  }
}
