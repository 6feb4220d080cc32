package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vertx.core.json.JsonObject;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The response store's bound: least recently used out first, exactly at the bound. */
class ResponseStoreTest {

  private static ResponseStore.Entry entry(String id) {
    return new ResponseStore.Entry(new JsonObject().put("id", id), List.of());
  }

  @Test
  void holdsAThousandByDefault() {
    ResponseStore store = new ResponseStore();
    for (int i = 0; i < ResponseStore.CAPACITY + 10; i++) {
      store.put("r" + i, entry("r" + i));
    }
    assertThat(ResponseStore.CAPACITY).isEqualTo(1_000);
    assertThat(store.size()).isEqualTo(1_000);
    assertThat(store.get("r9")).isNull();
    assertThat(store.get("r10")).isNotNull();
  }

  @Test
  void aReadCountsAsAUse() {
    ResponseStore store = new ResponseStore(3);
    store.put("a", entry("a"));
    store.put("b", entry("b"));
    store.put("c", entry("c"));
    assertThat(store.get("a")).isNotNull();

    store.put("d", entry("d"));

    assertThat(store.size()).isEqualTo(3);
    assertThat(store.get("b")).as("least recently used").isNull();
    assertThat(store.get("a")).isNotNull();
    assertThat(store.get("c")).isNotNull();
    assertThat(store.get("d")).isNotNull();
    assertThat(store.remove("a")).isNotNull();
    assertThat(store.size()).isEqualTo(2);
  }

  @Test
  void capacityMustBePositive() {
    assertThatThrownBy(() -> new ResponseStore(0)).isInstanceOf(IllegalArgumentException.class);
  }
}
