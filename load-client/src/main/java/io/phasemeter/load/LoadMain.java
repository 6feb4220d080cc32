package io.phasemeter.load;

import io.phasemeter.core.Durations;
import io.phasemeter.core.slo.Objectives;
import io.phasemeter.load.join.Admins;
import io.phasemeter.load.schedule.WarmUp;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.ApiKey;
import io.phasemeter.load.workload.PromptSalt;
import io.phasemeter.load.workload.SessionSpec;
import io.phasemeter.load.workload.dataset.Dataset;
import io.phasemeter.load.workload.replay.Replay;
import io.phasemeter.load.workload.replay.SharedPrefix;
import java.io.PrintWriter;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code phasemeter load run …}, {@code phasemeter load search …}, {@code phasemeter demo}, {@code
 * phasemeter load campaign …} and {@code phasemeter load compare A B}.
 */
@Command(
    name = "phasemeter load",
    mixinStandardHelpOptions = true,
    versionProvider = LoadMain.VersionProvider.class,
    description = "The Phasemeter load client: open- and closed-model load, joined with the proxy.",
    subcommands = {
      LoadMain.Run.class,
      SearchCommand.class,
      Demo.class,
      io.phasemeter.load.campaign.CampaignCommand.class,
      io.phasemeter.load.campaign.CompareCommand.class,
      MergeCommand.class,
      K6JoinCommand.class
    },
    exitCodeOnInvalidInput = 2)
public final class LoadMain implements Callable<Integer> {

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  private final Map<String, String> env;

  /** The command reading the process's environment. */
  public LoadMain() {
    this(System.getenv());
  }

  /** The command reading {@code env} instead of the process's environment (tests). */
  public LoadMain(Map<String, String> env) {
    this.env = Map.copyOf(env);
  }

  public static void main(String[] args) {
    lowerDnsCache();
    System.exit(
        commandLine(
                new PrintWriter(System.out, true),
                new PrintWriter(System.err, true),
                System.getenv())
            .execute(args));
  }

  /**
   * The JVM caches a name's addresses for 30 s by default (forever under a security manager):
   * {@code --admin-discover} resolves every 10 s to see replicas come, so the cache holds them 5 s,
   * unless the user set the policy themselves. Done before anything resolves a name: the JDK reads
   * the policy once.
   */
  static void lowerDnsCache() {
    if (java.security.Security.getProperty("networkaddress.cache.ttl") == null
        && System.getProperty("sun.net.inetaddr.ttl") == null) {
      java.security.Security.setProperty("networkaddress.cache.ttl", "5");
    }
  }

  static CommandLine commandLine(PrintWriter out, PrintWriter err) {
    return commandLine(out, err, System.getenv());
  }

  /** The command line, reading {@code --api-key-env}'s variable from {@code env}. */
  static CommandLine commandLine(PrintWriter out, PrintWriter err, Map<String, String> env) {
    CommandLine cl = new CommandLine(new LoadMain(env));
    cl.setOut(out);
    cl.setErr(err);
    cl.setExecutionExceptionHandler(
        (ex, line, parse) -> {
          line.getErr().println("phasemeter load: " + ex.getMessage());
          return 2;
        });
    return cl;
  }

  @Override
  public Integer call() {
    spec.commandLine().usage(spec.commandLine().getOut());
    return 2;
  }

  /** The environment the commands read ({@link System#getenv()} but in tests). */
  public Map<String, String> environment() {
    return env;
  }

  /**
   * {@code phasemeter load run}. Not final: {@link SearchCommand} inherits its options, so that the
   * search takes every option a run takes.
   */
  @Command(
      name = "run",
      mixinStandardHelpOptions = true,
      sortOptions = false,
      description = {
        "Sends load to an OpenAI-compatible URL, joins each request with the proxy's record (with"
            + " --admin), prints a live table and writes summary.json, pairs.csv, HdrHistogram logs"
            + " and report.html.",
        "",
        "Goodput (--slo, or a budget's slo_ms): a request is good when it succeeded and met every"
            + " objective; attainment = good / requests sent. Reported in the live table,"
            + " summary.json (goodput), pairs.csv (good, slo_missed) and the report; not a gate"
            + " of the exit code. Joined with a proxy that judges objectives itself, its verdict"
            + " is shown beside the client's, and where they differ, by how much and why"
            + " (goodput.server, by_tenant; pairs.csv tenant, server_slo, server_slo_missed).",
        "",
        "Exit codes: 0 every budget holds; 3 a budget is breached (the phase is named); 2 bad usage"
            + " or config; 4 the run is invalid (dropped iterations, no success, an error rate above"
            + " --max-error-rate (default 1 %%) or the budgets' max_error_rate, join coverage under"
            + " the budgets' min_join_coverage)."
      },
      exitCodeOnInvalidInput = 2)
  static class Run implements Callable<Integer> {
    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @CommandLine.ParentCommand LoadMain parent;

