package io.phasemeter.proxy.upstream;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.buffer.Buffer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Events as vLLM writes them: {@code event: <type>}, then the data, its fields in pydantic order.
 */
class ResponseEventTest {

  private static ResponseEvent event(String type, String data) {
    List<SseEvent> events = new ArrayList<>();
    new SseParser(1 << 20)
        .feed(
            Buffer.buffer("event: " + type + "\ndata: " + data + "\n\n"),
            e -> events.add(e.copy()));
    assertThat(events).hasSize(1);
    return ResponseEvent.inspect(events.get(0));
  }

  @Test
  void aTextDeltaIsContentWhereverItsTypeComes() {
    ResponseEvent e =
        event(
            "response.output_text.delta",
            "{\"content_index\":0,\"delta\":\"Hel\",\"item_id\":\"msg_1\",\"logprobs\":[],"
                + "\"output_index\":0,\"sequence_number\":4,"
                + "\"type\":\"response.output_text.delta\"}");
    assertThat(e.kind()).isEqualTo(ResponseEvent.Kind.CONTENT);
    assertThat(e.hasUsage()).isFalse();
    assertThat(
            event(
                    "response.reasoning_text.delta",
                    "{\"type\":\"response.reasoning_text.delta\",\"delta\":\"hmm\"}")
                .kind())
        .isEqualTo(ResponseEvent.Kind.CONTENT);
    assertThat(
            event(
                    "response.some_future_thing.delta",
                    "{\"delta\":\"x\",\"type\":\"response.some_future_thing.delta\"}")
                .kind())
        .as("a delta kind not known yet")
        .isEqualTo(ResponseEvent.Kind.CONTENT);
  }

  @Test
  void lifecycleEventsAndEmptyDeltasAreNotContent() {
    assertThat(
            event(
                    "response.created",
                    "{\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null},"
                        + "\"sequence_number\":0,\"type\":\"response.created\"}")
                .kind())
        .isEqualTo(ResponseEvent.Kind.OTHER);
    assertThat(
            event(
                    "response.output_text.delta",
                    "{\"delta\":\"\",\"type\":\"response.output_text.delta\"}")
                .kind())
        .isEqualTo(ResponseEvent.Kind.OTHER);
    assertThat(
            event(
                    "response.output_text.done",
                    "{\"text\":\"Hello\",\"type\":\"response.output_text.done\"}")
                .kind())
        .isEqualTo(ResponseEvent.Kind.OTHER);
  }

  @Test
  void theCompletedEventCarriesTheUsage() {
    ResponseEvent e =
        event(
            "response.completed",
            "{\"response\":{\"id\":\"resp_1\",\"output\":[{\"type\":\"message\",\"content\":"
                + "[{\"type\":\"output_text\",\"text\":\"Hello there\"}]}],\"status\":\"completed\","
                + "\"usage\":{\"input_tokens\":12,\"input_tokens_details\":{\"cached_tokens\":0},"
                + "\"output_tokens\":7,\"output_tokens_details\":{\"reasoning_tokens\":0},"
                + "\"total_tokens\":19}},\"sequence_number\":12,\"type\":\"response.completed\"}");
    assertThat(e.kind()).isEqualTo(ResponseEvent.Kind.COMPLETED);
    assertThat(e.inputTokens()).isEqualTo(12);
    assertThat(e.outputTokens()).isEqualTo(7);
    assertThat(e.finishReason()).isEqualTo("stop");
  }

  @Test
  void anIncompleteResponseStoppedAtItsLengthIsASuccessWithFinishReasonLength() {
    ResponseEvent e =
        event(
            "response.incomplete",
            "{\"response\":{\"incomplete_details\":{\"reason\":\"max_output_tokens\"},"
                + "\"status\":\"incomplete\",\"usage\":{\"input_tokens\":3,\"output_tokens\":16}},"
                + "\"type\":\"response.incomplete\"}");
    assertThat(e.kind()).isEqualTo(ResponseEvent.Kind.COMPLETED);
    assertThat(e.finishReason()).isEqualTo("length");
    assertThat(e.outputTokens()).isEqualTo(16);
  }

  @Test
  void vllmsCompletedEventWithAnIncompleteStatusStoppedAtItsLength() {
    ResponseEvent e =
        event(
            "response.completed",
            "{\"response\":{\"incomplete_details\":{\"reason\":\"max_output_tokens\"},"
                + "\"status\":\"incomplete\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3}},"
                + "\"sequence_number\":9,\"type\":\"response.completed\"}");
    assertThat(e.kind()).isEqualTo(ResponseEvent.Kind.COMPLETED);
    assertThat(e.finishReason()).isEqualTo("length");
  }

  @Test
  void aFailedResponseAndAnErrorEventAreFailuresWithABoundedType() {
    ResponseEvent failed =
        event(
            "response.failed",
            "{\"response\":{\"error\":{\"code\":\"server_error\",\"message\":\"boom\"},"
                + "\"status\":\"failed\",\"usage\":null},\"type\":\"response.failed\"}");
    assertThat(failed.kind()).isEqualTo(ResponseEvent.Kind.FAILED);
    assertThat(failed.errorType()).isEqualTo("server_error");
    ResponseEvent error =
        event(
            "error",
            "{\"code\":\"a secret prompt leaked here\",\"message\":\"x\",\"param\":null,"
                + "\"sequence_number\":5,\"type\":\"error\"}");
    assertThat(error.kind()).isEqualTo(ResponseEvent.Kind.FAILED);
    assertThat(error.errorType()).as("free text never reaches a span").isEqualTo("other");
    assertThat(event("error", "{\"type\":\"error\"}").errorType()).isEqualTo("unknown");
  }

  @Test
  void aDoneSentinelIsJustAnotherEvent() {
    List<SseEvent> events = new ArrayList<>();
    new SseParser(1024).feed(Buffer.buffer("data: [DONE]\n\n"), e -> events.add(e.copy()));
    assertThat(ResponseEvent.inspect(events.get(0)).kind()).isEqualTo(ResponseEvent.Kind.OTHER);
  }

  @Test
  void notOneJsonObjectIsMalformed() {
    assertThat(event("response.completed", "{\"type\":\"response.completed\"").kind())
        .isEqualTo(ResponseEvent.Kind.MALFORMED);
    assertThat(event("x", "[1]").kind()).isEqualTo(ResponseEvent.Kind.MALFORMED);
    assertThat(event("x", "{\"a\":1} {}").kind()).isEqualTo(ResponseEvent.Kind.MALFORMED);
  }

  @Test
  void aWholeResponseIsJudgedByItsStatus() {
    ResponseEvent ok =
        ResponseEvent.inspectBody(
            Buffer.buffer(
                "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\","
                    + "\"usage\":{\"input_tokens\":5,\"output_tokens\":9}}"));
    assertThat(ok.kind()).isEqualTo(ResponseEvent.Kind.COMPLETED);
    assertThat(ok.inputTokens()).isEqualTo(5);
    assertThat(ok.outputTokens()).isEqualTo(9);
    ResponseEvent failed =
        ResponseEvent.inspectBody(
            Buffer.buffer(
                "{\"error\":{\"code\":\"rate_limit_exceeded\"},\"status\":\"failed\",\"usage\":null}"));
    assertThat(failed.kind()).isEqualTo(ResponseEvent.Kind.FAILED);
    assertThat(failed.errorType()).isEqualTo("rate_limit_exceeded");
    assertThat(ResponseEvent.inspectBody(Buffer.buffer("not json")).kind())
        .isEqualTo(ResponseEvent.Kind.MALFORMED);
  }
}
