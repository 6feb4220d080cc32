package io.phasemeter.proxy.telemetry;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The record store at its bound keeps exactly the newest records. */
class RecordStoreTest {

  @Test
  void keepsExactlyTheNewestAtTheBound() {
    RecordFeed feed = new RecordFeed(16, () -> {});
    RecordStore store =
        new RecordStore(
            1000, Duration.ofMinutes(10), feed, new ExportPolicy(1.0, true, Duration.ofSeconds(1)));
    for (int i = 0; i < 5000; i++) {
      store.put("t" + i, "{\"i\":" + i + "}", System.nanoTime());
    }
    assertThat(store.size()).isEqualTo(1000);
    for (int i = 0; i < 4000; i++) {
      assertThat(store.get("t" + i)).as("t" + i).isNull();
    }
    for (int i = 4000; i < 5000; i++) {
      assertThat(store.get("t" + i)).isEqualTo("{\"i\":" + i + "}");
    }
  }

  @Test
  void recordsOlderThanTheTtlAreGone() {
    RecordStore store =
        new RecordStore(
            10,
            Duration.ofMillis(1),
            new RecordFeed(16, () -> {}),
            new ExportPolicy(1.0, true, Duration.ofSeconds(1)));
    store.put("old", "{}", System.nanoTime() - Duration.ofSeconds(1).toNanos());
    store.put("reused", "{\"n\":1}", System.nanoTime());
    store.put("reused", "{\"n\":2}", System.nanoTime());
    assertThat(store.get("old")).isNull();
    assertThat(store.get("reused")).isEqualTo("{\"n\":2}");
  }
}
