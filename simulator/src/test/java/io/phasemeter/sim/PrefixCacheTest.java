package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.sim.ParsedRequest.Endpoint;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The prefix cache's blocks ({@link PromptBlocks}) and its LRU ({@link PrefixCache}). */
class PrefixCacheTest {
  private static final RequestParser PARSER = new RequestParser(SimulatorConfig.defaults());

  /** {@code n} token ids from {@code first} on. */
  static JsonArray ids(int first, int n) {
    JsonArray ids = new JsonArray();
    IntStream.range(first, first + n).forEach(ids::add);
    return ids;
  }

  static JsonArray concat(JsonArray a, JsonArray b) {
    return a.copy().addAll(b);
  }

  @Test
  void blockHashesChainSoContentCountsOnlyAtItsPositionAfterItsPrefix() {
    JsonArray x = ids(100, 16);
    JsonArray y = ids(200, 16);
    JsonArray z = ids(300, 16);
    long[] xy = PromptBlocks.tokenIds(concat(x, y), null);
    long[] xz = PromptBlocks.tokenIds(concat(x, z), null);
    long[] yx = PromptBlocks.tokenIds(concat(y, x), null);
    long[] zy = PromptBlocks.tokenIds(concat(z, y), null);

    assertThat(xy).hasSize(2).isEqualTo(PromptBlocks.tokenIds(concat(x, y), null));
    assertThat(xz[0]).as("the same first block").isEqualTo(xy[0]);
    assertThat(xz[1]).isNotEqualTo(xy[1]);
    // Y's tokens first, or after Z: other blocks than Y after X.
    assertThat(yx[0]).isNotEqualTo(xy[1]);
    assertThat(zy[1]).as("the same tokens after another prefix").isNotEqualTo(xy[1]);
    assertThat(PromptBlocks.tokenIds(concat(x, y), "tenant-a"))
        .as("a cache_salt makes every block another")
        .doesNotContain(xy[0], xy[1]);
  }

  @Test
  void onlyFullBlocksHaveHashes() {
    assertThat(PromptBlocks.tokenIds(ids(1, 15), null)).isEmpty();
    assertThat(PromptBlocks.tokenIds(ids(1, 16), null)).hasSize(1);
    assertThat(PromptBlocks.tokenIds(ids(1, 47), null)).hasSize(2);
    // text: a unit is 4 characters (the last may be shorter), a block 16 units
    assertThat(PromptBlocks.text("a".repeat(60), null)).isEmpty();
    assertThat(PromptBlocks.text("a".repeat(61), null)).hasSize(1);
    assertThat(PromptBlocks.text("a".repeat(64), null)).hasSize(1);
    assertThat(PromptBlocks.text("a".repeat(64) + "b", null))
        .containsExactly(PromptBlocks.text("a".repeat(64), null));
    // text units are the ids /tokenize gives: the text and its token ids share blocks
    String text = "The quick brown fox jumps over the lazy dog, again and again and again.";
    assertThat(PromptBlocks.tokenIds(new JsonArray(Tokenizer.text(text)), null))
        .containsExactly(PromptBlocks.text(text, null));
  }

