package io.phasemeter.sim;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * vLLM's automatic prefix caching, modelled: the hashes of prompt blocks whose KV the engine has
 * computed, at most {@code capacity} of them, the least recently used leaving first. A prompt's hit
 * is its longest run of leading blocks present ({@link PromptBlocks}: each block's hash covers
 * every token before it, so a run stops at the first block not present); those tokens skip prefill.
 *
 * <p>As vLLM: the hit never covers the whole prompt (the last token is always computed, so a prompt
 * of whole blocks that all hit recomputes its last block); a prompt's blocks enter when its prefill
 * has been computed, so two identical prompts prefilled at the same time both miss; a prompt's
 * blocks are used (touched) last block first, as vLLM frees a request's blocks in reverse so that
 * the tail of a prefix leaves before its head.
 *
 * <p>One cache for the engine, whatever the model name, as one vLLM engine's. Not vLLM: the cache
 * is its own LRU of {@code --prefix-cache-blocks}, not the KV blocks the running sequences leave
 * free. A plain access-ordered {@link LinkedHashMap}, not Caffeine: the engine's one context needs
 * no locks, and the bound must be exact LRU so that a test can check which block leaves.
 */
final class PrefixCache {
  private final int capacity;
  private final LinkedHashMap<Long, Boolean> blocks;

  /** A cache of {@code capacity} blocks; 0 for none (every lookup misses, nothing is kept). */
  PrefixCache(int capacity) {
    if (capacity < 0) {
      throw new IllegalArgumentException("capacity must be at least 0, got " + capacity);
    }
    this.capacity = capacity;
    this.blocks =
        new LinkedHashMap<>(16, 0.75f, true) {
          private static final long serialVersionUID = 1L;

          @Override
          protected boolean removeEldestEntry(Map.Entry<Long, Boolean> eldest) {
            return size() > PrefixCache.this.capacity;
          }
        };
  }

  boolean enabled() {
    return capacity > 0;
  }

  /**
   * Tokens of a prompt of {@code promptTokens} tokens and these full-block hashes that the cache
   * holds: the leading blocks present, times {@link SimulatorConfig#KV_BLOCK_TOKENS}, less one
   * block when that would be the whole prompt. The blocks counted are touched.
   */
  int lookup(long[] blockHashes, int promptTokens) {
    if (!enabled()) {
      return 0;
    }
    int max = (promptTokens - 1) / SimulatorConfig.KV_BLOCK_TOKENS; // at least one token computed
    int hit = 0;
    while (hit < blockHashes.length && hit < max && blocks.containsKey(blockHashes[hit])) {
      hit++;
    }
    touch(blockHashes, hit);
    return hit * SimulatorConfig.KV_BLOCK_TOKENS;
  }

  /** The prompt's prefill was computed: its full blocks are cached (or used again). */
  void insert(long[] blockHashes) {
    if (enabled()) {
      touch(blockHashes, blockHashes.length);
    }
  }

  /** Uses the first {@code n} blocks, the last first: the first is then the most recently used. */
  private void touch(long[] blockHashes, int n) {
    for (int i = n - 1; i >= 0; i--) {
      blocks.put(blockHashes[i], Boolean.TRUE);
    }
  }

  /** Blocks held now. */
  int size() {
    return blocks.size();
  }

  boolean contains(long blockHash) {
    return blocks.containsKey(blockHash);
  }
}