    @Option(
        names = "--url",
        required = true,
        paramLabel = "URL",
        description = "target base URL, e.g. http://127.0.0.1:8080")
    String url;

    @Option(
        names = "--ca-file",
        paramLabel = "FILE",
        description =
            "PEM certificates to trust over https INSTEAD of the platform's trust store (as curl's"
                + " --cacert), for --url and --admin; read before anything is sent")
    Path caFile;

    @Option(
        names = "--insecure",
        description =
            "over https, verify neither the server's certificate nor its name (a warning at start;"
                + " recorded in the conditions as tls_verify off)")
    boolean insecure;

    @Option(
        names = "--http2",
        description =
            "speak HTTP/2: h2 via ALPN over https (the run says so and records http/1.1 when the"
                + " server picks it), h2c with prior knowledge over http. A connection carries up"
                + " to the server's SETTINGS_MAX_CONCURRENT_STREAMS requests at once")
    boolean http2;

    @Option(
        names = "--admin",
        paramLabel = "URL",
        description =
            "the proxy's admin URL (e.g. http://127.0.0.1:9464): join with its records. Repeatable:"
                + " one per replica when several proxies sit behind one Service or balancer (each"
                + " request lands on one of them; the run joins across all, reported per replica)")
    List<String> admins = new ArrayList<>();

    @Option(
        names = "--admin-discover",
        paramLabel = "dns://NAME:PORT",
        description =
            "join with every replica a name resolves to (a Kubernetes headless Service, e.g."
                + " dns://phasemeter-admin:9464): each address's admin listener on PORT. Resolved"
                + " again every 10 s: replicas that appear are followed; one that leaves keeps its"
                + " feed while it is up, and is followed no more once it is down. Goes with"
                + " --admin. Discovered addresses are reached over http: for admin listeners with"
                + " admin.tls, give each replica as --admin https://...")
    String adminDiscover;

    @Option(
        names = "--join-fetch-timeout",
        paramLabel = "D",
        defaultValue = "10s",
        description =
            "with --admin: at the end of the run, look every request still unjoined up by trace id"
                + " (/admin/records/{id}) on every replica for at most D, so that records a feed"
                + " missed still join (within the proxy's records.ttl); 0 = off (default:"
                + " ${DEFAULT-VALUE})")
    String joinFetchTimeout;

    @Option(
        names = "--admin-token",
        paramLabel = "TOKEN",
        description = "bearer token of the admin listener (every replica's), if it has one")
    String adminToken;

    @Option(
        names = "--api-key-env",
        paramLabel = "NAME",
        description =
            "send the API key held by environment variable NAME as 'Authorization: Bearer <key>'"
                + " on every generation request (not on the admin calls), for a deployment with"
                + " auth on; read once at start, an unset or empty NAME is an error (exit 2). Only"
                + " NAME is recorded (conditions: api_key_env), never the key")
    String apiKeyEnv;

    @Option(
        names = "--model",
        required = true,
        paramLabel = "M",
        description = "model name to send")
    String model;

    @Option(names = "--rate", paramLabel = "R", description = "open model: requests per second")
    double rate;

    @Option(
        names = "--arrival",
        paramLabel = "KIND",
        defaultValue = "poisson",
        description = "constant, poisson or gamma (default: ${DEFAULT-VALUE})")
    String arrival;

    @Option(
        names = "--burstiness",
        paramLabel = "B",
        defaultValue = "1.0",
        description =
            "gamma shape: 1 = Poisson, < 1 burstier, > 1 smoother (default: ${DEFAULT-VALUE})")
    double burstiness;

