package io.phasemeter.load.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The streaming reader against a tree-based reading of the same rules (what ResponseJson did before
 * it streamed), on hand-picked bodies and on random OpenAI-shaped ones.
 */
class ResponseJsonTest {
  private static final ObjectMapper MAPPER = new ObjectMapper();

  @Test
  void handPickedBodiesReadAsATreeReadsThem() {
    List<String> bodies =
        List.of(
            "{}",
            "[]",
            "42",
            "\"text\"",
            "",
            "{not json",
            "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3}}",
            "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}",
            "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}",
            "{\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hm\"}}]}",
            "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}",
            "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[]}}]}",
            "{\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"stop\"}]}",
            "{\"choices\":[],\"usage\":{\"completion_tokens\":3}}",
            "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"one two\"}}],"
                + "\"usage\":{\"prompt_tokens\":16,\"total_tokens\":24,\"completion_tokens\":8}}",
            "{\"error\":{\"message\":\"engine died\",\"code\":500}}",
            "{\"error\":null,\"choices\":[{\"text\":\"a\"}]}",
            "{\"usage\":{\"prompt_tokens\":1.5,\"completion_tokens\":\"3\"}}",
            "{\"usage\":{\"prompt_tokens\":99999999999999999999999,\"completion_tokens\":-2}}",
            "{\"usage\":null,\"choices\":null}",
            "{\"usage\":[1,2],\"choices\":{\"text\":\"x\"}}",
            "{\"choices\":[1,\"a\",null,[{\"text\":\"x\"}],{\"delta\":{\"delta\":{\"text\":\"x\"}}}]}",
            "{\"choices\":[{\"text\":\"\\u00e9\"}],\"nested\":{\"a\":[{\"b\":{}}]}}",
            "{\"choices\":[{\"text\":\"x\"}]} trailing",
            "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"prompt_tokens\":3}",
            "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"prompt_tokens\":3},\"usage\":{}}");
    for (String body : bodies) {
      assertSame(body);
    }
  }

  @Test
  void randomOpenAiShapedBodiesReadAsATreeReadsThem() {
    SplittableRandom rng = new SplittableRandom(8);
    for (int i = 0; i < 20_000; i++) {
      assertSame(randomBody(rng));
    }
  }

  private static void assertSame(String body) {
    String expected = tree(body.getBytes(StandardCharsets.UTF_8));
    assertThat(describe(ResponseJson.parse(body))).as(body).isEqualTo(expected);
    assertThat(describe(ResponseJson.parse(body.getBytes(StandardCharsets.UTF_8))))
        .as(body)
        .isEqualTo(expected);
  }

  private static String describe(ResponseJson r) {
    return r == null ? "null" : describe(r.content, r.error, r.promptTokens, r.completionTokens);
  }

  private static String describe(boolean content, boolean error, long prompt, long completion) {
    return "content=" + content + " error=" + error + " usage=" + prompt + "/" + completion;
  }

  private static String randomBody(SplittableRandom rng) {
    List<String> fields = new ArrayList<>();
    if (rng.nextInt(4) == 0) {
      fields.add("\"id\":\"cmpl-" + rng.nextInt(1000) + "\"");
    }
    if (rng.nextInt(3) == 0) {
      fields.add("\"choices\":" + oneOf(rng, "null", "[]", "{}", choices(rng), choices(rng)));
    }
    if (rng.nextInt(3) == 0) {
      fields.add(
          "\"usage\":"
              + oneOf(
                  rng,
                  "null",
                  "{}",
                  "{\"prompt_tokens\":"
                      + number(rng)
                      + ",\"completion_tokens\":"
                      + number(rng)
                      + "}",
                  "{\"completion_tokens\":" + number(rng) + ",\"x\":[1,{}]}"));
    }
    if (rng.nextInt(8) == 0) {
      fields.add("\"error\":" + oneOf(rng, "null", "{\"message\":\"m\"}", "\"e\"", "false"));
    }
    java.util.Collections.shuffle(fields, new java.util.Random(rng.nextLong()));
    String body = "{" + String.join(",", fields) + "}";
    return rng.nextInt(50) == 0 ? body.substring(0, rng.nextInt(body.length() + 1)) : body;
  }

  private static String choices(SplittableRandom rng) {
    List<String> cs = new ArrayList<>();
    for (int i = rng.nextInt(3); i > 0; i--) {
      cs.add(choice(rng, true));
    }
    return "[" + String.join(",", cs) + "]";
  }

  private static String choice(SplittableRandom rng, boolean delta) {
    List<String> fs = new ArrayList<>();
    fs.add("\"index\":0");
    for (String name : List.of("text", "content", "reasoning_content", "reasoning", "role")) {
      if (rng.nextInt(4) == 0) {
        fs.add("\"" + name + "\":" + oneOf(rng, "\"\"", "\"w\"", "null", "3", "[\"x\"]"));
      }
    }
    if (rng.nextInt(5) == 0) {
      fs.add("\"tool_calls\":" + oneOf(rng, "[]", "[{\"index\":0}]", "null", "{}", "[[]]"));
    }
    if (delta && rng.nextInt(2) == 0) {
      fs.add("\"delta\":" + oneOf(rng, "null", "\"d\"", choice(rng, false), choice(rng, false)));
    }
    if (rng.nextInt(3) == 0) {
      fs.add("\"finish_reason\":" + oneOf(rng, "null", "\"stop\"", "\"length\""));
    }
    return "{" + String.join(",", fs) + "}";
  }

  private static String number(SplittableRandom rng) {
    return oneOf(rng, "0", "16", "-1", "2.0", "\"8\"", "null", "123456789012", "1e3");
  }

  private static String oneOf(SplittableRandom rng, String... options) {
    return options[rng.nextInt(options.length)];
  }

  // ---- the tree reading, as ResponseJson did it before it streamed ----

  private static String tree(byte[] json) {
    JsonNode root;
    try {
      root = MAPPER.readTree(json);
    } catch (Exception e) {
      return "null";
    }
    if (root == null || !root.isObject()) {
      return "null";
    }
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
    return describe(content, error, prompt, completion);
  }

  private static boolean carriesContent(JsonNode node) {
    if (node == null || !node.isObject()) {
      return false;
    }
    return nonEmptyText(node.get("text"))
        || nonEmptyText(node.get("content"))
        || nonEmptyText(node.get("reasoning_content"))
        || nonEmptyText(node.get("reasoning"))
        || (node.get("tool_calls") != null
            && node.get("tool_calls").isArray()
            && !node.get("tool_calls").isEmpty());
  }

  private static boolean nonEmptyText(JsonNode n) {
    return n != null && n.isTextual() && !n.textValue().isEmpty();
  }

  private static long count(JsonNode n) {
    return n != null && n.canConvertToLong() && n.isIntegralNumber() ? n.longValue() : -1;
  }
}
