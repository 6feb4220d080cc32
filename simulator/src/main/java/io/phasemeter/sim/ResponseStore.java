package io.phasemeter.sim;

import io.vertx.core.json.JsonObject;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The responses kept for {@code GET /v1/responses/{id}} and {@code previous_response_id}: at most
 * {@link #CAPACITY}, the least recently used leaving first. vLLM keeps every response for ever (its
 * own FIXME); a simulator under load must not grow without bound.
 *
 * <p>A plain access-ordered {@link LinkedHashMap}, not Caffeine: the store lives on the simulator's
 * one context (no locks needed), and its bound must be exact and immediate so that a test can check
 * it, where Caffeine evicts by frequency and asynchronously.
 */
final class ResponseStore {
  /** The most responses kept. */
  static final int CAPACITY = 1_000;

  /** One stored response. Confined to the simulator's context. */
  static final class Entry {
    JsonObject response;

    /**
     * The conversation's non-system messages, this response's output included: counted and hashed
     * again for a {@code previous_response_id}. The texts are those the response (and its
     * predecessors in the chain) carried, shared between the entries of one conversation.
     */
    final List<PromptBlocks.Message> history;

    /** The background generation still running, for {@code cancel}; null once it ended. */
    Sequence running;

    Entry(JsonObject response, List<PromptBlocks.Message> history) {
      this.response = response;
      this.history = List.copyOf(history);
    }

    String status() {
      return response.getString("status");
    }
  }

  private final Map<String, Entry> entries;

  ResponseStore() {
    this(CAPACITY);
  }

  ResponseStore(int capacity) {
    if (capacity < 1) {
      throw new IllegalArgumentException("capacity must be at least 1, got " + capacity);
    }
    this.entries =
        new LinkedHashMap<>(16, 0.75f, true) {
          private static final long serialVersionUID = 1L;

          @Override
          protected boolean removeEldestEntry(Map.Entry<String, Entry> eldest) {
            return size() > capacity;
          }
        };
  }

  void put(String id, Entry entry) {
    entries.put(id, entry);
  }

  /** The entry, or null; a hit counts as a use. */
  Entry get(String id) {
    return entries.get(id);
  }

  Entry remove(String id) {
    return entries.remove(id);
  }

  int size() {
    return entries.size();
  }
}
