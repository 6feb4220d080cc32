package io.phasemeter.load.workload;

import io.vertx.core.buffer.Buffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.SplittableRandom;

/**
 * One multi-turn session's state, and its next turn's request built from it (docs/design.md §7
 * "Sessions"). Every request carries the session's id as {@link Workload#SESSION_HEADER} and its
 * turn as {@link RequestSpec#turn()}.
 *
 * <ul>
 *   <li>{@link Api#COMPLETIONS}, exact lengths: turn k's new input and its output are drawn from
 *       the mix (seeded by the run's seed, the session's number and k). Turn 1's prompt is its
 *       input ids; turn k's is turn k − 1's prompt ids, then as many ids as turn k − 1's answer
 *       reported ({@code usage.completion_tokens}) and turn k's new input, in one segment of ids
 *       that stand for both (seeded likewise). The previous prompt is thus a prefix of the next, as
 *       a conversation's history is; {@code promptTokens} is the total, checked against usage as
 *       for any exact request. The run's {@link PromptSalt} is mixed into the ids, not into the
 *       lengths. Nothing but the segments' lengths is kept: the ids are drawn again for every turn.
 *   <li>{@link Api#CHAT}, free text: the messages are the history, the user's prompt of each turn
 *       and the assistant's answer to it as received (its text kept by the runner as it reads the
 *       answer), then the new prompt. Lengths are not exact, as for chat without sessions.
 * </ul>
 *
 * <p>Bounded: a completions session ends before a turn whose prompt plus {@code max_tokens} would
 * pass the session's token limit ({@link SessionSpec#maxTokens()}); a chat answer is kept up to
 * {@value #MAX_ANSWER_BYTES} bytes (UTF-8) and a chat history up to {@link
 * #historyBytesPerSession(int)} bytes (the run's {@value #RUN_HISTORY_BYTES} shared by its
 * sessions, at most {@value #MAX_HISTORY_BYTES} each), past which the session ends. A session that
 * ends so has {@linkplain #atLimit() reached its limit}: not an error. The last turn's answer is
 * not kept: no turn sends it back. The history is in memory only, for the session's life; never
 * logged.
 *
 * <p>Not thread-safe: one session's turns follow one another.
 */
public final class Conversation {
  /** The most of one chat answer kept for the history, in UTF-8 bytes. */
  public static final int MAX_ANSWER_BYTES = 64 * 1024;

  /** The most of a chat session's history (every message's content), in UTF-8 bytes. */
  public static final int MAX_HISTORY_BYTES = 1024 * 1024;

  /**
   * The most of every chat session's history together, in UTF-8 bytes: each of N sessions may keep
   * this ÷ N, at most {@value #MAX_HISTORY_BYTES}.
   */
  public static final long RUN_HISTORY_BYTES = 256L * 1024 * 1024;

  /** The most chat sessions at once: each keeps at least one whole answer's worth of history. */
  public static final int MAX_CHAT_SESSIONS = (int) (RUN_HISTORY_BYTES / MAX_ANSWER_BYTES);

  /** How much history each of {@code sessions} chat sessions may keep, in UTF-8 bytes. */
  public static int historyBytesPerSession(int sessions) {
    return (int) Math.min(MAX_HISTORY_BYTES, RUN_HISTORY_BYTES / Math.max(1, sessions));
  }

  /**
   * What the conversations of a run share.
   *
   * @param model the model asked for
   * @param api {@link Api#COMPLETIONS} or {@link Api#CHAT}
   * @param mix the lengths of each turn's new input and output (completions); null for chat
   * @param chatMaxTokens {@code max_tokens} of a chat turn
   * @param stream whether answers are streamed
   * @param seed the run's seed
   * @param headers on every request (an API key), besides the session's id
   * @param spec the sessions' shape: turns and token limit
   * @param salt the run's prompt salt, mixed into the turns' token ids and text (not their
   *     lengths); null for none
   */
  public record Shape(
      String model,
      Api api,
      Mix mix,
      int chatMaxTokens,
      boolean stream,
      long seed,
      Map<String, String> headers,
      SessionSpec spec,
      PromptSalt salt) {
    public Shape {
      Objects.requireNonNull(model, "model");
      Objects.requireNonNull(spec, "spec");
      salt = salt == null ? PromptSalt.NONE : salt;
      headers = headers == null ? Map.of() : Map.copyOf(headers);
      if (api != Api.COMPLETIONS && api != Api.CHAT) {
        throw new IllegalArgumentException(
            "--sessions goes with --api completions or chat, not "
                + (api == null ? "none" : api.key())
                + ": a session's turns send back the history, which "
                + (api == Api.EMBEDDINGS
                    ? "embeddings do not have"
                    : "responses keep server-side"));
      }
      if (api == Api.COMPLETIONS) {
        Objects.requireNonNull(mix, "mix");
        for (Mix.Entry e : mix.entries()) {
          if ((long) e.inputTokens() + e.outputTokens() > spec.maxTokens()) {
            throw new IllegalArgumentException(
                "--session-max-tokens "
                    + spec.maxTokens()
                    + " is below a first turn's "
                    + e.inputTokens()
                    + " input + "
                    + e.outputTokens()
                    + " output tokens ("
                    + e.bucket()
                    + "): no session could start");
          }
        }
      } else if (chatMaxTokens < 1) {
        throw new IllegalArgumentException(
            "--output-tokens must be at least 1, got " + chatMaxTokens);
      } else if (spec.count() > MAX_CHAT_SESSIONS) {
        throw new IllegalArgumentException(
            "--sessions "
                + spec.count()
                + " with --api chat: at most "
                + MAX_CHAT_SESSIONS
                + " (the run keeps at most 256 MiB of chat history, and each session at least"
                + " one answer's 64 KiB)");
      }
    }
  }

