package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class PathNormalizerTest {

  @Test
  void aPlainPathIsItself() {
    String path = "/v1/chat/completions";
    assertThat(PathNormalizer.normalize(path)).isSameAs(path);
    assertThat(PathNormalizer.normalize("/")).isEqualTo("/");
  }

  @Test
  void escapesAreDecodedAsTheEnginesFrameworkWouldBeforeMatching() {
    // The deny list must see what the engine's router sees.
    assertThat(PathNormalizer.normalize("/%73leep")).isEqualTo("/sleep");
    assertThat(PathNormalizer.normalize("/v1/load%5flora%5Fadapter"))
        .isEqualTo("/v1/load_lora_adapter");
  }

  @Test
  void emptyAndDotSegmentsAndATrailingSlashGo() {
    assertThat(PathNormalizer.normalize("//sleep")).isEqualTo("/sleep");
    assertThat(PathNormalizer.normalize("/sleep/")).isEqualTo("/sleep");
    assertThat(PathNormalizer.normalize("/v1/./models/../../sleep")).isEqualTo("/sleep");
    assertThat(PathNormalizer.normalize("/../../sleep")).isEqualTo("/sleep");
    assertThat(PathNormalizer.normalize("/v1/%2e%2e/sleep")).isEqualTo("/sleep");
  }

  @Test
  void whatServersDisagreeOnIsRefused() {
    assertThat(PathNormalizer.normalize("/v1%2Fmodels")).isNull();
    assertThat(PathNormalizer.normalize("/a%00b")).isNull();
    assertThat(PathNormalizer.normalize("/a%5Cb")).isNull();
    assertThat(PathNormalizer.normalize("/a\\b")).isNull();
    assertThat(PathNormalizer.normalize("/a%zz")).isNull();
    assertThat(PathNormalizer.normalize("/a%4")).isNull();
    assertThat(PathNormalizer.normalize("/a%ff%fe")).as("not UTF-8").isNull();
    assertThat(PathNormalizer.normalize("relative")).isNull();
    assertThat(PathNormalizer.normalize("/" + "a".repeat(PathNormalizer.MAX_LENGTH))).isNull();
  }

  @Test
  void theForwardedFormEscapesWhatASegmentCannotCarry() {
    String decoded = PathNormalizer.normalize("/v1/models/caf%C3%A9%20x");
    assertThat(decoded).isEqualTo("/v1/models/café x");
    assertThat(PathNormalizer.encode(decoded)).isEqualTo("/v1/models/caf%C3%A9%20x");
    assertThat(PathNormalizer.normalize(PathNormalizer.encode(decoded))).isEqualTo(decoded);
    assertThat(PathNormalizer.encode("/tokenize")).isEqualTo("/tokenize");
  }
}
