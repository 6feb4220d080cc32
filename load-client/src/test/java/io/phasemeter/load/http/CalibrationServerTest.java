package io.phasemeter.load.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.buffer.Buffer;
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
}
