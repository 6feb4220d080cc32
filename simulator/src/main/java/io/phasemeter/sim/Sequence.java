package io.phasemeter.sim;

/** One request's generation as the engine schedules it. Confined to the simulator's context. */
final class Sequence {
  enum State {
    NEW,
    WAITING,
    RUNNING,
    DONE,
    CANCELLED,
    FAILED
  }

  /** Receives the generated tokens, on the simulator's context. */
  interface Listener {
    /**
     * Completion token {@code index} was generated. {@code finishReason} is null except on the last
     * token. The EOS token of a {@code stop} finish has empty text.
     */
    void onToken(int index, String text, String finishReason);
  }

  final ParsedRequest request;
  final TokenPlan plan;
  final long holdNanos;
  final double decodeStepOverrideMs;
  final int stallAfterTokens;
  final long stallNanos;
  final Listener listener;

  /** The incoming trace context (null when the simulator exports no spans). */
  io.opentelemetry.context.Context traceParent;

  /** The response id, also the span's {@code gen_ai.request.id}. */
  String requestId;

  State state = State.NEW;
  long arrivalNanos;
  long startNanos;
  long dueNanos;
  long firstTokenNanos;
  long lastTokenNanos;
  int nextIndex;
  boolean stallDone;
  long epoch;
  long timerId = -1;

  /** Prompt tokens the prefix cache served when it started: not prefilled. */
  int cachedTokens;

  /** KV-cache blocks it holds while running: its prompt and the tokens generated so far. */
  int kvBlocks;

  /**
   * On the engine's shared step clock ({@code --step-clock shared}): its tokens come at the batch's
   * step boundaries, {@link #dueNanos} being the earliest boundary it may emit at.
   */
  boolean onStepClock;

  /**
   * @param stallAfterTokens stall once this many tokens were generated; negative for no stall
   * @param stallNanos length of the stall; negative to stall until the client goes away
   */
  Sequence(
      ParsedRequest request,
      TokenPlan plan,
      long holdNanos,
      double decodeStepOverrideMs,
      int stallAfterTokens,
      long stallNanos,
      Listener listener) {
    this.request = request;
    this.plan = plan;
    this.holdNanos = holdNanos;
    this.decodeStepOverrideMs = decodeStepOverrideMs;
    this.stallAfterTokens = stallAfterTokens;
    this.stallNanos = stallNanos;
    this.listener = listener;
  }

  boolean active() {
    return state == State.WAITING || state == State.RUNNING;
  }
}
