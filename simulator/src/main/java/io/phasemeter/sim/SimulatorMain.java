package io.phasemeter.sim;

import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code phasemeter sim}: runs the simulated vLLM server until SIGTERM or Ctrl-C. */
@Command(
    name = "phasemeter sim",
    mixinStandardHelpOptions = true,
    versionProvider = SimulatorMain.Version.class,
    sortOptions = false,
    usageHelpAutoWidth = true,
    description = {
      "An OpenAI-compatible inference server that behaves like vLLM: /v1/chat/completions,"
          + " /v1/completions, /v1/responses (GET and DELETE /v1/responses/{id}, POST"
          + " /v1/responses/{id}/cancel; the last 1,000 stored), /v1/embeddings,"
          + " /v1/audio/transcriptions and /v1/audio/translations (uploads counted and hashed,"
          + " never held), /tokenize, /detokenize, /v1/models, /v1/models/{id}, /version, /health"
          + " and /metrics, with continuous batching (slots, prefill time, decode steps that grow"
          + " with the batch), a prefix cache and injectable faults.",
      "",
      "Per-request headers: x-sim-ttft-ms, x-sim-decode-step-ms, x-sim-reasoning-tokens"
          + " (/v1/responses), x-sim-fault (error|error_event|reset|stall|disconnect|malformed),"
          + " x-sim-fault-after-tokens, x-sim-stall-ms.",
      ""
    },
    exitCodeListHeading = "%nExit codes:%n",
    exitCodeList = {"0:stopped cleanly", "1:failed to start (e.g. port in use)", "2:bad usage"})
public final class SimulatorMain implements Callable<Integer> {
  private static final SimulatorConfig D = SimulatorConfig.defaults();

  @Spec CommandSpec spec;

  @Option(names = "--host", description = "Address to bind (default: ${DEFAULT-VALUE}).")
  String host = D.host();

  @Option(
      names = "--port",
      description = "Port to bind; 0 picks a free one (default: ${DEFAULT-VALUE}).")
  int port = D.port();

  @Option(
      names = "--model",
      paramLabel = "NAME",
      description = "Served model name; repeat for several (default: sim-llama).")
  List<String> models;

  @Option(
      names = "--slots",
      description =
          "Sequences running at once, like vLLM's --max-num-seqs (default: ${DEFAULT-VALUE}).")
  int slots = D.slots();

  @Option(
      names = "--max-queue",
      description =
          "Requests allowed to wait for a slot; more get 503 (default: ${DEFAULT-VALUE}).")
  int maxQueue = D.maxQueue();

  @Option(
      names = "--prefill-tokens-per-s",
      paramLabel = "X",
      description = "Prompt tokens prefilled per second (default: ${DEFAULT-VALUE}).")
  double prefillTokensPerSecond = D.prefillTokensPerSecond();

  @Option(
      names = "--decode-step-ms",
      paramLabel = "Y",
      description = "One decode step (one token) with a batch of one (default: ${DEFAULT-VALUE}).")
  double decodeStepMs = D.decodeStepMs();

  @Option(
      names = "--decode-step-growth",
      paramLabel = "G",
      description =
          "Step grows by this share per extra running sequence:"
              + " step = Y * (1 + G * (running - 1)) (default: ${DEFAULT-VALUE}).")
  double decodeStepGrowth = D.decodeStepGrowth();

  @Option(
      names = "--step-clock",
      paramLabel = "per-sequence|shared",
      description =
          "per-sequence: each sequence's tokens on its own clock from its own start; shared: one"
              + " step clock for the running batch, as vLLM's engine loop, so every running"
              + " sequence gets its token at the same step boundary and one admitted mid-step"
              + " joins at the next (a request with x-sim-decode-step-ms keeps its own clock)"
              + " (default: ${DEFAULT-VALUE}).")
  String stepClock = D.stepClock().flag();

  @Option(
      names = "--default-max-tokens",
      description = "max_tokens when a request gives none (default: ${DEFAULT-VALUE}).")
  int defaultMaxTokens = D.defaultMaxTokens();

