package io.phasemeter.sim;

/**
 * A snapshot of the simulator's counters.
 *
 * @param running sequences holding a slot now (prefilling, decoding or stalled)
 * @param waiting sequences queued for a slot now
 * @param completed generations that ran to their finish reason and were fully written
 * @param cancelled generations abandoned because the client went away
 * @param failed requests answered with an error status or ended by an injected fault
 * @param received engine requests received ({@code POST /v1/chat/completions}, {@code
 *     /v1/completions}, {@code /v1/responses} and {@code /v1/embeddings}), whatever became of them
 */
public record SimulatorStats(
    int running, int waiting, long completed, long cancelled, long failed, long received) {}
