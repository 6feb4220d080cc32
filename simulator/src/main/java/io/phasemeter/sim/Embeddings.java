package io.phasemeter.sim;

import io.phasemeter.sim.ParsedRequest.Endpoint;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.SplittableRandom;

/**
 * {@code POST /v1/embeddings}: the request as vLLM's {@code EmbeddingCompletionRequest} takes it
 * ({@code input} a string, strings, token ids or lists of token ids; {@code encoding_format} {@code
 * float} or {@code base64}; {@code dimensions}) and the answer in vLLM's {@code EmbeddingResponse}
 * shape. Vectors are deterministic: the seed and the input fix them, unit length like a normalising
 * pooler's; base64 is float32 little-endian, as vLLM writes it on x86.
 */
final class Embeddings {
  /** The vector length when a request gives no {@code dimensions}. */
  static final int DEFAULT_DIMENSIONS = 16;

  /** The longest vector a request may ask for (real models: 384 to 4,096). */
  static final int MAX_DIMENSIONS = 8_192;

  private Embeddings() {}

  /**
   * A validated request. {@code parsed} carries the sum of the inputs' tokens: the simulator
   * prefills them as one sequence in one slot (vLLM schedules one sequence per input, prefilled in
   * the same step), so the time is the same under a tokens-per-second prefill model.
   */
  record Request(ParsedRequest parsed, List<String> keys, boolean base64, int dimensions) {}

  static Request parse(RequestParser base, SimulatorConfig config, Buffer raw) {
    JsonObject body = RequestParser.object(raw);
    String model = base.model(body);
    Object input = body.getValue("input");
    List<String> keys = new ArrayList<>();
    List<Integer> tokens = new ArrayList<>();
    if (input instanceof String s) {
      keys.add("s:" + s);
      tokens.add(RequestParser.textTokens(s));
    } else if (input instanceof JsonArray list && !list.isEmpty()) {
      Object first = list.getValue(0);
      if (RequestParser.isTokenId(first)) {
        keys.add("t:" + list.encode());
        tokens.add(RequestParser.tokenIds(list, "input"));
      } else {
        for (Object item : list) {
          if (item instanceof String s && first instanceof String) {
            keys.add("s:" + s);
            tokens.add(RequestParser.textTokens(s));
          } else if (item instanceof JsonArray ids
              && first instanceof JsonArray
              && !ids.isEmpty()) {
            keys.add("t:" + ids.encode());
            tokens.add(RequestParser.tokenIds(ids, "input"));
          } else {
            throw invalidInput();
          }
        }
      }
    } else if (input == null) {
      throw ApiError.badRequest("Field required: 'input'", "input");
    } else {
      throw invalidInput();
    }
    long total = 0;
    for (int n : tokens) {
      if (n > config.maxModelLen()) {
        throw ApiError.badRequest(
            "This model's maximum context length is "
                + config.maxModelLen()
                + " tokens. However, you requested "
                + n
                + " tokens in the input for embedding generation. Please reduce the length of"
                + " the input.",
            "input");
      }
      total += n;
    }
    Object format = body.getValue("encoding_format", "float");
    if (!"float".equals(format) && !"base64".equals(format)) {
      throw ApiError.badRequest(
          "'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
    }
    Integer dimensions = RequestParser.optionalInt(body, "dimensions", 1);
    if (dimensions != null && dimensions > MAX_DIMENSIONS) {
      throw ApiError.badRequest(
          "dimensions must be at most " + MAX_DIMENSIONS + ", got " + dimensions + ".",
          "dimensions");
    }
    ParsedRequest parsed =
        new ParsedRequest(
            Endpoint.EMBEDDINGS,
            model,
            (int) Math.min(Integer.MAX_VALUE, total),
            1,
            0,
            true,
            false,
            false,
            RequestParser.fnv64(model + '\u0000' + keys));
    return new Request(
        parsed,
        keys,
        "base64".equals(format),
        dimensions == null ? DEFAULT_DIMENSIONS : dimensions);
  }

  /** The unit vector of one input: fixed by the seed, the model and the input. */
  static float[] vector(long seed, String model, String key, int dimensions) {
    SplittableRandom rng =
        new SplittableRandom(
            TokenPlan.mix(seed ^ RequestParser.fnv64(model + '\u0000' + key) ^ 0xE3BEDL));
    double[] raw = new double[dimensions];
    double norm = 0;
    for (int i = 0; i < dimensions; i++) {
      raw[i] = rng.nextDouble(-1, 1);
      norm += raw[i] * raw[i];
    }
    norm = Math.sqrt(norm);
    float[] v = new float[dimensions];
    for (int i = 0; i < dimensions; i++) {
      v[i] = (float) (raw[i] / norm);
    }
    return v;
  }

  /** float32, little-endian, base64: what vLLM sends for {@code encoding_format: base64}. */
  static String base64(float[] v) {
    ByteBuffer bytes = ByteBuffer.allocate(v.length * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
    for (float f : v) {
      bytes.putFloat(f);
    }
    return Base64.getEncoder().encodeToString(bytes.array());
  }

  static JsonObject response(Request request, long seed, String id, long created) {
    JsonArray data = new JsonArray();
    String model = request.parsed().model();
    for (int i = 0; i < request.keys().size(); i++) {
      float[] v = vector(seed, model, request.keys().get(i), request.dimensions());
      Object embedding;
      if (request.base64()) {
        embedding = base64(v);
      } else {
        JsonArray floats = new JsonArray();
        for (float f : v) {
          floats.add(f);
        }
        embedding = floats;
      }
      data.add(
          new JsonObject().put("index", i).put("object", "embedding").put("embedding", embedding));
    }
    int prompt = request.parsed().promptTokens();
    return new JsonObject()
        .put("id", id)
        .put("object", "list")
        .put("created", created)
        .put("model", model)
        .put("data", data)
        .put("usage", OpenAiJson.usage(prompt, 0, true));
  }

  private static ApiError invalidInput() {
    return ApiError.badRequest(
        "'input' must be a string, an array of strings, an array of token ids or an array of"
            + " arrays of token ids, and not empty",
        "input");
  }
}