  @Option(
      names = "--max-model-len",
      description = "Context length, prompt plus completion (default: ${DEFAULT-VALUE}).")
  int maxModelLen = D.maxModelLen();

  @Option(
      names = "--seed",
      description =
          "Seed of output text, EOS positions and fault draws (default: ${DEFAULT-VALUE}).")
  long seed = D.seed();

  @Option(
      names = "--error-rate",
      paramLabel = "R",
      description = "Share of requests answered with 500 (default: ${DEFAULT-VALUE}).")
  double errorRate = D.errorRate();

  @Option(
      names = "--stall-rate",
      paramLabel = "R",
      description =
          "Share of requests that stall after their first token (default: ${DEFAULT-VALUE}).")
  double stallRate = D.stallRate();

  @Option(
      names = "--stall-ms",
      paramLabel = "MS",
      description = "Length of a stall drawn by --stall-rate (default: ${DEFAULT-VALUE}).")
  long stallMs = D.stallMs();

  @Option(
      names = "--disconnect-rate",
      paramLabel = "R",
      description =
          "Share of requests whose connection is closed after the first token"
              + " (default: ${DEFAULT-VALUE}).")
  double disconnectRate = D.disconnectRate();

  @Option(
      names = "--kv-cache-tokens",
      paramLabel = "N",
      description =
          "KV-cache size in tokens (blocks of 16), for vllm:kv_cache_usage_perc: the blocks held"
              + " by running sequences (prompt and tokens so far) over this; 0 = "
              + SimulatorConfig.KV_CACHE_TOKENS_PER_SLOT
              + " per slot (default: ${DEFAULT-VALUE}).")
  int kvCacheTokens = D.kvCacheTokens();

  @Option(
      names = "--prefix-cache-blocks",
      paramLabel = "N",
      description =
          "Prefix cache, as vLLM's automatic prefix caching: the last N prompt blocks of 16 tokens"
              + " whose prefill was computed (least recently used leave first); a prompt's leading"
              + " blocks found there skip prefill (at least one token is always computed)."
              + " Token-id prompts hash their ids, text its 4-character units, a chat its messages"
              + " in order with their roles. Counted in vllm:prefix_cache_queries_total and"
              + " vllm:prefix_cache_hits_total (tokens). 0 = off; at most "
              + SimulatorConfig.MAX_PREFIX_CACHE_BLOCKS
              + " (default: ${DEFAULT-VALUE}, "
              + SimulatorConfig.DEFAULT_PREFIX_CACHE_BLOCKS * SimulatorConfig.KV_BLOCK_TOKENS
              + " tokens).")
  int prefixCacheBlocks = D.prefixCacheBlocks();

  @Option(
      names = "--prompt-tokens-details",
      description =
          "Report the prefix cache's hit in usage.prompt_tokens_details.cached_tokens (when above"
              + " 0) and in the Responses API's input_tokens_details.cached_tokens, as vLLM's"
              + " --enable-prompt-tokens-details (default: off).")
  boolean promptTokensDetails = D.promptTokensDetails();

  @Option(
      names = "--otlp-traces-endpoint",
      paramLabel = "URL",
      defaultValue = "${env:OTEL_EXPORTER_OTLP_TRACES_ENDPOINT}",
      description =
          "Export one llm_request span per finished request, as vLLM does, with vLLM's"
              + " gen_ai.latency.* attributes (OTLP/HTTP protobuf), e.g."
              + " http://127.0.0.1:9464/v1/traces (default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,"
              + " else none).")
  String otlpTracesEndpoint;

  @Option(
      names = "--ssl-certfile",
      paramLabel = "FILE",
      description =
          "Serve HTTPS with this PEM certificate (chain), as vLLM's --ssl-certfile; needs"
              + " --ssl-keyfile.")
  String sslCertfile;

  @Option(
      names = "--ssl-keyfile",
      paramLabel = "FILE",
      description = "The PEM private key of --ssl-certfile, as vLLM's --ssl-keyfile.")
  String sslKeyfile;

