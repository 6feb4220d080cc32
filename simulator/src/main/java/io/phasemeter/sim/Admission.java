package io.phasemeter.sim;

import io.phasemeter.sim.FaultPlan.Kind;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import java.util.SplittableRandom;

/**
 * The steps every engine request (chat, completion, Responses, embeddings) takes before the engine
 * has it, in one place so the endpoints agree: its fault, asked for or drawn in arrival order; the
 * faults that end it before the engine; its sequence with the timing headers; the queue. Confined
 * to the simulator's context.
 */
final class Admission {
  private final SimulatorConfig config;
  private final Engine engine;
  private final EngineTracer tracer;
  private final SplittableRandom faultRng;
  private long ids;

  Admission(SimulatorConfig config, Engine engine, EngineTracer tracer) {
    this.config = config;
    this.engine = engine;
    this.tracer = tracer;
    this.faultRng = new SplittableRandom(TokenPlan.mix(config.seed() ^ 0xFA017L));
  }

  /** The request's fault (drawn when not asked for); checks the timing headers too. */
  FaultPlan faults(HttpServerRequest request) {
    FaultPlan fault = FaultPlan.choose(request.headers(), config, faultRng);
    FaultPlan.holdNanos(request.headers());
    FaultPlan.decodeStepOverrideMs(request.headers());
    return fault;
  }

  /**
   * Ends the request before the engine when its fault says so: {@code reset} closes the connection;
   * {@code error} answers 500 when {@code errorIsA500} (a Responses stream reports it in-band
   * instead). True when the request ended here.
   */
  boolean endedBeforeEngine(HttpServerRequest request, FaultPlan fault, boolean errorIsA500) {
    if (fault.kind() == Kind.ERROR && errorIsA500) {
      refuse(
          request.response(), ApiError.internal("Simulated engine failure (x-sim-fault: error)"));
      return true;
    }
    if (fault.kind() == Kind.RESET) {
      engine.countFailed();
      request.connection().close();
      return true;
    }
    return false;
  }

  /** A sequence for the engine with the request's timing headers and its stall, if any. */
  Sequence sequence(
      HttpServerRequest request,
      ParsedRequest parsed,
      TokenPlan plan,
      FaultPlan fault,
      Sequence.Listener listener,
      String id) {
    boolean stall = fault.kind() == Kind.STALL;
    long stallNanos = fault.stallMs() < 0 ? -1 : fault.stallMs() * 1_000_000;
    Sequence sequence =
        new Sequence(
            parsed,
            plan,
            FaultPlan.holdNanos(request.headers()),
            FaultPlan.decodeStepOverrideMs(request.headers()),
            stall ? fault.afterTokens() : -1,
            stallNanos,
            listener);
    sequence.requestId = id;
    sequence.traceParent = tracer.parent(request.headers());
    return sequence;
  }

  /** Runs or queues the sequence; answers 503 when the queue is full. */
  boolean admit(HttpServerResponse response, Sequence sequence) {
    if (engine.admit(sequence)) {
      return true;
    }
    refuse(
        response,
        ApiError.unavailable(
            "The waiting queue is full (" + config.maxQueue() + " requests); try again later."));
    return false;
  }

  /** Answers with {@code error}, counting the request as failed. */
  void refuse(HttpServerResponse response, ApiError error) {
    engine.countFailed();
    error.sendTo(response);
  }

  /**
   * The hex of the next id: 16 digits fixed by the seed, then the request's number in {@code
   * counterDigits} digits (8 for chat and completion ids, 16 for the 32-digit ids vLLM's uuids
   * have).
   */
  String nextHex(int counterDigits) {
    return String.format("%016x%0" + counterDigits + "x", TokenPlan.mix(config.seed()), ++ids);
  }

  static long nowSeconds() {
    return System.currentTimeMillis() / 1000;
  }
}