    @Option(
        names = "--concurrency",
        paramLabel = "N",
        description = "closed model: N requests always in flight")
    int concurrency;

    @Option(
        names = "--steps",
        paramLabel = "R1,R2,…",
        split = ",",
        description = "stepped open model: these rates in turn (find the knee)")
    List<Double> steps = new ArrayList<>();

    @Option(
        names = "--step-duration",
        paramLabel = "D",
        description = "length of each step, e.g. 30s")
    String stepDuration;

    @Option(
        names = "--duration",
        paramLabel = "D",
        description =
            "length of the run, e.g. 60s, 5m (not with --steps; optional with --sessions)")
    String duration;

    @Option(
        names = "--sessions",
        paramLabel = "N",
        description =
            "multi-turn load: N sessions at once, each sending --turns turns one after the other;"
                + " a turn's intended start is the previous answer's last byte plus --think-time,"
                + " and its latencies run from there (a late turn shows as schedule lag). Each turn"
                + " sends the history back: on completions the previous prompt's token ids, then"
                + " ids for the answer (as many as its usage reported) and the new input (lengths"
                + " exact, the previous prompt a shared prefix); on chat the messages, with the"
                + " answers' text as received. A failed turn ends its session. Without --duration"
                + " the run ends when the N sessions have; with it, a session that ends is replaced"
                + " until the end, and no turn starts after it. Header x-session-id; per-turn TTFT"
                + " in summary.json (turns), the report and the final table. --api completions or"
                + " chat (at most 4096 chat sessions); not with --rate, --concurrency, --steps,"
                + " --arrival or --burstiness (the turns' own times are the arrivals), --replay (a"
                + " trace's sessions are its rows), --dataset or --prefix-tokens (each prompt is"
                + " the session's history)")
    int sessions;

    @Option(
        names = "--turns",
        paramLabel = "T",
        description =
            "with --sessions: turns per session, 1 to "
                + SessionSpec.MAX_TURNS
                + " (default: "
                + SessionSpec.DEFAULT_TURNS
                + ")")
    Integer turns;

    @Option(
        names = "--think-time",
        paramLabel = "D",
        description =
            "with --sessions: from a turn's last byte to the next turn's intended start, e.g."
                + " 500ms (default: 0s)")
    String thinkTime;

    @Option(
        names = "--session-max-tokens",
        paramLabel = "M",
        description =
            "with --sessions on completions: a session ends before a turn whose prompt plus"
                + " max_tokens would pass M tokens (counted as at_max_tokens, not an error); a chat"
                + " session ends instead when its history would pass 1 MiB, or 256 MiB ÷ N with"
                + " more than 256 sessions (default: "
                + SessionSpec.DEFAULT_MAX_TOKENS
                + ")")
    Integer sessionMaxTokens;

    @Option(
        names = "--connection-reuse",
        paramLabel = "on|off",
        defaultValue = "on",
        description =
            "on: keep-alive connections are reused (a request that fails on a reused connection"
                + " before any response byte, because the server had closed it, is sent once more"
                + " on a fresh one and counted); off: a fresh connection per request, as k6's"
                + " noConnectionReuse; its cost shows in transport_setup (default: ${DEFAULT-VALUE})")
    String connectionReuse;

    @Option(
        names = "--max-in-flight",
        paramLabel = "N",
        defaultValue = "1024",
        description =
            "cap on requests in flight; iterations past it are dropped and counted (default: ${DEFAULT-VALUE})")
    int maxInFlight;

    @Option(
        names = "--profile",
        paramLabel = "NAME",
        description = "doc-qa (4096 in/300 out), single-1k, single-8k, single-32k (…/512 out)")
    String profile;

    @Option(
        names = "--input-tokens",
        paramLabel = "N",
        defaultValue = "-1",
        description = "custom input length (token-id prompt)")
    int inputTokens;

    @Option(
        names = "--output-tokens",
        paramLabel = "N",
        defaultValue = "-1",
        description = "custom output length (ignore_eos, min_tokens = max_tokens)")
    int outputTokens;

    @Option(
        names = "--mix",
        paramLabel = "MIX",
        description = "length buckets, e.g. 1k:512=0.7,4k:300=0.3")
    String mix;

