package io.phasemeter.load.workload;

import io.vertx.core.buffer.Buffer;
import java.util.Map;
import java.util.Objects;

/**
 * One request to send: where, what, and what to expect back.
 *
 * @param api the API it speaks, which decides how its answer is read
 * @param path request path, e.g. {@code /v1/completions}
 * @param body the JSON body
 * @param bucket low-cardinality length-bucket tag
 * @param promptTokens exact prompt tokens sent, or -1 for free text (usage is then not checked)
 * @param maxTokens completion tokens asked for (0 for embeddings, which generate none)
 * @param stream whether the response is streamed (SSE)
 * @param headers extra request headers (e.g. the simulator's {@code x-sim-*}); never null
 * @param turn the request's turn in its session, 1 for the first ({@link Workload#SESSION_HEADER}
 *     names the session); 0 for a request outside any session
 * @param exactOutput whether the server must generate exactly {@code maxTokens} ({@code min_tokens
 *     = max_tokens}, {@code ignore_eos}), so that {@code usage.completion_tokens} is checked
 *     against it even when the prompt is free text (a dataset's); the constructors without it set
 *     it for the exact-length prompts ({@code promptTokens >= 0}) of an API that generates
 */
public record RequestSpec(
    Api api,
    String path,
    Buffer body,
    String bucket,
    int promptTokens,
    int maxTokens,
    boolean stream,
    Map<String, String> headers,
    int turn,
    boolean exactOutput) {

  public RequestSpec {
    Objects.requireNonNull(api, "api");
    Objects.requireNonNull(path, "path");
    Objects.requireNonNull(body, "body");
    Objects.requireNonNull(bucket, "bucket");
    headers = headers == null ? Map.of() : Map.copyOf(headers);
    if (turn < 0) {
      throw new IllegalArgumentException("turn must be 0 (no session) or more, got " + turn);
    }
  }

  /**
   * A request whose output is exact exactly when its prompt is ({@code promptTokens >= 0}, an API
   * that generates).
   */
  public RequestSpec(
      Api api,
      String path,
      Buffer body,
      String bucket,
      int promptTokens,
      int maxTokens,
      boolean stream,
      Map<String, String> headers,
      int turn) {
    this(
        api,
        path,
        body,
        bucket,
        promptTokens,
        maxTokens,
        stream,
        headers,
        turn,
        promptTokens >= 0 && api != null && api.generates());
  }

  /** A request outside any session (turn 0). */
  public RequestSpec(
      Api api,
      String path,
      Buffer body,
      String bucket,
      int promptTokens,
      int maxTokens,
      boolean stream,
      Map<String, String> headers) {
    this(api, path, body, bucket, promptTokens, maxTokens, stream, headers, 0);
  }

  /** A request to {@code path}, read as the API of that path ({@link Api#ofPath}). */
  public RequestSpec(
      String path,
      Buffer body,
      String bucket,
      int promptTokens,
      int maxTokens,
      boolean stream,
      Map<String, String> headers) {
    this(Api.ofPath(path), path, body, bucket, promptTokens, maxTokens, stream, headers);
  }

  /** A request without extra headers, read as the API of its path. */
  public RequestSpec(
      String path, Buffer body, String bucket, int promptTokens, int maxTokens, boolean stream) {
    this(path, body, bucket, promptTokens, maxTokens, stream, Map.of());
  }

  /** This request with {@code extra} headers added (replacing any of the same name). */
  public RequestSpec withHeaders(Map<String, String> extra) {
    java.util.HashMap<String, String> all = new java.util.HashMap<>(headers);
    all.putAll(extra);
    return new RequestSpec(
        api, path, body, bucket, promptTokens, maxTokens, stream, all, turn, exactOutput);
  }

  /** Whether usage must match exactly ({@code promptTokens >= 0}). */
  public boolean exactLengths() {
    return promptTokens >= 0;
  }

  /** Names the headers but not their values: one of them may carry an API key ({@link ApiKey}). */
  @Override
  public String toString() {
    return "RequestSpec[api="
        + api
        + ", path="
        + path
        + ", bucket="
        + bucket
        + ", promptTokens="
        + promptTokens
        + ", maxTokens="
        + maxTokens
        + ", stream="
        + stream
        + ", headers="
        + new java.util.TreeSet<>(headers.keySet())
        + ", turn="
        + turn
        + ", exactOutput="
        + exactOutput
        + "]";
  }
}