  @Test
  void everyParsedPromptHasOneHashPerFullBlockOfItsCountedTokens() {
    for (int chars : new int[] {0, 1, 51, 52, 53, 60, 64, 200, 1000}) {
      JsonObject chat = SimTestBase.chat("c".repeat(chars), 1);
      chat.getJsonArray("messages")
          .add(new JsonObject().put("role", "assistant").put("content", "d".repeat(chars / 2)))
          .add(
              new JsonObject()
                  .put("role", "user")
                  .put(
                      "content",
                      new JsonArray()
                          .add(new JsonObject().put("type", "text").put("text", "e".repeat(7)))
                          .add(new JsonObject().put("type", "text").put("text", "f".repeat(9)))));
      assertFullBlocks(PARSER.parse(Endpoint.CHAT, Buffer.buffer(chat.encode())));
      if (chars > 0) {
        JsonObject completion = new JsonObject().put("prompt", "p".repeat(chars));
        assertFullBlocks(PARSER.parse(Endpoint.COMPLETION, Buffer.buffer(completion.encode())));
        JsonObject listed =
            new JsonObject().put("prompt", new JsonArray().add(ids(5, chars)).copy());
        assertFullBlocks(PARSER.parse(Endpoint.COMPLETION, Buffer.buffer(listed.encode())));
      }
    }
    ParsedRequest off =
        new RequestParser(SimulatorConfig.defaults().withPrefixCacheBlocks(0))
            .parse(Endpoint.COMPLETION, Buffer.buffer("{\"prompt\":" + ids(1, 64).encode() + "}"));
    assertThat(off.blockHashes()).as("the cache off: nothing hashed").isEmpty();
  }

  private static void assertFullBlocks(ParsedRequest parsed) {
    assertThat(parsed.blockHashes())
        .as("%s of %d tokens", parsed.endpoint(), parsed.promptTokens())
        .hasSize(parsed.promptTokens() / SimulatorConfig.KV_BLOCK_TOKENS);
  }

  @Test
  void chatBlocksFollowTheMessagesAndTheirRoles() {
    PromptBlocks.Message system = new PromptBlocks.Message("system", "s".repeat(120));
    PromptBlocks.Message user = new PromptBlocks.Message("user", "u".repeat(200));
    // BOS, the system message (start, role, separator, 30 units, end), the user message (3 + 50 +
    // 1), the generation prompt: 91 tokens, 5 blocks.
    long[] one = chat(List.of(system, user));
    assertThat(one).hasSize(5);
    // The same conversation one answer longer parts from it at token 89 (the generation prompt
    // there, the answer's start here): every block of the first lies before, and hits.
    long[] longer = chat(List.of(system, user, new PromptBlocks.Message("assistant", "ok")));
    assertThat(longer).hasSize(6).startsWith(one);
    // Another user text parts at token 38 (its first unit), in block 2.
    long[] otherUser = chat(List.of(system, new PromptBlocks.Message("user", "v".repeat(200))));
    assertThat(otherUser).startsWith(one[0], one[1]);
    assertThat(otherUser[2]).isNotEqualTo(one[2]);
    // The same text in another role parts at token 36 (the role), in block 2 too.
    long[] asAssistant =
        chat(List.of(system, new PromptBlocks.Message("assistant", "u".repeat(200))));
    assertThat(asAssistant).startsWith(one[0], one[1]);
    assertThat(asAssistant[2]).isNotEqualTo(one[2]);
  }

  private static long[] chat(List<PromptBlocks.Message> messages) {
    long tokens = RequestParser.CHAT_PRIMING_TOKENS;
    for (PromptBlocks.Message m : messages) {
      tokens += RequestParser.messageTokens(m.text().length());
    }
    long[] blocks = PromptBlocks.chat(messages, (int) tokens, null);
    assertThat(blocks).hasSize((int) tokens / 16);
    return blocks;
  }

  @Test
  void theLeadingBlocksPresentHitButNeverTheWholePrompt() {
    PrefixCache cache = new PrefixCache(100);
    long[] prompt = PromptBlocks.tokenIds(ids(1, 32), null);
    assertThat(cache.lookup(prompt, 32)).as("empty cache").isZero();
    cache.insert(prompt);
    // 32 tokens, both blocks present: the last token must be computed, so the last block is.
    assertThat(cache.lookup(prompt, 32)).isEqualTo(16);
    long[] longer = PromptBlocks.tokenIds(ids(1, 33), null);
    assertThat(cache.lookup(longer, 33)).isEqualTo(32);
    long[] other = PromptBlocks.tokenIds(concat(ids(1, 16), ids(900, 20)), null);
    assertThat(cache.lookup(other, 36)).as("only the shared first block").isEqualTo(16);
    assertThat(cache.lookup(PromptBlocks.tokenIds(ids(2, 48), null), 48)).isZero();
    assertThat(cache.size()).isEqualTo(2);
  }

