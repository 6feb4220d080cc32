package io.phasemeter.sim;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.ArrayList;
import java.util.List;

/**
 * The simulator's tokenizer for {@code /tokenize} and {@code /detokenize}, counting exactly as the
 * generation endpoints do (see {@link RequestParser}): text is one token per four characters; a
 * chat is a BOS token, per message a start, role and separator token before its content and an end
 * token after it, and two tokens of generation prompt.
 *
 * <p>Ids: {@code 1}–{@code 15} are the template's special tokens and decode to nothing; a chunk of
 * up to four ASCII characters is packed into its id, so ASCII text survives a round trip; any other
 * chunk hashes to an id that decodes to U+FFFD; other ids decode to one word of the generator's
 * vocabulary.
 */
final class Tokenizer {
  static final int BOS = 1;
  static final int GENERATION_PROMPT_A = 2;
  static final int GENERATION_PROMPT_B = 3;
  static final int MESSAGE_START = 4;
  static final int ROLE = 5;
  static final int SEPARATOR = 6;
  static final int MESSAGE_END = 7;
  static final int SPECIAL_LIMIT = 16;

  private static final int PACKED = 1 << 28;
  private static final int HASHED = 1 << 29;

  private Tokenizer() {}

  /** A completion prompt: {@code ceil(chars / 4)} tokens, none for an empty string. */
  static List<Integer> text(String s) {
    List<Integer> ids = new ArrayList<>((s.length() + 3) / 4);
    for (int i = 0; i < s.length(); i += 4) {
      ids.add(chunkId(s, i, Math.min(s.length(), i + 4)));
    }
    return ids;
  }

  /**
   * A chat as the chat endpoint counts it: {@code 3 + Σ (4 + ceil(chars / 4))} with the generation
   * prompt, two fewer without.
   */
  static List<Integer> chat(JsonArray messages, boolean addGenerationPrompt) {
    if (messages.isEmpty()) {
      throw ApiError.badRequest("'messages' must be a non-empty array", "messages");
    }
    List<Integer> ids = new ArrayList<>();
    ids.add(BOS);
    for (Object item : messages) {
      if (!(item instanceof JsonObject message) || !(message.getValue("role") instanceof String)) {
        throw ApiError.badRequest(
            "Each message must be an object with a string 'role'", "messages");
      }
      ids.add(MESSAGE_START);
      ids.add(ROLE);
      ids.add(SEPARATOR);
      ids.addAll(text(contentText(message.getValue("content"))));
      ids.add(MESSAGE_END);
    }
    if (addGenerationPrompt) {
      ids.add(GENERATION_PROMPT_A);
      ids.add(GENERATION_PROMPT_B);
    }
    return ids;
  }

  /** The text of one token id. */
  static String decode(long id) {
    if (id < SPECIAL_LIMIT) {
      return "";
    }
    if (id >= PACKED && id < HASHED) {
      StringBuilder chunk = new StringBuilder(4);
      for (int shift = 0; shift < 28; shift += 7) {
        int c = (int) (id >>> shift) & 0x7F;
        if (c != 0) {
          chunk.append((char) c);
        }
      }
      return chunk.toString();
    }
    if (id >= HASHED && id < 2L * HASHED) {
      return "\uFFFD";
    }
    return TokenPlan.word(id);
  }

  static String decode(JsonArray ids) {
    StringBuilder text = new StringBuilder();
    for (Object id : ids) {
      text.append(decode(((Number) id).longValue()));
    }
    return text.toString();
  }

  /** The id of the chunk {@code s[from, to)}, of one to four characters. */
  static int chunkId(String s, int from, int to) {
    int id = PACKED;
    for (int i = from; i < to; i++) {
      char c = s.charAt(i);
      if (c == 0 || c > 0x7F) {
        long h = RequestParser.fnv64(s.substring(from, to));
        return HASHED + (int) (h & (HASHED - 1));
      }
      id |= c << (7 * (i - from));
    }
    return id;
  }

  /** A message's content as the chat counts it: a string, or its parts' texts joined. */
  static String contentText(Object content) {
    if (content == null) {
      return "";
    }
    if (content instanceof String s) {
      return s;
    }
    if (content instanceof JsonArray parts) {
      StringBuilder text = new StringBuilder();
      for (Object part : parts) {
        if (!(part instanceof JsonObject p)) {
          throw ApiError.badRequest("Each content part must be an object", "messages");
        }
        if (p.getValue("text") instanceof String t) {
          text.append(t);
        }
      }
      return text.toString();
    }
    throw ApiError.badRequest("'content' must be a string or an array of parts", "messages");
  }
}