  private final Shape shape;
  private final String id;
  private final long number;
  private final int maxAnswerBytes;
  private final int maxHistoryBytes;
  private final Map<String, String> headers;

  private int sent;
  private boolean awaiting;
  private boolean atLimit;

  // Completions: segment k − 1 is turn k's new ids (the previous answer's and its own input).
  private final int[] segments;
  private long promptTokens;
  private long lastCompletion;
  private int lastMaxTokens;

  // Chat: the messages' contents, user and assistant in turn, and their size.
  private final List<String> messages = new ArrayList<>();
  private long historyBytes;

  /**
   * @param id the session's id, sent as {@link Workload#SESSION_HEADER}
   * @param number the session's number in the run (1, 2, …), which seeds its turns
   */
  public Conversation(Shape shape, String id, long number) {
    this(shape, id, number, MAX_ANSWER_BYTES, historyBytesPerSession(shape.spec().count()));
  }

  /** With other bounds on a chat's answers and history (tests at the limit). */
  Conversation(Shape shape, String id, long number, int maxAnswerBytes, int maxHistoryBytes) {
    this.shape = Objects.requireNonNull(shape, "shape");
    this.id = Objects.requireNonNull(id, "id");
    this.number = number;
    this.maxAnswerBytes = maxAnswerBytes;
    this.maxHistoryBytes = maxHistoryBytes;
    Map<String, String> h = new HashMap<>(shape.headers());
    h.put(Workload.SESSION_HEADER, id);
    this.headers = Map.copyOf(h);
    this.segments = shape.api() == Api.COMPLETIONS ? new int[shape.spec().turns()] : null;
  }

  /** The session's id. */
  public String id() {
    return id;
  }

  /** Turns built so far. */
  public int turnsSent() {
    return sent;
  }

  /** Whether every turn has been built. */
  public boolean finished() {
    return sent >= shape.spec().turns();
  }

  /** Whether the session ended at its token or history limit ({@link #next()} returned null). */
  public boolean atLimit() {
    return atLimit;
  }

  /**
   * The next turn's request; null when it would pass the session's limit (the session ends there,
   * {@link #atLimit()}). Its answer must be {@linkplain #answered told} before the turn after.
   *
   * @throws IllegalStateException when every turn was built, or the last one's answer is awaited
   */
  public RequestSpec next() {
    if (finished() || atLimit) {
      throw new IllegalStateException("session " + id + " has no turn left");
    }
    if (awaiting) {
      throw new IllegalStateException("session " + id + " awaits turn " + sent + "'s answer");
    }
    int turn = sent + 1;
    RequestSpec spec = shape.api() == Api.COMPLETIONS ? completion(turn) : chat(turn);
    if (spec == null) {
      atLimit = true;
      return null;
    }
    sent = turn;
    awaiting = true;
    return spec;
  }

  /** Whether the next turn sends the answer's text back (chat), not only its length. */
  public boolean needsAnswerText() {
    return shape.api() == Api.CHAT;
  }

  /**
   * The last turn's answer: {@code usage.completion_tokens} as reported (-1 when none: the tokens
   * asked for count instead), and its text for chat (null otherwise; kept up to the answer's limit,
   * in whole characters). A chat answer that would take the history past its limit ends the session
   * ({@link #atLimit()}), but for the last turn's: it is not kept.
   */
  public void answered(long completionTokens, String text) {
    if (!awaiting) {
      throw new IllegalStateException("session " + id + " awaits no answer");
    }
    awaiting = false;
    if (shape.api() == Api.COMPLETIONS) {
      lastCompletion = completionTokens >= 0 ? completionTokens : lastMaxTokens;
      return;
    }
    if (finished()) {
      return;
    }
    String answer = text == null ? "" : text.substring(0, Utf8.prefix(text, maxAnswerBytes));
    int bytes = Utf8.length(answer);
    if (historyBytes + bytes > maxHistoryBytes) {
      atLimit = true;
      return;
    }
    messages.add(answer);
    historyBytes += bytes;
  }