    @Option(
        names = "--dataset",
        paramLabel = "KIND:FILE",
        description =
            "prompts from a file you bring (nothing is downloaded), instead of --profile, --mix or"
                + " --input-tokens: sharegpt:FILE (ShareGPT JSON: the first human turn answered by"
                + " a gpt turn; output length the answer's, estimated as ceil(chars / 4); vLLM's"
                + " filters: prompt or output under 4, prompt over 1024, both over 2048 tokens"
                + " skipped and counted) or jsonl:FILE (one {\"prompt\": \"...\","
                + " \"output_tokens\": N} a line; a bad line is an error, exit 2). Entries in"
                + " an order shuffled with --seed, each once before any repeats; --output-tokens N"
                + " sets every output length. --api completions or chat: max_tokens = min_tokens"
                + " and ignore_eos, so the output length is exact and checked; the prompt's is"
                + " not. The conditions record the file's SHA-256 and the lengths, never the text."
                + " Not with --replay (a trace gives its own lengths), --prefix-tokens (the file's"
                + " prompts share what they share) or --sessions (each prompt is the session's"
                + " history)")
    String dataset;

    @Option(
        names = "--api",
        paramLabel = "API",
        description = {
          "completions (default): /v1/completions, token-id prompts of exact length, ignore_eos and"
              + " min_tokens = max_tokens: both lengths exact and checked against usage.",
          "chat: /v1/chat/completions, one free-text message, max_tokens --output-tokens"
              + " (default 128); neither length is exact or checked.",
          "responses: /v1/responses, the same free text as input, max_output_tokens"
              + " --output-tokens (default 128); neither length is exact or checked (no"
              + " --profile, --mix, --input-tokens). TTFT is the first event with a non-empty"
              + " delta; a stream must end with response.completed or response.incomplete.",
          "embeddings: /v1/embeddings, token-id input: the input length is exact and checked"
              + " (--profile, --mix, --input-tokens; their output half is not used); never"
              + " streamed; TTFT, TPOT and ITL are not applicable."
        })
    String api;

    @Option(
        names = "--stream",
        negatable = true,
        description =
            "stream responses (default: streamed, except --api embeddings, which never streams;"
                + " --no-stream for whole responses)")
    Boolean stream;

    @Option(names = "--chat", description = "the same as --api chat")
    boolean chat;

    @Option(
        names = "--max-error-rate",
        paramLabel = "R",
        defaultValue = "1%",
        description =
            "the run is invalid (exit 4) when more than this share of the requests sent failed"
                + " (errors and invalid responses; a failure never counts as a success), as a"
                + " share (0.05) or a percentage (5%%); a budgets file's max_error_rate, where it"
                + " gives one for the model, wins (default: ${DEFAULT-VALUE})")
    String maxErrorRate;

    @Option(
        names = "--budgets",
        paramLabel = "FILE",
        description = "budgets file (docs/design.md §6), e.g. config/budgets.yaml")
    Path budgets;

    @Option(
        names = "--slo",
        paramLabel = "OBJ=LIMIT,…",
        arity = "1..*",
        description =
            "goodput's per-request objectives, e.g. ttft=500ms,tpot=50ms,e2el=10s: a request is"
                + " good when it succeeded and each figure is at or below its limit (vLLM's"
                + " --goodput). Names: ttft (= client_ttft), tpot, e2el (= client_total), as vLLM's,"
                + " or any phase of the catalogue (queue, network_envelope, server_ttft, gateway,"
                + " …; those of the proxy's record need --admin, and a request not joined is not"
                + " good). Limits: 500ms, 10s, 1m, or a bare number of milliseconds; '=' or ':'."
                + " Separated by commas or spaces: vLLM's --goodput ttft:500 tpot:50 e2el:10000"
                + " pastes as is. A request with one output token meets tpot; engine_queue,"
                + " prefill and decode are judged only on requests with the engine's spans"
                + " (telemetry.engine_spans). Wins over the budgets file's slo_ms"
                + " for --model. Reported (attainment = good / requests sent, failures included),"
                + " never a gate of the exit code (phasemeter load search gates on it)")
    void slo(List<String> objectives) {
      slo = String.join(" ", objectives);
    }

