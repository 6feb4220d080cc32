package io.phasemeter.load.http;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The readers of Responses API objects and embeddings bodies, on hand-picked bodies. */
class ApiJsonTest {

  private static String responses(String json) {
    ResponsesJson r = ResponsesJson.parse(json);
    ResponsesJson b = ResponsesJson.parse(json.getBytes(StandardCharsets.UTF_8));
    String s =
        r == null
            ? "null"
            : "type="
                + r.type
                + " content="
                + r.content(r.type)
                + " status="
                + r.status
                + " error="
                + r.error
                + " code="
                + r.errorCode
                + " usage="
                + r.inputTokens
                + "/"
                + r.outputTokens;
    String t =
        b == null
            ? "null"
            : "type="
                + b.type
                + " content="
                + b.content(b.type)
                + " status="
                + b.status
                + " error="
                + b.error
                + " code="
                + b.errorCode
                + " usage="
                + b.inputTokens
                + "/"
                + b.outputTokens;
    assertThat(t).as("bytes and text read alike: " + json).isEqualTo(s);
    return s;
  }

  @Test
  void responsesObjectsAndEvents() {
    assertThat(responses("[]")).isEqualTo("null");
    assertThat(responses("{not json")).isEqualTo("null");
    assertThat(responses("{}"))
        .isEqualTo("type=null content=false status=null error=false code=null usage=-1/-1");
    assertThat(responses("{\"type\":\"response.output_text.delta\",\"delta\":\"x\"}"))
        .contains("content=true");
    // A delta of another kind is content too; an empty or non-string delta is not.
    assertThat(responses("{\"delta\":\"{\",\"type\":\"response.function_call_arguments.delta\"}"))
        .contains("content=true");
    assertThat(responses("{\"type\":\"response.output_text.delta\",\"delta\":\"\"}"))
        .contains("content=false");
    assertThat(responses("{\"type\":\"response.output_text.delta\",\"delta\":{\"a\":1}}"))
        .contains("content=false");
    // A delta on an event that is not a *.delta is not content.
    assertThat(responses("{\"type\":\"response.output_text.done\",\"delta\":\"x\"}"))
        .contains("content=false");
    // The nested response gives status, usage and error; response.created's usage is null.
    assertThat(
            responses(
                "{\"type\":\"response.created\",\"response\":{\"status\":\"in_progress\","
                    + "\"usage\":null,\"error\":null}}"))
        .isEqualTo(
            "type=response.created content=false status=in_progress error=false code=null"
                + " usage=-1/-1");
    assertThat(
            responses(
                "{\"response\":{\"error\":{\"type\":\"server_error\",\"message\":\"m\"},"
                    + "\"status\":\"failed\"},\"type\":\"response.failed\"}"))
        .isEqualTo(
            "type=response.failed content=false status=failed error=true code=server_error"
                + " usage=-1/-1");
    assertThat(
            responses(
                "{\"object\":\"response\",\"status\":\"completed\",\"usage\":{\"input_tokens\":3,"
                    + "\"output_tokens\":99999999999999999999999},\"error\":null}"))
        .isEqualTo("type=null content=false status=completed error=false code=null usage=3/-1");
    assertThat(responses("{\"usage\":{\"input_tokens\":1.5,\"output_tokens\":\"2\"}}"))
        .contains("usage=-1/-1");
    assertThat(responses("{\"type\":\"error\",\"code\":429,\"message\":\"slow down\"}"))
        .contains("code=429");
  }

  private static String embeddings(String json) {
    EmbeddingsJson e = EmbeddingsJson.parse(json.getBytes(StandardCharsets.UTF_8));
    return e == null
        ? "null"
        : "embeddings=" + e.embeddings + " error=" + e.error + " prompt=" + e.promptTokens;
  }

  @Test
  void embeddingsBodies() {
    assertThat(embeddings("[]")).isEqualTo("null");
    assertThat(embeddings("{\"data\":[{\"embedding\":[1,2]},{\"embedding\":[3]}],"))
        .isEqualTo("null");
    assertThat(
            embeddings(
                "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"embedding\":[0.1,"
                    + "[0.2]],\"index\":0},{\"embedding\":\"base64==\",\"index\":1}],"
                    + "\"usage\":{\"prompt_tokens\":7,\"total_tokens\":7,\"completion_tokens\":0}}"))
        .isEqualTo("embeddings=2 error=false prompt=7");
    assertThat(embeddings("{\"data\":[1,null],\"usage\":{\"prompt_tokens\":\"7\"}}"))
        .isEqualTo("embeddings=0 error=false prompt=-1");
    assertThat(embeddings("{\"error\":{\"message\":\"x\"},\"data\":null}"))
        .isEqualTo("embeddings=0 error=true prompt=-1");
    assertThat(embeddings("{\"error\":null,\"data\":[{}],\"usage\":{\"prompt_tokens\":1}}"))
        .isEqualTo("embeddings=1 error=false prompt=1");
  }
}
