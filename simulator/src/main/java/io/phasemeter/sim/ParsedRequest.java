package io.phasemeter.sim;

/** A validated generation request, reduced to what the simulation needs. */
record ParsedRequest(
    Endpoint endpoint,
    String model,
    int promptTokens,
    int maxTokens,
    int minTokens,
    boolean ignoreEos,
    boolean stream,
    boolean includeUsage,
    long requestHash) {

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