    /** {@code --slo}'s objectives as given, several arguments joined by a space; null: none. */
    String slo;

    @Option(
        names = "--out",
        paramLabel = "DIR",
        description = "where the report goes (default: phasemeter-out/run-<time>)")
    Path out;

    @Option(
        names = "--seed",
        paramLabel = "S",
        defaultValue = "1",
        description = "seed of arrivals and prompts (default: ${DEFAULT-VALUE})")
    long seed;

    @Option(
        names = "--prompt-salt",
        paramLabel = "S|none",
        description =
            "mixed into every prompt's token ids (and chat's and responses' text, as a mark of 22"
                + " characters), not into the token-id lengths, shapes or arrivals, so that a server's prefix cache does not serve"
                + " one run's prompts from another's with the same --seed: up to 16 hex digits;"
                + " none (or 0): the seed's prompts alone, the same in every run (to measure a"
                + " warm cache on purpose). A dataset's text is never salted (default: a fresh"
                + " random salt per run, recorded as the conditions' prompt_salt: --seed N"
                + " --prompt-salt S sends the same prompts again)")
    String promptSalt;

    @Option(
        names = "--timeout",
        paramLabel = "D",
        defaultValue = "120s",
        description = "per-request timeout (default: ${DEFAULT-VALUE})")
    String timeout;

    @Option(
        names = "--report-interval",
        paramLabel = "D",
        defaultValue = "5s",
        description = "live table period (default: ${DEFAULT-VALUE})")
    String reportInterval;

    @Option(
        names = "--join-grace",
        paramLabel = "D",
        defaultValue = "3s",
        description = "how long to wait for the proxy's last records (default: ${DEFAULT-VALUE})")
    String joinGrace;

    @Option(
        names = "--warmup",
        paramLabel = "N",
        defaultValue = "" + LoadOptions.DEFAULT_WARMUP,
        description =
            "requests sent one by one before the clock starts, not counted, to --warmup-target:"
                + " the JIT then has compiled the client's own request path before the first"
                + " counted request, whatever the rate; the client then waits for the JIT compiler"
                + " (at most 5 s). Nothing before the clock at all: --warmup 0 --client-floor off"
                + " (default: ${DEFAULT-VALUE})")
    int warmup;

    @Option(
        names = "--warmup-target",
        paramLabel = "self|server",
        defaultValue = "self",
        description =
            "self: the --warmup requests go to the client's own in-process endpoint on loopback"
                + " (at most 3 s of them), then the run's load for 2 s (unless --warmup-duration),"
                + " and the target sees none; server: to the target, as"
                + " the run's (warms its path and the connection too; their records are ignored)"
                + " (default: ${DEFAULT-VALUE})")
    String warmupTarget;

    @Option(
        names = "--client-floor",
        paramLabel = "on|off",
        defaultValue = "on",
        description =
            "before the run, measure the client's own floor (TTFT, connect, per chunk) against its"
                + " in-process endpoint with the run's requests and code path (about a second, plus"
                + " up to 3 s of warm-up there when --warmup 0 or --warmup-target server),"
                + " and report it: summary.json client_floor, the live table's header, the report"
                + " and its conditions (default: ${DEFAULT-VALUE})")
    String clientFloor;

    @Option(
        names = "--warmup-duration",
        paramLabel = "D",
        description =
            "before the clock starts, run the first step's load for D and count none of it: the"
                + " rate rising from 0 to the first step's (open model), or the concurrency (closed"
                + " model). The JIT then has compiled the paths the run takes and the connections"
                + " it needs are open; at thousands of requests a second that takes seconds, far"
                + " more than --warmup (default: none)")
    String warmupDuration;

    @Option(
        names = "--replay",
        paramLabel = "FILE",
        description =
            "replay a trace: each row is a request sent at its time (after the first row's,"
                + " divided by --replay-speed), with its exact lengths on /v1/completions"
                + " (token ids, ignore_eos, min_tokens = max_tokens); rows sharing hash_ids blocks"
                + " (512 tokens) send the same tokens there; a session's rows carry"
                + " x-session-id, and each later turn waits for the previous answer: it leaves at"
                + " its time or then, or its delay (ms, AIPerf's, without a timestamp) after it."
                + " A load shape of its own (not with --rate, --concurrency,"
                + " --steps, --arrival, --burstiness, nor with --profile, --mix, --input-tokens,"
                + " --output-tokens: the trace gives them); the run lasts the trace (--duration"
                + " cuts it). The whole file is checked before any request: one line naming the"
                + " line and field, exit 2")
    Path replay;

