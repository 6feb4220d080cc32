package io.phasemeter.sim;

/**
 * A validated generation request, reduced to what the simulation needs.
 *
 * @param blockHashes the hashes of the prompt's full blocks for the prefix cache ({@link
 *     PromptBlocks}); none when the cache is off, and none for embeddings, which vLLM's pooling
 *     path does not prefix-cache
 */
record ParsedRequest(
    Endpoint endpoint,
    String model,
    int promptTokens,
    int maxTokens,
    int minTokens,
    boolean ignoreEos,
    boolean stream,
    boolean includeUsage,
    long requestHash,
    long[] blockHashes) {

  /** A request whose prompt has no cached blocks to look up. */
  ParsedRequest(
      Endpoint endpoint,
      String model,
      int promptTokens,
      int maxTokens,
      int minTokens,
      boolean ignoreEos,
      boolean stream,
      boolean includeUsage,
      long requestHash) {
    this(
        endpoint,
        model,
        promptTokens,
        maxTokens,
        minTokens,
        ignoreEos,
        stream,
        includeUsage,
        requestHash,
        PromptBlocks.NONE);
  }

  enum Endpoint {
    CHAT("chat.completion", "chat.completion.chunk", "chatcmpl-"),
    COMPLETION("text_completion", "text_completion", "cmpl-"),
    RESPONSES("response", "response", "resp_"),
    /** A pooling request: prefill only, one engine step, no generated text. */
    EMBEDDINGS("list", "list", "embd-");

    final String object;
    final String chunkObject;
    final String idPrefix;

    Endpoint(String object, String chunkObject, String idPrefix) {
      this.object = object;
      this.chunkObject = chunkObject;
      this.idPrefix = idPrefix;
    }
  }
}
