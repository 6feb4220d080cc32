package io.phasemeter.bench;

import io.vertx.core.buffer.Buffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A realistic vLLM {@code /v1/chat/completions} event stream: the role chunk, {@value #TOKENS}
 * content chunks of one token each, the finish chunk, the usage chunk and {@code [DONE]}, one event
 * per network chunk as vLLM flushes them.
 */
final class VllmStream {
  static final int TOKENS = 64;

  private VllmStream() {}

  static List<String> events() {
    String head =
        "{\"id\":\"chatcmpl-9b2f6c1e4a7d4f0e8c3b5a6d7e8f9a0b\",\"object\":\"chat.completion.chunk\","
            + "\"created\":1767052800,\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",";
    List<String> events = new ArrayList<>();
    events.add(
        head
            + "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
            + "\"logprobs\":null,\"finish_reason\":null}]}");
    for (int i = 0; i < TOKENS; i++) {
      events.add(
          head
              + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token"
              + i
              + "\"},\"logprobs\":null,\"finish_reason\":null}]}");
    }
    events.add(
        head
            + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":null,"
            + "\"finish_reason\":\"length\",\"stop_reason\":null}]}");
    events.add(
        head
            + "\"choices\":[],\"usage\":{\"prompt_tokens\":512,\"total_tokens\":576,"
            + "\"completion_tokens\":64}}");
    events.add("[DONE]");
    return events;
  }

  /** Each event as the network chunk it arrives in. */
  static Buffer[] chunks() {
    List<String> events = events();
    Buffer[] chunks = new Buffer[events.size()];
    for (int i = 0; i < chunks.length; i++) {
      chunks[i] =
          Buffer.buffer(("data: " + events.get(i) + "\n\n").getBytes(StandardCharsets.UTF_8));
    }
    return chunks;
  }
}