    @Option(
        names = "--replay-format",
        paramLabel = "mooncake|azure|jsonl",
        description =
            "mooncake: JSONL, timestamp (ms), input_length, output_length, hash_ids, session_id,"
                + " delay; azure: the Azure LLM inference trace CSV (2023, 2024), TIMESTAMP, ContextTokens,"
                + " GeneratedTokens; jsonl: Phasemeter's, offset_ms, input_length, output_length,"
                + " hash_ids, session, prefix, prefix_length (default: azure for a .csv file, else"
                + " mooncake when the first row has timestamp, jsonl when it has offset_ms)")
    String replayFormat;

    @Option(
        names = "--replay-speed",
        paramLabel = "X",
        description =
            "trace times and delays are divided by X: 2 replays twice as fast; the trace must"
                + " then last at most 30 days (default: 1)")
    Double replaySpeed;

    @Option(
        names = "--replay-limit",
        paramLabel = "N",
        description =
            "replay the first N rows only: the rest of the file is hashed and counted, not read"
                + " (at most 10,000,000 rows are replayed)")
    Long replayLimit;

    @Option(
        names = "--replay-prefixes",
        paramLabel = "shared|distinct",
        description =
            "shared: as the trace says (hash_ids blocks, sessions, prefixes); distinct: every"
                + " row's prompt its own, the same lengths and times: the control for what a"
                + " prefix cache buys (default: shared)")
    String replayPrefixes;

    @Option(
        names = "--prefix-tokens",
        paramLabel = "N",
        description =
            "with --prefixes K: every prompt starts with one of K shared prefixes of N token ids"
                + " (drawn per request from the seed), the rest its own; every input length must"
                + " be above N. Token ids only: --api completions or embeddings")
    Integer prefixTokens;

    @Option(
        names = "--prefixes",
        paramLabel = "K",
        description = "how many shared prefixes of --prefix-tokens (K system prompts)")
    Integer prefixes;

    @Option(
        names = "--join-sampled-only",
        description =
            "join only records whose trace the proxy exported (as a trace backend would see them);"
                + " the report then says the envelope describes that share")
    boolean joinSampledOnly;

    @Override
    public Integer call() {
      PrintWriter err = spec.commandLine().getErr();
      LoadOptions o;
      try {
        o = options();
      } catch (IllegalArgumentException e) {
        err.println("phasemeter load: " + e.getMessage());
        return 2;
      }
      return LoadRun.execute(o, spec.commandLine().getOut(), err);
    }

    LoadOptions options() {
      return new LoadOptions(
          URI.create(url),
          Admins.parse(admins, adminDiscover),
          adminToken,
          model,
          rate,
          arrival,
          burstiness,
          concurrency,
          steps,
          stepDuration == null ? null : Durations.parsePositive("--step-duration", stepDuration),
          duration == null
              ? (steps.isEmpty()
                  ? null
                  : Durations.parsePositive("--step-duration", stepDuration)
                      .multipliedBy(steps.size()))
              : Durations.parsePositive("--duration", duration),
          maxInFlight,
          profile,
          inputTokens,
          outputTokens,
          mix,
          stream == null ? api().generates() : stream,
          budgets,
          out == null ? defaultOut("run") : out,
          seed,
          Durations.parsePositive("--timeout", timeout),
          Durations.parsePositive("--report-interval", reportInterval),
          Durations.parsePositive("--join-grace", joinGrace),
          LoadOptions.joinFetchTimeout("--join-fetch-timeout", joinFetchTimeout),
          api(),
          warmup,
          warmupDuration == null
              ? null
              : Durations.parsePositive("--warmup-duration", warmupDuration),
          joinSampledOnly,
          onOff("--connection-reuse", connectionReuse),
          apiKeyEnv == null ? null : ApiKey.fromEnv("--api-key-env", apiKeyEnv, parent.env),
          share("--max-error-rate", maxErrorRate),
          WarmUp.Target.parse("--warmup-target", warmupTarget),
          onOff("--client-floor", clientFloor),
          slo == null ? null : Objectives.parse("--slo", slo),
          dataset == null ? null : Dataset.parse("--dataset", dataset),
          Replay.fromFlags(
              replay, replayFormat, replaySpeed, replayLimit, replayPrefixes, this::given),
          SharedPrefix.fromFlags(prefixTokens, prefixes),
          sessionSpec(),
          promptSalt == null ? null : PromptSalt.parse("--prompt-salt", promptSalt),
          io.phasemeter.load.http.Transport.of(caFile, insecure, http2));
    }

