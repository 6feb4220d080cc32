package io.phasemeter.load.http;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.exc.InputCoercionException;
import java.io.IOException;

/**
 * What the runner needs from an embeddings response ({@code {"object":"list","data":[{"object":
 * "embedding","embedding":[…],"index":0}],"usage":{"prompt_tokens":N,…}}}): how many embeddings it
 * holds, its usage, whether it is an error. The vectors are skipped, never kept.
 */
final class EmbeddingsJson {
  private static final JsonFactory JSON = new JsonFactory();

  /** Objects in {@code data}. */
  final int embeddings;

  /** Whether an {@code error} is present and not null. */
  final boolean error;

  /** {@code usage.prompt_tokens}, or -1. */
  final long promptTokens;

  private EmbeddingsJson(int embeddings, boolean error, long promptTokens) {
    this.embeddings = embeddings;
    this.error = error;
    this.promptTokens = promptTokens;
  }

  /**
   * Reads one whole body.
   *
   * @return null when it is not a JSON object
   */
  static EmbeddingsJson parse(byte[] json) {
    try (JsonParser p = JSON.createParser(json)) {
      return read(p);
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  private static EmbeddingsJson read(JsonParser p) throws IOException {
    if (p.nextToken() != JsonToken.START_OBJECT) {
      return null;
    }
    int embeddings = 0;
    boolean error = false;
    long prompt = -1;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken value = p.nextToken();
      switch (name) {
        case "error" -> {
          error = value != JsonToken.VALUE_NULL;
          p.skipChildren();
        }
        case "data" -> {
          embeddings = 0;
          if (value == JsonToken.START_ARRAY) {
            JsonToken t;
            while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
              if (t == JsonToken.START_OBJECT) {
                embeddings++;
              }
              p.skipChildren();
            }
          } else {
            p.skipChildren();
          }
        }
        case "usage" -> {
          prompt = -1;
          if (value == JsonToken.START_OBJECT) {
            while (p.nextToken() == JsonToken.FIELD_NAME) {
              String field = p.currentName();
              JsonToken v = p.nextToken();
              if (field.equals("prompt_tokens") && v == JsonToken.VALUE_NUMBER_INT) {
                prompt = count(p);
              } else {
                p.skipChildren();
              }
            }
          } else {
            p.skipChildren();
          }
        }
        default -> p.skipChildren();
      }
    }
    return new EmbeddingsJson(embeddings, error, prompt);
  }

  private static long count(JsonParser p) throws IOException {
    try {
      return p.getLongValue();
    } catch (InputCoercionException e) {
      return -1;
    }
  }
}
