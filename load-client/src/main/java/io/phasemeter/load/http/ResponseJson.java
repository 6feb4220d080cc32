package io.phasemeter.load.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * What the runner needs from one OpenAI response object (a streamed chunk or a whole body): whether
 * it carries generated content, its usage, whether it is an error. Nothing of the text is kept.
 */
final class ResponseJson {
  private static final ObjectMapper MAPPER = new ObjectMapper();

  final boolean content;
  final boolean error;
  final long promptTokens;
  final long completionTokens;

  private ResponseJson(boolean content, boolean error, long promptTokens, long completionTokens) {
    this.content = content;
    this.error = error;
    this.promptTokens = promptTokens;
    this.completionTokens = completionTokens;
  }

  /** Whether a usage object was present. */
  boolean hasUsage() {
    return completionTokens >= 0 || promptTokens >= 0;
  }

  /**
   * Reads one JSON object.
   *
   * @return null when the text is not a JSON object
   */
  static ResponseJson parse(String json) {
    JsonNode root;
    try {
      root = MAPPER.readTree(json);
    } catch (Exception e) {
      return null;
    }
    return root == null || !root.isObject() ? null : of(root);
  }

  /** Like {@link #parse(String)}, for a whole body. */
  static ResponseJson parse(byte[] json) {
    JsonNode root;
    try {
      root = MAPPER.readTree(json);
    } catch (Exception e) {
      return null;
    }
    return root == null || !root.isObject() ? null : of(root);
  }

  private static ResponseJson of(JsonNode root) {
    JsonNode err = root.get("error");
    boolean error = err != null && !err.isNull();
    boolean content = false;
    JsonNode choices = root.get("choices");
    if (choices != null && choices.isArray()) {
      for (JsonNode choice : choices) {
        if (carriesContent(choice) || carriesContent(choice.get("delta"))) {
          content = true;
          break;
        }
      }
    }
    long prompt = -1;
    long completion = -1;
    JsonNode usage = root.get("usage");
    if (usage != null && usage.isObject()) {
      prompt = count(usage.get("prompt_tokens"));
      completion = count(usage.get("completion_tokens"));
    }
    return new ResponseJson(content, error, prompt, completion);
  }

  /**
   * Generated content: text ({@code text}, {@code content}), reasoning ({@code reasoning_content},
   * {@code reasoning}) or tool calls. The role-only first chat chunk ({@code content: ""}) and an
   * EOS chunk with empty text carry none.
   */
  private static boolean carriesContent(JsonNode node) {
    if (node == null || !node.isObject()) {
      return false;
    }
    return nonEmptyText(node.get("text"))
        || nonEmptyText(node.get("content"))
        || nonEmptyText(node.get("reasoning_content"))
        || nonEmptyText(node.get("reasoning"))
        || nonEmptyArray(node.get("tool_calls"));
  }

  private static boolean nonEmptyText(JsonNode n) {
    return n != null && n.isTextual() && !n.textValue().isEmpty();
  }

  private static boolean nonEmptyArray(JsonNode n) {
    return n != null && n.isArray() && !n.isEmpty();
  }

  private static long count(JsonNode n) {
    return n != null && n.canConvertToLong() && n.isIntegralNumber() ? n.longValue() : -1;
  }
}