    /** Whether the command line gave option {@code name} (else it holds its default). */
    boolean given(String name) {
      CommandLine.ParseResult parsed = spec.commandLine().getParseResult();
      return parsed != null && parsed.hasMatchedOption(name);
    }

    /** Whether any of the session flags was given. */
    boolean sessionFlags() {
      return sessions != 0 || turns != null || thinkTime != null || sessionMaxTokens != null;
    }

    /** {@code --sessions} and its companions, or null when none is given. */
    private SessionSpec sessionSpec() {
      if (!sessionFlags()) {
        return null;
      }
      if (sessions == 0) {
        throw new IllegalArgumentException(
            "--turns, --think-time and --session-max-tokens go with --sessions N");
      }
      for (String flag : new String[] {"--arrival", "--burstiness"}) {
        if (given(flag)) {
          throw new IllegalArgumentException(
              flag
                  + " cannot go with --sessions: each turn starts from the previous answer's last"
                  + " byte plus --think-time");
        }
      }
      if (sessionMaxTokens != null && api() != Api.COMPLETIONS) {
        throw new IllegalArgumentException(
            "--session-max-tokens is for --api completions, whose lengths are exact; a chat"
                + " session ends when its history would pass its bound (1 MiB, or 256 MiB ÷ N"
                + " above 256 sessions)");
      }
      Duration think;
      try {
        think = thinkTime == null ? Duration.ZERO : Durations.parse(thinkTime);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("--think-time: " + e.getMessage());
      }
      return new SessionSpec(
          sessions,
          turns == null ? SessionSpec.DEFAULT_TURNS : turns,
          think,
          sessionMaxTokens == null ? SessionSpec.DEFAULT_MAX_TOKENS : sessionMaxTokens);
    }

    /** --api, or chat with --chat, or completions; --chat with another --api is refused. */
    private Api api() {
      if (api == null) {
        return chat ? Api.CHAT : Api.COMPLETIONS;
      }
      Api a = Api.parse("--api", api);
      if (chat && a != Api.CHAT) {
        throw new IllegalArgumentException(
            "--chat is --api chat; it cannot go with --api " + a.key());
      }
      return a;
    }
  }

  /** A share between 0 and 1, given as one ({@code 0.05}) or as a percentage ({@code 5%}). */
  static double share(String flag, String value) {
    String v = value.trim();
    boolean percent = v.endsWith("%");
    if (percent) {
      v = v.substring(0, v.length() - 1).trim();
    }
    double d;
    try {
      d = Double.parseDouble(v);
    } catch (NumberFormatException e) {
      d = Double.NaN;
    }
    if (percent) {
      d /= 100;
    }
    if (!(d >= 0 && d <= 1)) {
      throw new IllegalArgumentException(
          flag
              + " must be a share between 0 and 1 (0.05) or a percentage up to 100% (5%), got '"
              + value
              + "'");
    }
    return d;
  }

  /** {@code on} or {@code off}, for a flag that takes one of them. */
  static boolean onOff(String flag, String value) {
    if ("on".equalsIgnoreCase(value)) {
      return true;
    }
    if ("off".equalsIgnoreCase(value)) {
      return false;
    }
    throw new IllegalArgumentException(flag + " must be on or off, got '" + value + "'");
  }

  /** {@code phasemeter-out/<kind>-<local time>}. */
  static Path defaultOut(String kind) {
    return Path.of(
        "phasemeter-out",
        kind + "-" + LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")));
  }

  /** Prints the version. */
  static final class VersionProvider implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      return new String[] {"phasemeter load " + Version.version()};
    }
  }
}
