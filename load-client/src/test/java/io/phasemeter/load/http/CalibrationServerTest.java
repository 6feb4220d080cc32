package io.phasemeter.load.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.workload.Profile;
import io.phasemeter.load.workload.Workload;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** How the client's own endpoint reads the lengths its answer's usage reports. */
class CalibrationServerTest {
  @Test
  void tokenIdsAreCountedAndFreeTextIsNot() {
    Buffer b = Buffer.buffer("{\"model\":\"m\",\"prompt\":[1, 22,333],\"max_tokens\": 8}");
    assertThat(CalibrationServer.tokenIds(b, "\"prompt\":")).isEqualTo(3);
    assertThat(CalibrationServer.number(b, "\"max_tokens\":")).isEqualTo(8);
    Buffer text = Buffer.buffer("{\"messages\":[{\"role\":\"user\"}],\"max_tokens\":5}");
    assertThat(CalibrationServer.tokenIds(text, "\"messages\":")).isEqualTo(-1);
    assertThat(CalibrationServer.tokenIds(text, "\"prompt\":")).isEqualTo(-1);
    assertThat(CalibrationServer.number(text, "\"max_output_tokens\":")).isEqualTo(-1);
    assertThat(CalibrationServer.tokenIds(Buffer.buffer("{\"input\":[]}"), "\"input\":")).isZero();
  }

  @Test
  void aBodyPastTheCapIsAnswered413AndNotKept() throws Exception {
    Vertx vertx = Vertx.vertx();
    try {
      CalibrationServer cal = CalibrationServer.start(vertx).await(10, TimeUnit.SECONDS);
      Buffer big = Buffer.buffer(new byte[CalibrationServer.MAX_BODY_BYTES + 1]);
      int status =
          vertx
              .createHttpClient()
              .request(
                  new RequestOptions()
                      .setMethod(HttpMethod.POST)
                      .setHost("127.0.0.1")
                      .setPort(cal.port())
                      .setURI("/v1/completions"))
              .compose(r -> r.send(big))
              .map(r -> r.statusCode())
              .otherwise(-1)
              .await(30, TimeUnit.SECONDS);
      // The 413 may race the rest of the upload (then the connection closes under it).
      assertThat(status).isIn(413, -1);
      assertThat(cal.requests()).isEqualTo(1);
    } finally {
      vertx.close().await(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void theOwnEndpointGetsADummyKeyOfTheSameLength() {
    Workload w =
        Workload.completions("m", Profile.custom(8, 4), true, 1)
            .withHeaders(java.util.Map.of("authorization", "Bearer sk-secret-123"));
    String sent = w.forOwnEndpoint().request(1).headers().get("authorization");
    assertThat(sent)
        .startsWith("Bearer ")
        .doesNotContain("secret")
        .hasSize("Bearer sk-secret-123".length());
    assertThat(w.request(1).body()).isEqualTo(w.forOwnEndpoint().request(1).body());
  }
}