  @Test
  void atCapacityTheLeastRecentlyUsedBlockLeaves() {
    PrefixCache cache = new PrefixCache(3);
    long a = 11;
    long b = 12;
    long c = 13;
    long d = 14;
    cache.insert(new long[] {a, b}); // b first, then a: the prompt's head is the most recent
    cache.insert(new long[] {c});
    assertThat(cache.size()).isEqualTo(3);
    assertThat(cache.lookup(new long[] {a}, 20)).isEqualTo(16); // a used again: b is the eldest
    cache.insert(new long[] {d});
    assertThat(cache.size()).as("never above the capacity").isEqualTo(3);
    assertThat(cache.contains(b)).as("the least recently used left").isFalse();
    assertThat(cache.contains(a)).isTrue();
    assertThat(cache.contains(c)).isTrue();
    assertThat(cache.contains(d)).isTrue();
    // A prompt's tail leaves before its head: [21, 22] enters 22 first (evicting c, then a).
    cache.insert(new long[] {21, 22});
    assertThat(cache.contains(c)).isFalse();
    assertThat(cache.contains(a)).isFalse();
    cache.insert(new long[] {31, 32}); // evicts d, then 22
    assertThat(cache.contains(22)).isFalse();
    assertThat(cache.contains(21)).isTrue();
    assertThat(cache.size()).isEqualTo(3);
  }

  @Test
  void aPromptWhoseFirstBlockLeftHitsNothingThoughLaterBlocksAreThere() {
    PrefixCache cache = new PrefixCache(2);
    cache.insert(new long[] {1, 2});
    cache.insert(new long[] {2}); // block 2 used again (as the head of another prompt)
    cache.insert(new long[] {3}); // evicts block 1
    assertThat(cache.contains(1)).isFalse();
    assertThat(cache.contains(2)).isTrue();
    assertThat(cache.lookup(new long[] {1, 2}, 48)).isZero();
  }

  @Test
  void capacityZeroIsOff() {
    PrefixCache off = new PrefixCache(0);
    long[] prompt = PromptBlocks.tokenIds(ids(1, 64), null);
    off.insert(prompt);
    assertThat(off.enabled()).isFalse();
    assertThat(off.size()).isZero();
    assertThat(off.lookup(prompt, 64)).isZero();
    assertThatThrownBy(() -> new PrefixCache(-1)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theFlagIsCheckedAtItsLimits() {
    SimulatorConfig d = SimulatorConfig.defaults();
    assertThat(d.prefixCacheBlocks()).isEqualTo(16_384);
    assertThat(d.promptTokensDetails()).isFalse();
    assertThat(d.withPrefixCacheBlocks(0).prefixCacheBlocks()).isZero();
    assertThat(d.withPrefixCacheBlocks(1 << 20).prefixCacheBlocks()).isEqualTo(1 << 20);
    assertThatThrownBy(() -> d.withPrefixCacheBlocks(-1))
        .hasMessage("--prefix-cache-blocks must be between 0 (off) and 1048576, got -1");
    assertThatThrownBy(() -> d.withPrefixCacheBlocks((1 << 20) + 1))
        .hasMessageContaining("--prefix-cache-blocks");
  }

  @Test
  void aCacheSaltMustBeANonEmptyString() {
    for (String salt : new String[] {"\"\"", "7"}) {
      String body = "{\"prompt\":\"hello\",\"cache_salt\":" + salt + "}";
      assertThatThrownBy(() -> PARSER.parse(Endpoint.COMPLETION, Buffer.buffer(body)))
          .isInstanceOf(ApiError.class)
          .hasMessageContaining("cache_salt");
    }
  }
}
