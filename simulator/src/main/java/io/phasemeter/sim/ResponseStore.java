package io.phasemeter.sim;

import io.vertx.core.json.JsonObject;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The responses kept for {@code GET /v1/responses/{id}} and {@code previous_response_id}: at most
 * {@link #CAPACITY}, and at most {@link #MAX_HISTORY_CHARS} characters of conversation text counted
 * over the entries, the least recently used leaving first until both hold (the newest stays, even
 * alone past the text bound: its answer must be readable). vLLM keeps every response for ever (its
 * own FIXME); a simulator under load must not grow without bound.
 *
 * <p>A plain access-ordered {@link LinkedHashMap}, not Caffeine: the store lives on the simulator's
 * one context (no locks needed), and its bound must be exact and immediate so that a test can check
 * it, where Caffeine evicts by frequency and asynchronously.
 */
final class ResponseStore {
  /** The most responses kept. */
  static final int CAPACITY = 1_000;

  /**
   * The most conversation text kept, in characters summed over the entries' histories (64 Mi): the
   * texts let a {@code previous_response_id} turn hash as its predecessors did (the prefix cache),
   * and a request body may be 64 MiB, so a count alone does not bound the memory. Histories shared
   * between the entries of one conversation are counted once per entry: the bound is conservative.
   */
  static final long MAX_HISTORY_CHARS = 64L * 1024 * 1024;

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

    /** The characters of {@link #history}'s texts. */
    final long chars;

    Entry(JsonObject response, List<PromptBlocks.Message> history) {
      this.response = response;
      this.history = List.copyOf(history);
      long n = 0;
      for (PromptBlocks.Message m : this.history) {
        n += m.text() == null ? 0 : m.text().length();
      }
      this.chars = n;
    }

    String status() {
      return response.getString("status");
    }
  }

  private final Map<String, Entry> entries = new LinkedHashMap<>(16, 0.75f, true);
  private final int capacity;
  private final long maxChars;
  private long chars;

  ResponseStore() {
    this(CAPACITY, MAX_HISTORY_CHARS);
  }

  ResponseStore(int capacity) {
    this(capacity, MAX_HISTORY_CHARS);
  }

  ResponseStore(int capacity, long maxChars) {
    if (capacity < 1) {
      throw new IllegalArgumentException("capacity must be at least 1, got " + capacity);
    }
    if (maxChars < 1) {
      throw new IllegalArgumentException("maxChars must be at least 1, got " + maxChars);
    }
    this.capacity = capacity;
    this.maxChars = maxChars;
  }

  void put(String id, Entry entry) {
    Entry old = entries.put(id, entry);
    if (old != null) {
      chars -= old.chars;
    }
    chars += entry.chars;
    Iterator<Entry> eldest = entries.values().iterator();
    while (entries.size() > 1 && (entries.size() > capacity || chars > maxChars)) {
      chars -= eldest.next().chars;
      eldest.remove();
    }
  }

  /** The entry, or null; a hit counts as a use. */
  Entry get(String id) {
    return entries.get(id);
  }

  Entry remove(String id) {
    Entry e = entries.remove(id);
    if (e != null) {
      chars -= e.chars;
    }
    return e;
  }

  /** The characters of text the entries hold now. */
  long chars() {
    return chars;
  }

  int size() {
    return entries.size();
  }
}
