package io.phasemeter.load.join;

import java.util.Objects;

/**
 * One replica's part in a run's join (summary.json {@code join.replicas}).
 *
 * @param replica {@code host:port} of its admin address
 * @param joined requests joined with its records, {@code fetched} included
 * @param fetched of those, joined by a record fetched by trace id at the end of the run
 * @param share {@code joined} ÷ every replica's (NaN when nothing joined)
 * @param feedReconnects times its feed was subscribed again after it dropped
 * @param recordsMissed records its feed published that never reached the client
 * @param state {@link #UP} when its feed was open at the end of the run, else {@link #DOWN}
 */
public record ReplicaCounts(
    String replica,
    long joined,
    long fetched,
    double share,
    long feedReconnects,
    long recordsMissed,
    String state) {
  public static final String UP = "up";
  public static final String DOWN = "down";

  public ReplicaCounts {
    Objects.requireNonNull(replica, "replica");
    if (joined < 0 || fetched < 0 || fetched > joined) {
      throw new IllegalArgumentException(
          "replica " + replica + ": joined " + joined + ", fetched " + fetched);
    }
    if (feedReconnects < 0 || recordsMissed < 0) {
      throw new IllegalArgumentException("replica " + replica + ": negative feed counts");
    }
    if (!UP.equals(state) && !DOWN.equals(state)) {
      throw new IllegalArgumentException("replica " + replica + ": state " + state);
    }
  }
}