  /** Turn {@code turn}'s exact-length request, or null past the token limit. */
  private RequestSpec completion(int turn) {
    Mix.Entry shapeOfTurn = shape.mix().pick(rng(turn, SHAPE).nextDouble());
    long fresh = turn == 1 ? shapeOfTurn.inputTokens() : lastCompletion + shapeOfTurn.inputTokens();
    long total = promptTokens + fresh;
    if (total + shapeOfTurn.outputTokens() > shape.spec().maxTokens()) {
      return null;
    }
    segments[turn - 1] = (int) fresh;
    promptTokens = total;
    lastMaxTokens = shapeOfTurn.outputTokens();
    StringBuilder sb = new StringBuilder((int) Math.min(Integer.MAX_VALUE / 2, total * 6 + 256));
    sb.append("{\"model\":");
    Workload.appendString(sb, shape.model());
    sb.append(",\"prompt\":[");
    for (int k = 1; k <= turn; k++) {
      SplittableRandom ids = new SplittableRandom(shape.salt().key(key(k, IDS)));
      for (int i = 0; i < segments[k - 1]; i++) {
        if (k > 1 || i > 0) {
          sb.append(',');
        }
        sb.append(ids.nextInt(Workload.MIN_TOKEN_ID, Workload.MAX_TOKEN_ID + 1));
      }
    }
    int out = shapeOfTurn.outputTokens();
    sb.append(']');
    Workload.appendExactOutput(sb, out, shape.stream());
    sb.append('}');
    return new RequestSpec(
        Api.COMPLETIONS,
        Api.COMPLETIONS.path(),
        Buffer.buffer(sb.toString()),
        shapeOfTurn.bucket(),
        (int) total,
        out,
        shape.stream(),
        headers,
        turn);
  }

  /** Turn {@code turn}'s chat request: the history, then the new prompt; null past the limit. */
  private RequestSpec chat(int turn) {
    // Keyed by the session and the turn: no two sessions' prompts are the same.
    String prompt =
        Workload.prompt(
            (number - 1) * SessionSpec.MAX_TURNS + turn, rng(turn, SHAPE), shape.salt());
    int bytes = Utf8.length(prompt);
    if (historyBytes + bytes > maxHistoryBytes) {
      return null;
    }
    messages.add(prompt);
    historyBytes += bytes;
    StringBuilder sb = new StringBuilder((int) Math.min(Integer.MAX_VALUE / 2, historyBytes + 256));
    sb.append("{\"model\":");
    Workload.appendString(sb, shape.model());
    sb.append(",\"messages\":[");
    for (int i = 0; i < messages.size(); i++) {
      sb.append(i == 0 ? "" : ",")
          .append(
              i % 2 == 0
                  ? "{\"role\":\"user\",\"content\":"
                  : "{\"role\":\"assistant\",\"content\":");
      Workload.appendString(sb, messages.get(i));
      sb.append('}');
    }
    sb.append("],\"max_tokens\":")
        .append(shape.chatMaxTokens())
        .append(",\"stream\":")
        .append(shape.stream());
    streamOptions(sb);
    sb.append('}');
    return new RequestSpec(
        Api.CHAT,
        Api.CHAT.path(),
        Buffer.buffer(sb.toString()),
        "chat",
        -1,
        shape.chatMaxTokens(),
        shape.stream(),
        headers,
        turn);
  }

  private void streamOptions(StringBuilder sb) {
    if (shape.stream()) {
      sb.append(",\"stream_options\":{\"include_usage\":true}");
    }
  }

  private static final long SHAPE = 0x7375_7266_6163_6531L;
  private static final long IDS = 0x7365_676d_656e_7473L;

  /** The random draws of turn {@code turn} of this session, for one {@code purpose}. */
  private SplittableRandom rng(int turn, long purpose) {
    return new SplittableRandom(key(turn, purpose));
  }

  /** The seed of {@link #rng}: the run's seed, the session's number, the turn, the purpose. */
  private long key(int turn, long purpose) {
    long s = Workload.mix64(shape.seed() ^ purpose);
    s = Workload.mix64(s ^ number);
    return Workload.mix64(s ^ turn);
  }

  /** Its id and progress only: the history never reaches a log. */
  @Override
  public String toString() {
    return "Conversation[" + id + ", turn " + sent + " of " + shape.spec().turns() + "]";
  }
}
