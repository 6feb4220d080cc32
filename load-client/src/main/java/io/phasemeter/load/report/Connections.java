package io.phasemeter.load.report;

/**
 * What the run's connections did.
 *
 * @param reuse whether connections were kept alive and reused ({@code --connection-reuse})
 * @param opened connections opened
 * @param closedByServer connections the server closed while idle after a response that announced
 *     keep-alive
 * @param staleRetries requests that failed on a reused connection before any response byte and were
 *     sent again on a fresh one
 */
public record Connections(boolean reuse, long opened, long closedByServer, long staleRetries) {
  /** For runs from before these were counted (merged or replayed): nothing known. */
  public static final Connections UNKNOWN = new Connections(true, -1, -1, -1);

  /** Whether the counts are known. */
  public boolean known() {
    return opened >= 0;
  }
}
