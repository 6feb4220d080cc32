package io.phasemeter.proxy.pipeline;

import io.phasemeter.proxy.upstream.ResponseEvent;
import io.phasemeter.proxy.upstream.SseEvent;
import io.phasemeter.proxy.upstream.SseParser;
import io.phasemeter.proxy.upstream.StreamChunk;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpServerResponse;
import java.util.Locale;
import java.util.function.Consumer;

/**
 * A streamed response relayed event by event while generation runs: chat and text completions'
 * {@code data:} chunks, or the Responses API's typed events. Every event goes to the client as it
 * came, with backpressure (a slow client pauses the upstream); the first content event marks server
 * TTFT and ends the first token's deadline; usage and finish reasons are taken as they pass; how
 * the stream ends says whether it was whole.
 */
final class EventStreamRelay {
  /** The largest event the parser holds; a longer one is malformed. */
  static final int MAX_EVENT_BYTES = 4 << 20;

  private final UpstreamExchange exchange;
  private final RequestContext ctx;
  private final GenerationTimers timers;
  private final boolean responses;
  private final SseParser parser = new SseParser(MAX_EVENT_BYTES);
  // Made once: a method reference written at the call would be a new object per chunk.
  private final Consumer<SseEvent> eventSink = this::onEvent;
  // The relayed stream's first byte was seen to open an event stream.
  private boolean opened;
  private boolean sawDone;
  // llama.cpp's server reports a failure mid-stream as an event with an "error:" field (no
  // data), then ends its response without [DONE].
  private boolean sawErrorField;
  private boolean sawTerminal;

  EventStreamRelay(UpstreamExchange exchange, RequestContext ctx, GenerationTimers timers) {
    this.exchange = exchange;
    this.ctx = ctx;
    this.timers = timers;
    this.responses = ctx.route().api() == ApiRoute.Api.RESPONSES;
  }

  /** Relays {@code resp}, a 200 with an event stream, to the client. */
  void relay(HttpClientResponse resp) {
    HttpServerResponse out = ctx.response();
    out.setStatusCode(200);
    out.setChunked(true);
    String type = resp.getHeader("content-type");
    out.putHeader("content-type", type);
    out.putHeader("cache-control", "no-cache");
    out.putHeader("server-timing", ServerTiming.upTo(ctx, Phase.QUEUE));
    ctx.statusSent(200);
    timers.armIdle();
    resp.handler(
        chunk -> {
          if (exchange.over()) {
            return;
          }
          timers.activity(ctx.now());
          if (!opened && chunk.length() > 0) {
            if (!SseParser.opensEventStream(chunk.getByte(0))) {
              // Checked before a byte reaches the client, so the answer is still a clean 502.
              exchange.fail(
                  ProxyFailure.of(
                      ProxyFailure.Kind.UPSTREAM_MALFORMED,
                      "The upstream's text/event-stream body is not an event stream."));
              return;
            }
            opened = true;
          }
          try {
            parser.feed(chunk, eventSink);
          } catch (RuntimeException e) {
            exchange.fail(
                ProxyFailure.of(
                    ProxyFailure.Kind.UPSTREAM_MALFORMED,
                    "The upstream sent an event stream the proxy could not parse."));
            return;
          }
          if (!exchange.over() && out.writeQueueFull()) {
            timers.waitForClient(resp, out);
          }
        });
    resp.endHandler(v -> onEnd(resp, out));
  }

  private void onEnd(HttpClientResponse resp, HttpServerResponse out) {
    if (exchange.over()) {
      return;
    }
    if (!parser.hasPending() && parser.pending().length() > 0) {
      // Only the "\n" of a final "\r\n" is left: it belongs to the client too.
      out.write(parser.pending());
    }
    if (!responses
        && (sawErrorField || exchange.upstreamErrorType() != null)
        && !parser.hasPending()
        && !sawDone) {
      // The upstream said it failed, then ended without [DONE] (llama.cpp's server: a data:
      // {"error": ...} event, or an error: field in older versions): its error, not a malformed
      // stream. The event went to the client as it came.
      exchange.fail(
          ProxyFailure.of(
              ProxyFailure.Kind.UPSTREAM_ERROR,
              "The upstream reported an error mid-stream and ended its response."));
      return;
    }
    if (parser.hasPending() || !(responses ? sawTerminal : sawDone)) {
      String end = responses ? "its response.completed event." : "[DONE].";
      // How the body ended says what happened. One that ended by its own framing (the last
      // chunk, or its Content-Length reached) is a whole response the upstream chose to end: not
      // a whole stream, so malformed. One without framing ends only when its connection closes,
      // which may have been a cut. (A connection lost mid-framing is the exception handler's:
      // disconnected.)
      exchange.fail(
          framed(resp)
              ? ProxyFailure.of(
                  ProxyFailure.Kind.UPSTREAM_MALFORMED,
                  "The upstream ended its response before " + end)
              : ProxyFailure.of(
                  ProxyFailure.Kind.UPSTREAM_DISCONNECTED,
                  "The upstream closed the connection before " + end));
      return;
    }
    exchange.complete(ctx.now());
  }

