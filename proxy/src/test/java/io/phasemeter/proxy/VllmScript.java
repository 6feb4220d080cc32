package io.phasemeter.proxy;

import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.http.HttpServerResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/** Canned vLLM-shaped responses and a way to write them in awkward TCP pieces. */
final class VllmScript {
  private VllmScript() {}

  static final String ROLE =
      "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"sim-llama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";

  static String content(String text) {
    return "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"sim-llama\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
        + text
        + "\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
  }

  static final String FINISH =
      "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"sim-llama\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}]}\n\n";

  static final String USAGE =
      "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"sim-llama\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"total_tokens\":11,\"completion_tokens\":4}}\n\n";

  static final String DONE = "data: [DONE]\n\n";

  /** A whole stream of four content tokens, with \r\n line ends when {@code crlf}. */
  static String stream(boolean crlf) {
    String s =
        ROLE
            + ": keep-alive comment\n\n"
            + content("Hel")
            + content("lo, ")
            + content("wörld")
            + content(" 🚀")
            + FINISH
            + USAGE
            + DONE;
    return crlf ? s.replace("\n", "\r\n") : s;
  }

  static final String COMPLETION =
      "{\"id\":\"chatcmpl-9\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"sim-llama\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello\"},\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":null}],\"usage\":{\"prompt_tokens\":7,\"total_tokens\":9,\"completion_tokens\":2}}";

  /** Cuts {@code bytes} at every {@code step} bytes, plus inside each "\r\n" pair. */
  static List<Buffer> awkwardPieces(byte[] bytes, int step) {
    List<Buffer> pieces = new ArrayList<>();
    int from = 0;
    for (int i = 1; i < bytes.length; i++) {
      boolean cutHere = (i - from) >= step || (bytes[i - 1] == '\r' && bytes[i] == '\n');
      if (cutHere) {
        pieces.add(Buffer.buffer().appendBytes(bytes, from, i - from));
        from = i;
      }
    }
    pieces.add(Buffer.buffer().appendBytes(bytes, from, bytes.length - from));
    return pieces;
  }

  /** Answers with {@code body} as an event stream, written piece by piece {@code gapMs} apart. */
  static void writeStream(Vertx vertx, HttpServerRequest req, List<Buffer> pieces, long gapMs) {
    req.body()
        .onSuccess(
            b -> {
              HttpServerResponse resp = req.response();
              resp.setChunked(true).putHeader("content-type", "text/event-stream; charset=utf-8");
              writeNext(vertx, resp, pieces, 0, gapMs);
            });
  }

  private static void writeNext(
      Vertx vertx, HttpServerResponse resp, List<Buffer> pieces, int i, long gapMs) {
    if (resp.closed()) {
      return;
    }
    if (i == pieces.size()) {
      resp.end();
      return;
    }
    resp.write(pieces.get(i));
    vertx.setTimer(Math.max(1, gapMs), t -> writeNext(vertx, resp, pieces, i + 1, gapMs));
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
