package io.phasemeter.load.join;

import java.util.List;

/**
 * How the join with the proxies' feeds went, for the report: the totals summary.json has always
 * carried ({@code feed_reconnects}, {@code records_missed}), the requests joined by a record
 * fetched at the end, and each replica's part.
 *
 * @param reconnects every replica's feed reconnects, summed
 * @param recordsMissed every replica's missed records, summed
 * @param fetched requests joined by a record fetched by trace id at the end of the run
 * @param replicas one entry per replica, in the order they were found
 */
public record JoinCounts(
    long reconnects, long recordsMissed, long fetched, List<ReplicaCounts> replicas) {
  public JoinCounts {
    replicas = List.copyOf(replicas);
  }

  /** One feed's counts, no replica named (a single proxy, as before replicas). */
  public static JoinCounts of(RecordFeedClient.Counts c) {
    return new JoinCounts(c.reconnects(), c.recordsMissed(), 0, List.of());
  }

  /** The totals over {@code replicas}. */
  public static JoinCounts of(List<ReplicaCounts> replicas) {
    long reconnects = 0;
    long missed = 0;
    long fetched = 0;
    for (ReplicaCounts r : replicas) {
      reconnects += r.feedReconnects();
      missed += r.recordsMissed();
      fetched += r.fetched();
    }
    return new JoinCounts(reconnects, missed, fetched, replicas);
  }
}
