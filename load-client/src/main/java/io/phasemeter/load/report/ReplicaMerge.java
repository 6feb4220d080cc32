package io.phasemeter.load.report;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.phasemeter.load.join.JoinCounts;
import io.phasemeter.load.join.ReplicaCounts;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code load merge}'s sum of the instances' join with the proxies: the feed counters added, and
 * {@code join.replicas} summed by replica name (several load-client instances each followed the
 * same fleet). A replica is {@code up} in the merge only when every instance that followed it saw
 * it up at its end; shares are taken again of the merged total.
 */
final class ReplicaMerge {
  private final Map<String, long[]> byName = new LinkedHashMap<>();
  private final Map<String, Boolean> up = new LinkedHashMap<>();
  private long reconnects;
  private long missed;
  private long fetched;
  private boolean any;

  /** Adds one instance's summary.json {@code join} object. */
  void add(JsonNode join) {
    if (!join.has("feed_reconnects")) {
      return;
    }
    any = true;
    reconnects += join.path("feed_reconnects").asLong();
    missed += join.path("records_missed").asLong();
    fetched += join.path("fetched").asLong();
    for (JsonNode r : join.path("replicas")) {
      String name = r.path("replica").asText(null);
      if (name == null) {
        continue;
      }
      long[] c = byName.computeIfAbsent(name, k -> new long[4]);
      c[0] += r.path("joined").asLong();
      c[1] += r.path("fetched").asLong();
      c[2] += r.path("feed_reconnects").asLong();
      c[3] += r.path("records_missed").asLong();
      up.merge(name, ReplicaCounts.UP.equals(r.path("state").asText()), Boolean::logicalAnd);
    }
  }

  /** Writes the merged counters into the merged summary's {@code join}; nothing without a feed. */
  void write(ObjectNode join) {
    if (!any) {
      return;
    }
    List<ReplicaCounts> replicas = new ArrayList<>();
    long total = byName.values().stream().mapToLong(c -> c[0]).sum();
    byName.forEach(
        (name, c) ->
            replicas.add(
                new ReplicaCounts(
                    name,
                    c[0],
                    c[1],
                    total == 0 ? Double.NaN : (double) c[0] / total,
                    c[2],
                    c[3],
                    up.get(name) ? ReplicaCounts.UP : ReplicaCounts.DOWN)));
    JoinCounts merged = new JoinCounts(reconnects, missed, fetched, replicas);
    join.put("feed_reconnects", merged.reconnects());
    join.put("records_missed", merged.recordsMissed());
    join.put("fetched", merged.fetched());
    SummaryJson.replicas(join.putArray("replicas"), merged.replicas());
  }
}
