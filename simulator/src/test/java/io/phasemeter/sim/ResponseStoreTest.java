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

  private static ResponseStore.Entry entry(String id, int chars) {
    return new ResponseStore.Entry(
        new JsonObject().put("id", id),
        List.of(
            new PromptBlocks.Message("user", "u".repeat(chars / 2)),
            new PromptBlocks.Message("assistant", "a".repeat(chars - chars / 2))));
  }

  @Test
  void theTextHeldIsBoundedTooLeastRecentlyUsedOutFirst() {
    ResponseStore store = new ResponseStore(100, 1_000);
    store.put("a", entry("a", 400));
    store.put("b", entry("b", 400));
    assertThat(store.chars()).isEqualTo(800);
    assertThat(store.get("a")).isNotNull();

    // 1,200 characters: b, the least recently used, leaves; a and c hold 800.
    store.put("c", entry("c", 400));
    assertThat(store.get("b")).isNull();
    assertThat(store.chars()).isEqualTo(800);
    assertThat(store.size()).isEqualTo(2);

    // Exactly at the bound: nothing leaves.
    store.put("d", entry("d", 200));
    assertThat(store.chars()).isEqualTo(1_000);
    assertThat(store.size()).isEqualTo(3);

    // One entry past the bound on its own stays, alone.
    store.put("e", entry("e", 5_000));
    assertThat(store.size()).isEqualTo(1);
    assertThat(store.get("e")).isNotNull();
    assertThat(store.chars()).isEqualTo(5_000);

    // Replacing and removing keep the count.
    store.put("e", entry("e", 10));
    assertThat(store.chars()).isEqualTo(10);
    store.remove("e");
    assertThat(store.chars()).isZero();
  }

  @Test
  void capacityMustBePositive() {
    assertThatThrownBy(() -> new ResponseStore(0)).isInstanceOf(IllegalArgumentException.class);
  }
}