  /**
   * Whether {@code resp}'s body has an end of its own (chunked, or a Content-Length) rather than
   * ending when its connection closes.
   */
  static boolean framed(HttpClientResponse resp) {
    String te = resp.getHeader("transfer-encoding");
    return resp.getHeader("content-length") != null
        || (te != null && te.toLowerCase(Locale.ROOT).contains("chunked"));
  }

  /** Whether an event's first line is an {@code error:} field (llama.cpp's failure event). */
  private static boolean startsWithErrorField(Buffer raw) {
    byte[] field = {'e', 'r', 'r', 'o', 'r', ':'};
    if (raw.length() < field.length) {
      return false;
    }
    for (int i = 0; i < field.length; i++) {
      if (raw.getByte(i) != field[i]) {
        return false;
      }
    }
    return true;
  }

  private void onEvent(SseEvent event) {
    if (exchange.over()) {
      return;
    }
    HttpServerResponse out = ctx.response();
    if (!event.hasData()) {
      if (startsWithErrorField(event.raw())) {
        sawErrorField = true;
      }
      out.write(event.raw());
      return;
    }
    if (responses) {
      onResponseEvent(event, out);
      return;
    }
    StreamChunk chunk = StreamChunk.inspect(event);
    switch (chunk.kind()) {
      case MALFORMED -> {
        exchange.fail(
            ProxyFailure.of(
                ProxyFailure.Kind.UPSTREAM_MALFORMED,
                "The upstream sent an event that is not valid JSON."));
        return;
      }
      case DONE -> sawDone = true;
      case ERROR -> {
        // vLLM's generator failed: the client gets the event as it came (and the [DONE] that
        // follows); the request is failed, never a success.
        UpstreamUsage.take(ctx, chunk);
        exchange.upstreamErrorType(chunk.errorType());
        out.write(event.raw());
        return;
      }
      case USAGE_ONLY -> {
        UpstreamUsage.take(ctx, chunk);
        if (!ctx.clientWantsUsage()) {
          return;
        }
      }
      default -> UpstreamUsage.take(ctx, chunk);
    }
    // Read the clock before handing the chunk over: once written, a client on the same host
    // can read it before this call returns, and its TTFT must not come out shorter than ours.
    long handedAt = ctx.now();
    out.write(event.raw());
    if (chunk.kind() == StreamChunk.Kind.CONTENT) {
      ctx.onContentChunk(handedAt);
      timers.cancelFirstToken();
    }
  }

  /**
   * One event of a Responses stream: every event goes to the client as it came; a delta that
   * carries generated text (or reasoning, or tool arguments) is content; the terminal event carries
   * the usage; {@code response.failed} or {@code error} fail the request.
   */
  private void onResponseEvent(SseEvent event, HttpServerResponse out) {
    ResponseEvent r = ResponseEvent.inspect(event);
    switch (r.kind()) {
      case MALFORMED -> {
        exchange.fail(
            ProxyFailure.of(
                ProxyFailure.Kind.UPSTREAM_MALFORMED,
                "The upstream sent an event that is not valid JSON."));
        return;
      }
      case COMPLETED -> {
        sawTerminal = true;
        UpstreamUsage.take(ctx, r);
      }
      case FAILED -> {
        sawTerminal = true;
        UpstreamUsage.take(ctx, r);
        exchange.upstreamErrorType(r.errorType());
      }
      default -> {}
    }
    long handedAt = ctx.now();
    out.write(event.raw());
    if (r.kind() == ResponseEvent.Kind.CONTENT) {
      ctx.onContentChunk(handedAt);
      timers.cancelFirstToken();
    }
  }
}
