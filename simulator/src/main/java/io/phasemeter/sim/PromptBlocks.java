package io.phasemeter.sim;

import io.vertx.core.json.JsonArray;
import java.util.Arrays;
import java.util.List;

/**
 * The hashes of a prompt's full blocks of {@link SimulatorConfig#KV_BLOCK_TOKENS} tokens, for the
 * {@link PrefixCache}. Block {@code k}'s hash covers its own tokens and block {@code k − 1}'s hash,
 * as vLLM's block hashes do, so equal tokens at another position or after another prefix are
 * another block. A partial last block has no hash: vLLM caches full blocks only.
 *
 * <p>The tokens are those the simulator counts ({@link RequestParser}), one hashed unit each, so
 * the blocks always number {@code promptTokens / 16}:
 *
 * <ul>
 *   <li>a token-id prompt: its ids;
 *   <li>text: one unit per four characters, the id {@code /tokenize} gives that chunk ({@link
 *       Tokenizer}), so a block is 64 characters;
 *   <li>a chat (and a Responses conversation, rendered as a chat): the beginning-of-sequence token;
 *       per message, in order, a start token, its role (the role's name hashed, so a user and an
 *       assistant message of the same text differ), a separator, its content's text units and an
 *       end token; then the two generation-prompt tokens. The same history is therefore the same
 *       prefix, and a longer conversation hits the blocks of an earlier one that lie wholly before
 *       where the two part.
 * </ul>
 *
 * <p>A {@code cache_salt} (vLLM's request field) seeds the first block's hash, so requests of
 * different salts share nothing.
 */
final class PromptBlocks {
  static final long[] NONE = {};

  /** One message of a rendered conversation: its role and its content's text. */
  record Message(String role, String text) {}

  private static final long ROOT = 0x5EED_B10C_CAC4_E000L;

  private final long[] hashes;
  private int count;
  private int inBlock;
  private long state;

  private PromptBlocks(int promptTokens, String cacheSalt) {
    this.hashes = new long[Math.max(0, promptTokens) / SimulatorConfig.KV_BLOCK_TOKENS];
    this.state = cacheSalt == null ? ROOT : TokenPlan.mix(ROOT ^ RequestParser.fnv64(cacheSalt));
  }

  /** A token-id prompt's blocks. */
  static long[] tokenIds(JsonArray ids, String cacheSalt) {
    PromptBlocks b = new PromptBlocks(ids.size(), cacheSalt);
    // The raw list: JsonArray.getValue checks each element again (60,000 ids: 2.4 ms, not 0.3).
    for (Object id : ids.getList()) {
      if (!b.open()) {
        break;
      }
      b.unit(((Number) id).longValue());
    }
    return b.hashes();
  }

  /** A text prompt's blocks: {@code ceil(chars / 4)} units. */
  static long[] text(String text, String cacheSalt) {
    PromptBlocks b = new PromptBlocks((text.length() + 3) / 4, cacheSalt);
    b.textUnits(text);
    return b.hashes();
  }

  /**
   * A conversation's blocks, rendered as the chat template the simulator counts: {@code 3 + Σ (4 +
   * ceil(chars / 4))} tokens.
   */
  static long[] chat(List<Message> messages, int promptTokens, String cacheSalt) {
    PromptBlocks b = new PromptBlocks(promptTokens, cacheSalt);
    b.unit(Tokenizer.BOS);
    for (Message m : messages) {
      if (!b.open()) {
        break;
      }
      b.unit(Tokenizer.MESSAGE_START);
      // The sign bit keeps a role's unit apart from every token id and text unit.
      b.unit(Long.MIN_VALUE | RequestParser.fnv64(m.role()));
      b.unit(Tokenizer.SEPARATOR);
      b.textUnits(m.text());
      b.unit(Tokenizer.MESSAGE_END);
    }
    b.unit(Tokenizer.GENERATION_PROMPT_A);
    b.unit(Tokenizer.GENERATION_PROMPT_B);
    return b.hashes();
  }

  /** A chat's {@code messages} (already validated) as {@link Message}s. */
  static List<Message> messages(JsonArray messages) {
    Message[] out = new Message[messages.size()];
    for (int i = 0; i < out.length; i++) {
      io.vertx.core.json.JsonObject m = messages.getJsonObject(i);
      out[i] = new Message(m.getString("role"), Tokenizer.contentText(m.getValue("content")));
    }
    return Arrays.asList(out);
  }

  /** Whether a further unit can complete a block. */
  private boolean open() {
    return count < hashes.length;
  }

  private void textUnits(String s) {
    for (int i = 0; i < s.length() && open(); i += 4) {
      unit(Tokenizer.chunkId(s, i, Math.min(s.length(), i + 4)));
    }
  }

  private void unit(long u) {
    if (!open()) {
      return;
    }
    state = TokenPlan.mix(Long.rotateLeft(state, 7) ^ u);
    if (++inBlock == SimulatorConfig.KV_BLOCK_TOKENS) {
      inBlock = 0;
      hashes[count++] = state;
    }
  }

  private long[] hashes() {
    return count == hashes.length ? hashes : Arrays.copyOf(hashes, count);
  }
}
