package io.phasemeter.load.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.workload.Api;
import io.vertx.core.buffer.Buffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The Responses API stream as vLLM writes it ({@code event: <type>}, {@code data: {"type":…,
 * "sequence_number":n,…}}, no {@code [DONE]}), read by {@link SseParser} and {@link
 * StreamReader.Responses} from canned bytes, whole and split across reads at every byte.
 */
class ResponsesStreamTest {

  /** What one stream told: content events, whether it ended, failed, why, and its usage. */
  record Outcome(int content, boolean ended, boolean failed, String reason, long in, long out) {}

  private static final String RESPONSE_IN_PROGRESS =
      "{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1,\"model\":\"m\","
          + "\"status\":\"in_progress\",\"output\":[],\"usage\":null,\"error\":null,"
          + "\"incomplete_details\":null}";

  private static String response(String status, int in, int out, String extra) {
    return "{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1,\"model\":\"m\","
        + "\"status\":\""
        + status
        + "\",\"output\":[{\"type\":\"message\",\"id\":\"msg_1\",\"status\":\""
        + status
        + "\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi é"
        + " there\",\"annotations\":[]}]}],"
        + "\"usage\":{\"input_tokens\":"
        + in
        + ",\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":"
        + out
        + ",\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":"
        + (in + out)
        + "},"
        + extra
        + "}";
  }

  private int seq;

  /** One event as vLLM writes it: its type twice, a sequence number, then {@code fields}. */
  private String event(String type, String fields) {
    return "event: "
        + type
        + "\ndata: {\"type\":\""
        + type
        + "\",\"sequence_number\":"
        + seq++
        + (fields.isEmpty() ? "" : "," + fields)
        + "}\n\n";
  }

  private String delta(String kind, String text) {
    return event(
        "response." + kind + ".delta",
        "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\""
            + text
            + "\",\"logprobs\":[]");
  }

  /** The events before the first delta: none of them is content, response.created least. */
  private String opening() {
    return event("response.created", "\"response\":" + RESPONSE_IN_PROGRESS)
        + event("response.in_progress", "\"response\":" + RESPONSE_IN_PROGRESS)
        + event(
            "response.output_item.added",
            "\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\","
                + "\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}")
        + event(
            "response.content_part.added",
            "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,"
                + "\"part\":{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[]}");
  }

  private String closing() {
    return event(
            "response.output_text.done",
            "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"text\":\"Hi é there\"")
        + event(
            "response.content_part.done",
            "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,"
                + "\"part\":{\"type\":\"output_text\",\"text\":\"Hi é there\"}")
        + event(
            "response.output_item.done",
            "\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\"}");
  }

  private String completed() {
    return opening()
        + delta("output_text", "Hi")
        + delta("output_text", " é")
        + delta("output_text", " there")
        + closing()
        + event(
            "response.completed", "\"response\":" + response("completed", 12, 3, "\"error\":null"));
  }

  @Test
  void aCompletedStreamSucceedsWithItsUsageAndOneContentEventPerDelta() {
    assertEverySplit(completed(), new Outcome(3, true, false, null, 12, 3));
  }

  @Test
  void reasoningAndOtherDeltasAreContentButEmptyDeltasAndTheOpeningAreNot() {
    String stream =
        opening()
            + delta("reasoning_text", "hm")
            + delta("output_text", "")
            + event(
                "response.function_call_arguments.delta",
                "\"item_id\":\"fc_1\",\"output_index\":1,\"delta\":\"{\\\"a\\\"\"")
            + delta("refusal", "no")
            + delta("output_text", "x")
            + closing()
            + event(
                "response.completed",
                "\"response\":" + response("completed", 5, 4, "\"error\":null"));
    assertEverySplit(stream, new Outcome(4, true, false, null, 5, 4));
  }

  @Test
  void anIncompleteResponseStoppedAtTheLengthIsASuccess() {
    String stream =
        opening()
            + delta("output_text", "a")
            + delta("output_text", "b")
            + closing()
            + event(
                "response.incomplete",
                "\"response\":"
                    + response(
                        "incomplete",
                        7,
                        2,
                        "\"error\":null,\"incomplete_details\":{\"reason\":\"max_output_tokens\"}"));
    assertEverySplit(stream, new Outcome(2, true, false, null, 7, 2));
  }

