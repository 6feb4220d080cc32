package io.phasemeter.load.schedule;

/**
 * One load step (a whole run is one step unless {@code --steps} is given).
 *
 * @param index 0-based
 * @param offeredRate requests per second asked for; -1 in the closed model
 * @param concurrency closed-model concurrency; 0 in the open model
 * @param startNanos when the step began (client clock)
 * @param endNanos when its last request was scheduled (client clock)
 * @param sent requests started in the step
 * @param dropped iterations that could not start (in-flight cap reached)
 */
public record StepInfo(
    int index,
    double offeredRate,
    int concurrency,
    long startNanos,
    long endNanos,
    long sent,
    long dropped) {}
