package io.phasemeter.load;

import io.phasemeter.core.slo.Objectives;
import io.phasemeter.load.http.Transport;
import io.phasemeter.load.join.Admins;
import io.phasemeter.load.schedule.WarmUp;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.ApiKey;
import io.phasemeter.load.workload.Arrivals;
import io.phasemeter.load.workload.Conversation;
import io.phasemeter.load.workload.Mix;
import io.phasemeter.load.workload.Profile;
import io.phasemeter.load.workload.PromptSalt;
import io.phasemeter.load.workload.SessionSpec;
import io.phasemeter.load.workload.Workload;
import io.phasemeter.load.workload.dataset.Dataset;
import io.phasemeter.load.workload.dataset.DatasetEntries;
import io.phasemeter.load.workload.dataset.DatasetSource;
import io.phasemeter.load.workload.replay.Replay;
import io.phasemeter.load.workload.replay.Replayed;
import io.phasemeter.load.workload.replay.SharedPrefix;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * Everything a run needs, validated (docs/design.md §7). Exactly one load shape: a rate (open
 * model), a concurrency (closed model), steps of rates, a replayed trace or multi-turn sessions.
 *
 * @param steps rates of a stepped run (empty otherwise)
 * @param inputTokens custom input length (-1: from the profile)
 * @param mix length-bucket mix ({@code 1k:512=0.7,4k:300=0.3}) or null
 * @param stream whether responses are streamed; never for {@link Api#EMBEDDINGS}
 * @param admin the proxies' admin addresses ({@code --admin}, {@code --admin-discover}), or null:
 *     no join
 * @param joinFetchTimeout how long the end-of-run lookup of unjoined records may take (zero: none)
 * @param api the API the requests speak ({@code --api}; {@code --chat} is {@link Api#CHAT})
 * @param warmup requests sent one by one before the clock starts
 * @param warmupDuration how long the first step's load runs before the clock starts (zero: none)
 * @param connectionReuse false: a fresh connection per request ({@code --connection-reuse off})
 * @param apiKey sent as {@code Authorization: Bearer} on every request ({@code --api-key-env}), or
 *     null for none
 * @param warmupTarget where the {@code --warmup} requests go ({@code --warmup-target})
 * @param clientFloor whether the client measures its own floor before the run ({@code
 *     --client-floor})
 * @param maxErrorRate the share of requests sent that may fail before the run is invalid ({@code
 *     --max-error-rate}, 0–1); a budgets file's {@code max_error_rate} wins where it gives one
 * @param slo goodput's objectives from {@code --slo} (or a campaign plan's {@code slo}), or null:
 *     then the budgets file's {@code slo_ms} for the model, if any; reported, never a gate
 * @param dataset the file the requests come from ({@code --dataset sharegpt:FILE}, {@code jsonl:
 *     FILE}), or null: the profile, mix or lengths; read by {@link #datasetEntries()}
 * @param replay the trace replayed ({@code --replay}: its times are the arrivals, its lengths the
 *     requests'), or null
 * @param sharedPrefix shared prefixes of the synthetic workload ({@code --prefix-tokens}, {@code
 *     --prefixes}), or null
 * @param sessions the multi-turn shape ({@code --sessions}, {@code --turns}, {@code --think-time},
 *     {@code --session-max-tokens}), or null for none; {@code duration} may then be null (the run
 *     ends when the sessions have)
 * @param promptSalt mixed into the prompts' token ids and free text ({@code --prompt-salt}); null:
 *     a fresh one drawn here, so that each run's prompts are its own (a search's probes each draw
 *     one, {@link #withLoad})
 * @param transport whom the client trusts over https and which HTTP version it asks for ({@code
 *     --ca-file}, {@code --insecure}, {@code --http2}); null: the platform's trust, HTTP/1.1
 */
public record LoadOptions(
    URI url,
    Admins admin,
    String adminToken,
    String model,
    double rate,
    String arrival,
    double burstiness,
    int concurrency,
    List<Double> steps,
    Duration stepDuration,
    Duration duration,
    int maxInFlight,
    String profile,
    int inputTokens,
    int outputTokens,
    String mix,
    boolean stream,
    Path budgets,
    Path out,
    long seed,
    Duration timeout,
    Duration reportInterval,
    Duration joinGrace,
    Duration joinFetchTimeout,
    Api api,
    int warmup,
    Duration warmupDuration,
    boolean joinSampledOnly,
    boolean connectionReuse,
    ApiKey apiKey,
    double maxErrorRate,
    WarmUp.Target warmupTarget,
    boolean clientFloor,
    Objectives slo,
    Dataset dataset,
    Replay replay,
    SharedPrefix sharedPrefix,
    SessionSpec sessions,
    PromptSalt promptSalt,
    Transport transport) {

  /** {@code --join-fetch-timeout} when none is given. */
  public static final Duration DEFAULT_JOIN_FETCH_TIMEOUT = Duration.ofSeconds(10);

  /** {@code --max-error-rate} when none is given: 1 % of the requests sent. */
  public static final double DEFAULT_MAX_ERROR_RATE = 0.01;

  /**
   * {@code --warmup} when none is given: enough one-by-one requests for the JIT to compile the
   * client's request path (docs/accuracy.md, "The client's floor"), sent to the client's own
   * endpoint unless {@code --warmup-target server}.
   */
  public static final int DEFAULT_WARMUP = 2000;

  /**
   * The most prompt tokens a completions {@code --sessions} run may have in flight at once,
   * sessions × {@code --session-max-tokens} (64 Mi: about 384 MiB of token-id bodies, 6 bytes a
   * token): a session's body holds its whole history; chat sessions have their own bound on the
   * history kept ({@code Conversation}).
   */
  public static final long MAX_SESSION_TOKENS_IN_FLIGHT = 64L * 1024 * 1024;

  public LoadOptions {
    transport = transport == null ? Transport.DEFAULT : transport;
    if (dataset != null && promptSalt != null && !promptSalt.none()) {
      throw new IllegalArgumentException(
          "--prompt-salt cannot go with --dataset: the file's prompts are sent as they are"
              + " (their text is yours; nothing is salted)");
    }
    // A dataset's text is never salted: its runs record none.
    promptSalt =
        promptSalt != null ? promptSalt : dataset != null ? PromptSalt.NONE : PromptSalt.fresh();
    if (Double.isNaN(rate) || Double.isInfinite(rate)) {
      throw new IllegalArgumentException("--rate must be a finite number");
    }
    if (stepDuration != null && (stepDuration.isZero() || stepDuration.isNegative())) {
      throw new IllegalArgumentException("--step-duration must be positive");
    }
    int shapes = (rate > 0 ? 1 : 0) + (concurrency > 0 ? 1 : 0) + (steps.isEmpty() ? 0 : 1);
    if (replay != null && shapes > 0) {
      throw new IllegalArgumentException(
          "--replay is a load shape of its own (the trace's times are the arrivals): it cannot go"
              + " with --rate, --concurrency or --steps");
    }
    if (replay != null && sessions != null) {
      throw new IllegalArgumentException(
          "--replay is a load shape of its own (the trace's times are the arrivals): it cannot go"
              + " with --sessions (a trace's sessions are in its rows)");
    }
    if (replay == null && shapes + (sessions == null ? 0 : 1) != 1) {
      throw new IllegalArgumentException(
          "give exactly one of --rate R, --concurrency N, --steps R1,R2,…, --sessions N or"
              + " --replay FILE");
    }
    if (!steps.isEmpty() && stepDuration == null) {
      throw new IllegalArgumentException("--steps needs --step-duration D");
    }
    if (steps.isEmpty()
        && ((replay == null && sessions == null) || duration != null)
        && (duration == null || duration.isZero() || duration.isNegative())) {
      throw new IllegalArgumentException("--duration must be positive");
    }
    if (sessions != null && sessions.count() > maxInFlight) {
      throw new IllegalArgumentException(
          "--sessions "
              + sessions.count()
              + " is above --max-in-flight "
              + maxInFlight
              + ": each session has a turn in flight at a time; raise --max-in-flight");
    }
    if (!List.of("constant", "poisson", "gamma").contains(arrival)) {
      throw new IllegalArgumentException("--arrival must be constant, poisson or gamma");
    }
    if (burstiness <= 0) {
      throw new IllegalArgumentException("--burstiness must be positive");
    }
    if (warmup < 0) {
      throw new IllegalArgumentException("--warmup must be 0 or more");
    }
    warmupTarget = warmupTarget == null ? WarmUp.Target.SELF : warmupTarget;
    warmupDuration = warmupDuration == null ? Duration.ZERO : warmupDuration;
    if (warmupDuration.isNegative()) {
      throw new IllegalArgumentException("--warmup-duration must not be negative");
    }
    if (maxInFlight < 1) {
      throw new IllegalArgumentException("--max-in-flight must be at least 1");
    }
    if (!(maxErrorRate >= 0 && maxErrorRate <= 1)) {
      throw new IllegalArgumentException(
          "--max-error-rate must be a share between 0 and 1 (0.05) or a percentage (5%)");
    }
    steps = List.copyOf(steps);
    for (double s : steps) {
      if (!(s > 0) || Double.isInfinite(s)) {
        throw new IllegalArgumentException("--steps: every rate must be positive");
      }
    }
    String scheme = url.getScheme();
    if (scheme == null
        || !(scheme.equals("http") || scheme.equals("https"))
        || url.getHost() == null) {
      throw new IllegalArgumentException(
          "--url must be an http(s) URL, e.g. http://127.0.0.1:8080");
    }
    joinFetchTimeout = joinFetchTimeout == null ? DEFAULT_JOIN_FETCH_TIMEOUT : joinFetchTimeout;
    if (joinFetchTimeout.isNegative()) {
      throw new IllegalArgumentException("--join-fetch-timeout must not be negative");
    }
    api = api == null ? Api.COMPLETIONS : api;
    slo = slo == null || slo.isEmpty() ? null : slo;
    if (api == Api.EMBEDDINGS && stream) {
      throw new IllegalArgumentException(
          "--stream cannot go with --api embeddings: embeddings are never streamed");
    }
    if (api == Api.EMBEDDINGS && outputTokens > 0) {
      throw new IllegalArgumentException(
          "--output-tokens cannot go with --api embeddings: embeddings generate no output"
              + " (give --input-tokens alone)");
    }
    if (dataset != null && (profile != null || mix != null || inputTokens > 0)) {
      throw new IllegalArgumentException(
          "--dataset gives the prompts and their lengths: it cannot go with --profile, --mix or"
              + " --input-tokens (--output-tokens N sets every output length)");
    }
    if (dataset != null) {
      DatasetSource.requireApi(api);
      if (replay != null || sharedPrefix != null) {
        throw new IllegalArgumentException(
            "--dataset gives the prompts: it cannot go with --replay (a trace gives its own"
                + " lengths) or --prefix-tokens (the file's prompts share what they share)");
      }
    }
    if (sessions != null && (dataset != null || sharedPrefix != null)) {
      throw new IllegalArgumentException(
          "--sessions builds each turn's prompt from the session's history: it cannot go with"
              + " --dataset or --prefix-tokens");
    }
    if (sessions != null
        && api == Api.COMPLETIONS
        && (long) sessions.count() * sessions.maxTokens() > MAX_SESSION_TOKENS_IN_FLIGHT) {
      throw new IllegalArgumentException(
          "--sessions "
              + sessions.count()
              + " × --session-max-tokens "
              + sessions.maxTokens()
              + " is more than "
              + MAX_SESSION_TOKENS_IN_FLIGHT
              + " tokens of prompts in flight at once (about 384 MiB of request bodies): give"
              + " fewer sessions or a lower --session-max-tokens");
    }
    if (api == Api.RESPONSES && (profile != null || mix != null || inputTokens > 0)) {
      throw new IllegalArgumentException(
          "--api responses sends free text, so input lengths cannot be exact: --profile, --mix"
              + " and --input-tokens are for --api completions or embeddings (give"
              + " --output-tokens for max_output_tokens)");
    }
    if (replay != null) {
      checkReplay(api, profile, mix, inputTokens, outputTokens, sharedPrefix);
    }
    if (sharedPrefix != null && (api == Api.CHAT || api == Api.RESPONSES)) {
      throw new IllegalArgumentException(
          "--prefix-tokens needs token-id prompts: --api completions or embeddings (chat and"
              + " responses send free text, whose tokens are the server's)");
    }
  }

  /** What cannot go with --replay: the trace gives the lengths, completions sends them exactly. */
  private static void checkReplay(
      Api api,
      String profile,
      String mix,
      int inputTokens,
      int outputTokens,
      SharedPrefix sharedPrefix) {
    if (api != Api.COMPLETIONS) {
      throw new IllegalArgumentException(
          "--replay sends the trace's exact lengths as token ids on /v1/completions: it cannot go"
              + " with --api "
              + api.key()
              + " (whose lengths cannot be exact)");
    }
    if (profile != null || mix != null || inputTokens > 0 || outputTokens > 0) {
      throw new IllegalArgumentException(
          "--profile, --mix, --input-tokens and --output-tokens cannot go with --replay: the"
              + " trace gives every request's lengths");
    }
    if (sharedPrefix != null) {
      throw new IllegalArgumentException(
          "--prefix-tokens and --prefixes cannot go with --replay: the trace's hash_ids say what"
              + " is shared (--replay-prefixes distinct makes nothing shared)");
    }
  }

  /**
   * These options with another load, place and warm-up, everything else as given: one probe of a
   * capacity search ({@code phasemeter load search}), built from the search's own parsed options. A
   * prompt salt the user gave is kept; one drawn for these options is drawn again, so that no
   * probe's prompts are another's.
   *
   * @param rate the open model's rate, or 0 with {@code concurrency}
   * @param concurrency the closed model's concurrency, or 0 with {@code rate}
   */
  public LoadOptions withLoad(
      double rate,
      int concurrency,
      Duration duration,
      int warmup,
      Duration warmupDuration,
      boolean clientFloor,
      Path out,
      long seed) {
    return new LoadOptions(
        url,
        admin,
        adminToken,
        model,
        rate,
        arrival,
        burstiness,
        concurrency,
        List.of(),
        null,
        duration,
        maxInFlight,
        profile,
        inputTokens,
        outputTokens,
        mix,
        stream,
        budgets,
        out,
        seed,
        timeout,
        reportInterval,
        joinGrace,
        joinFetchTimeout,
        api,
        warmup,
        warmupDuration,
        joinSampledOnly,
        connectionReuse,
        apiKey,
        maxErrorRate,
        warmupTarget,
        clientFloor,
        slo,
        dataset,
        replay,
        sharedPrefix,
        null,
        promptSalt.drawn() ? null : promptSalt,
        transport);
  }

  /**
   * {@code --join-fetch-timeout}'s value: a positive duration such as {@code 10s}, or {@code 0}
   * (any zero: {@code 0s}, {@code 0ms}) for no end-of-run lookup.
   */
  public static Duration joinFetchTimeout(String flag, String text) {
    if (text != null && text.trim().matches("0+(\\.0+)?\\s*(ms|s|m|h)?")) {
      return Duration.ZERO;
    }
    try {
      return io.phasemeter.core.Durations.parsePositive(flag, text);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          flag + " must be a duration such as 10s, or 0 to fetch nothing, got '" + text + "'");
    }
  }

  /** Whether the requests are free-text chat ({@code --chat}, {@code --api chat}). */
  public boolean chat() {
    return api == Api.CHAT;
  }

  /** The shape in words, for the report's conditions. */
  public String arrivalDescription() {
    if (sessions != null) {
      return sessions.describe();
    }
    if (concurrency > 0) {
      return "closed model, concurrency " + concurrency;
    }
    if (replay != null) {
      return "open model, trace replay at speed " + replay.speed();
    }
    String a = arrival + (arrival.equals("gamma") ? " (burstiness " + burstiness + ")" : "");
    if (!steps.isEmpty()) {
      return "open model, "
          + a
          + ", steps "
          + steps
          + " req/s × "
          + stepDuration.toSeconds()
          + " s";
    }
    return "open model, " + a + ", " + rate + " req/s";
  }

  /**
   * The requests of the run: exact lengths (token-id prompts) for completions and embeddings, from
   * --mix, --profile or custom lengths; free text for chat and responses; the prompt salt mixed
   * into their ids and text (not a dataset's: its text is the user's). With an API key every
   * request carries it.
   */
  public Workload workload() {
    return workload(replay == null ? null : replay.load());
  }

  /**
   * {@link #workload()}, from the trace already read for {@code --replay} ({@link Replay#load}),
   * which is read once.
   */
  public Workload workload(Replayed replayed) {
    Workload w = replayed != null ? replayed.workload(model, stream, seed, promptSalt) : requests();
    return apiKey == null ? w : w.withHeaders(apiKey.headers());
  }

  private Workload requests() {
    if (dataset != null) {
      return DatasetSource.workload(model, api, stream, seed, datasetEntries());
    }
    if (sharedPrefix != null) {
      return sharedPrefix.workload(model, api, prefixedMix(), stream, seed, promptSalt);
    }
    return ownRequests().withSalt(promptSalt);
  }

  /** The workload's own generators: the profile, mix or lengths, or free text. */
  private Workload ownRequests() {
    int maxTokens = outputTokens > 0 ? outputTokens : 128;
    return switch (api) {
      case CHAT -> Workload.chat(model, maxTokens, stream, seed);
      case RESPONSES -> Workload.responses(model, maxTokens, stream, seed);
      case EMBEDDINGS -> embeddings();
      case COMPLETIONS ->
          mix != null
              ? Workload.completions(model, Mix.parse(mix), stream, seed)
              : Workload.completions(model, lengths(), stream, seed);
    };
  }

  /** The lengths a shared prefix starts: as {@link #requests()} and {@link #embeddings()} take. */
  private Mix prefixedMix() {
    if (mix != null) {
      return Mix.parse(mix);
    }
    if (api == Api.EMBEDDINGS && profile == null && inputTokens > 0) {
      return Mix.of(Profile.custom(inputTokens, 1));
    }
    return Mix.of(lengths());
  }

  /**
   * What a {@code --sessions} run's conversations share: the lengths of each completions turn (from
   * --mix, --profile or custom lengths), chat's max_tokens, the seed, the prompt salt and the API
   * key.
   *
   * @throws IllegalStateException without --sessions
   * @throws IllegalArgumentException for an API that has no sessions (responses, embeddings)
   */
  public Conversation.Shape conversations() {
    if (sessions == null) {
      throw new IllegalStateException("not a --sessions run");
    }
    Mix lengths = api != Api.COMPLETIONS ? null : mix != null ? Mix.parse(mix) : Mix.of(lengths());
    return new Conversation.Shape(
        model,
        api,
        lengths,
        outputTokens > 0 ? outputTokens : 128,
        stream,
        seed,
        apiKey == null ? java.util.Map.of() : apiKey.headers(),
        sessions,
        promptSalt);
  }

  /** Embeddings take the input half of --mix or --profile, or --input-tokens alone. */
  private Workload embeddings() {
    if (mix != null) {
      return Workload.embeddings(model, Mix.parse(mix), seed);
    }
    if (profile == null && inputTokens > 0) {
      return Workload.embeddings(model, inputTokens, seed);
    }
    return Workload.embeddings(model, Mix.of(lengths()), seed);
  }

  /** The named or custom profile of lengths; DOC_QA when neither is given. */
  Profile lengths() {
    if (profile != null) {
      return Profile.named(profile);
    }
    if (inputTokens > 0 && outputTokens > 0) {
      return Profile.custom(inputTokens, outputTokens);
    }
    if (inputTokens > 0 || outputTokens > 0) {
      throw new IllegalArgumentException("--input-tokens and --output-tokens go together");
    }
    return Profile.DOC_QA;
  }

  /**
   * The dataset's usable entries, read on the first call (the usage phase of a run: a bad file is
   * an error before any request), kept with the {@link Dataset} after; null without --dataset.
   */
  public DatasetEntries datasetEntries() {
    return dataset == null ? null : dataset.load(outputTokens);
  }

  /** The workload in words, for the start line and the report's conditions. */
  public String workloadText() {
    if (replay != null) {
      // Replayed.workloadText says more (the format told from the file, the rows) once it is read.
      return "replay of " + replay.file() + (stream ? ", streamed" : ", whole responses");
    }
    String lengths;
    if (dataset != null) {
      lengths = datasetEntries().describe() + (api == Api.CHAT ? ", chat" : "");
    } else if (api == Api.CHAT) {
      lengths = "chat, free text";
    } else if (api == Api.RESPONSES) {
      lengths = "responses, free text";
    } else if (mix != null) {
      lengths = (api == Api.EMBEDDINGS ? "embeddings, input of mix " : "mix ") + mix;
    } else if (api == Api.EMBEDDINGS) {
      Profile p = profile == null && inputTokens > 0 ? null : lengths();
      lengths =
          p == null
              ? "embeddings, " + inputTokens + " tokens in"
              : "embeddings, " + p.name() + ", " + p.inputTokens() + " tokens in";
    } else {
      Profile p = lengths();
      lengths = p.name() + " (" + p.inputTokens() + " in / " + p.outputTokens() + " out)";
    }
    if (sharedPrefix != null) {
      lengths += ", " + sharedPrefix.text();
    }
    return lengths + (stream ? ", streamed" : ", whole responses");
  }

  /** The arrival process of one open-model step at {@code rate}, seeded per step. */
  public Arrivals arrivals(double rate, int step) {
    long s = seed * 31 + step;
    return switch (arrival) {
      case "poisson" -> Arrivals.poisson(rate, s);
      case "gamma" -> Arrivals.gamma(rate, burstiness, s);
      default -> Arrivals.constant(rate);
    };
  }
}