  @Test
  void aFailedResponseFailsTheStreamWithItsCode() {
    String failed =
        "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"failed\",\"output\":[],"
            + "\"usage\":null,\"error\":{\"code\":\"server_error\",\"message\":\"engine died\"}}";
    String stream =
        opening() + delta("output_text", "a") + event("response.failed", "\"response\":" + failed);
    assertEverySplit(
        stream, new Outcome(1, true, true, "response.failed (server_error): engine died", -1, -1));
  }

  @Test
  void aBareErrorEventFailsTheStream() {
    String stream =
        opening()
            + delta("output_text", "a")
            + event("error", "\"code\":\"invalid_prompt\",\"message\":\"too long\",\"param\":null");
    assertEverySplit(
        stream, new Outcome(1, false, true, "an error event (invalid_prompt): too long", -1, -1));
  }

  @Test
  void aStreamWithoutATerminalEventDidNotEnd() {
    String stream = opening() + delta("output_text", "a") + delta("output_text", "b") + closing();
    Outcome o = assertEverySplit(stream, new Outcome(2, false, false, null, -1, -1));
    assertThat(o.ended()).isFalse();
    assertThat(new StreamReader.Responses().unfinishedReason()).contains("response.completed");
  }

  @Test
  void anEventThatIsNotJsonFailsTheStream() {
    String stream =
        opening() + "event: response.output_text.delta\ndata: {\"delta\":\"a\"\n\n" + completed();
    assertEverySplit(stream, new Outcome(3, true, true, "an event is not JSON", 12, 3));
  }

  @Test
  void nothingAfterTheTerminalEventCounts() {
    String stream =
        completed()
            + delta("output_text", "late")
            + event("error", "\"code\":\"late\",\"message\":\"x\"");
    assertEverySplit(stream, new Outcome(3, true, false, null, 12, 3));
  }

  @Test
  void theTypeMayComeFromTheEventLineAloneAndFieldsInAnyOrder() {
    String stream =
        "event: response.output_text.delta\ndata: {\"delta\":\"a\",\"sequence_number\":1}\n\n"
            + "data: {\"delta\":\"b\",\"type\":\"response.output_text.delta\"}\n\n"
            + "event: response.completed\r\ndata: {\"response\":{\"usage\":{\"output_tokens\":2,"
            + "\"input_tokens\":1},\"status\":\"completed\"}}\r\n\r\n";
    assertEverySplit(stream, new Outcome(2, true, false, null, 1, 2));
  }

  @Test
  void aGatewaysOpenAiStyleErrorEventFailsTheStream() {
    String stream =
        opening()
            + delta("output_text", "a")
            + "data: {\"error\":{\"message\":\"upstream died\",\"type\":\"server_error\","
            + "\"code\":\"upstream_error\"}}\n\n";
    assertEverySplit(
        stream,
        new Outcome(1, false, true, "an error event (upstream_error): upstream died", -1, -1));
  }

  /**
   * Reads {@code stream} whole, then split in two at every byte, then in random pieces, and checks
   * every reading gives {@code expected}.
   */
  private static Outcome assertEverySplit(String stream, Outcome expected) {
    byte[] all = stream.getBytes(StandardCharsets.UTF_8);
    Outcome whole = read(List.of(all));
    assertThat(whole).isEqualTo(expected);
    for (int cut = 1; cut < all.length; cut++) {
      Outcome o =
          read(List.of(Arrays.copyOfRange(all, 0, cut), Arrays.copyOfRange(all, cut, all.length)));
      assertThat(o).as("cut at %d", cut).isEqualTo(expected);
    }
    SplittableRandom rng = new SplittableRandom(7);
    for (int round = 0; round < 50; round++) {
      List<byte[]> pieces = new ArrayList<>();
      int at = 0;
      while (at < all.length) {
        int n = Math.min(all.length - at, 1 + rng.nextInt(9));
        pieces.add(Arrays.copyOfRange(all, at, at + n));
        at += n;
      }
      assertThat(read(pieces)).as("random pieces, round %d", round).isEqualTo(expected);
    }
    return whole;
  }

  private static Outcome read(List<byte[]> reads) {
    SseParser parser = new SseParser(1 << 20);
    StreamReader reader = StreamReader.of(Api.RESPONSES);
    int[] content = {0};
    for (byte[] r : reads) {
      parser.feedEvents(
          Buffer.buffer(r),
          (type, data) -> {
            if (reader.event(type, data)) {
              content[0]++;
            }
          });
    }
    return new Outcome(
        content[0],
        reader.ended(),
        reader.failed(),
        reader.reason(),
        reader.usagePrompt,
        reader.usageCompletion);
  }
}