  @Option(
      names = "--ssl-ca-certs",
      paramLabel = "FILE",
      description =
          "PEM CA certificates that client certificates are checked against, as vLLM's"
              + " --ssl-ca-certs.")
  String sslCaCerts;

  @Option(
      names = "--ssl-cert-reqs",
      paramLabel = "0|1|2",
      description =
          "Client certificates, as vLLM's --ssl-cert-reqs (Python's ssl.VerifyMode): 0 none,"
              + " 1 optional (checked when given), 2 required (default: ${DEFAULT-VALUE}).")
  int sslCertReqs = 0;

  /** The HTTPS of the --ssl-* flags, null for plain HTTP; throws naming the flag. */
  SimulatorTls tls() {
    return SimulatorTls.of(sslCertfile, sslKeyfile, sslCaCerts, sslCertReqs);
  }

  /** Builds the configuration from the parsed options; throws with a message naming the flag. */
  SimulatorConfig config() {
    return new SimulatorConfig(
        host,
        port,
        models == null || models.isEmpty() ? D.models() : models,
        slots,
        maxQueue,
        prefillTokensPerSecond,
        decodeStepMs,
        decodeStepGrowth,
        SimulatorConfig.StepClock.parse(stepClock),
        defaultMaxTokens,
        maxModelLen,
        seed,
        errorRate,
        stallRate,
        stallMs,
        disconnectRate,
        otlpTracesEndpoint,
        kvCacheTokens,
        prefixCacheBlocks,
        promptTokensDetails);
  }

  @Override
  public Integer call() throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    SimulatorConfig config;
    SimulatorTls tls;
    try {
      config = config();
      tls = tls();
    } catch (IllegalArgumentException e) {
      err.println("phasemeter sim: " + e.getMessage() + " (see --help)");
      err.flush();
      return 2;
    }
    Vertx vertx = Vertx.vertx();
    Simulator simulator;
    try {
      simulator = Simulator.start(vertx, config, tls).await(30, TimeUnit.SECONDS);
    } catch (IllegalArgumentException e) {
      // An unusable TLS file: bad usage, nothing started.
      err.println("phasemeter sim: " + e.getMessage() + " (see --help)");
      err.flush();
      vertx.close().await(10, TimeUnit.SECONDS);
      return 2;
    } catch (Exception e) {
      err.println("phasemeter sim: could not start: " + e.getMessage());
      err.flush();
      vertx.close().await(10, TimeUnit.SECONDS);
      return 1;
    }
    out.println(
        "phasemeter-sim listening on "
            + (tls == null ? "http" : "https")
            + "://"
            + config.host()
            + ":"
            + simulator.port()
            + " (models: "
            + String.join(", ", config.models())
            + ", slots: "
            + config.slots()
            + ", step clock: "
            + config.stepClock().flag()
            + ", prefix cache: "
            + (config.prefixCacheBlocks() > 0 ? config.prefixCacheBlocks() + " blocks" : "off")
            + ")");
    out.flush();
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    simulator.close().await(5, TimeUnit.SECONDS);
                    vertx.close().await(5, TimeUnit.SECONDS);
                  } catch (Exception e) {
                    // the JVM is going away; nothing left to report to
                  } finally {
                    stopped.countDown();
                  }
                },
                "phasemeter-sim-shutdown"));
    stopped.await();
    return 0;
  }

  /**
   * The command line, ready to execute: bad usage prints one line on stderr and yields exit code 2.
   */
  public static CommandLine commandLine() {
    CommandLine cl = new CommandLine(new SimulatorMain());
    cl.setParameterExceptionHandler(
        (ex, args) -> {
          PrintWriter err = ex.getCommandLine().getErr();
          err.println("phasemeter sim: " + ex.getMessage() + " (see --help)");
          err.flush();
          return 2;
        });
    return cl;
  }

  public static void main(String[] args) {
    int code = commandLine().execute(args);
    if (code != 0) {
      System.exit(code);
    }
  }

  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      String v = SimulatorMain.class.getPackage().getImplementationVersion();
      return new String[] {"phasemeter sim " + (v == null ? "(development build)" : v)};
    }
  }
}
