package io.phasemeter.load.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.Test;

class ProfileMixTest {
  @Test
  void namedProfilesHaveTheirShapes() {
    assertThat(Profile.named("single-1k")).isEqualTo(new Profile("single-1k", 1024, 512));
    assertThat(Profile.named("single-8k")).isEqualTo(new Profile("single-8k", 8192, 512));
    assertThat(Profile.named("single-32k")).isEqualTo(new Profile("single-32k", 32768, 512));
    assertThat(Profile.named("DOC-QA")).isEqualTo(new Profile("doc-qa", 4096, 300));
  }

  @Test
  void unknownProfileListsTheNames() {
    assertThatThrownBy(() -> Profile.named("huge"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("--profile")
        .hasMessageContaining("single-1k, single-8k, single-32k, doc-qa")
        .hasMessageContaining("'huge'");
  }

  @Test
  void customProfileIsNamedByItsBucket() {
    assertThat(Profile.custom(4096, 300)).isEqualTo(new Profile("4k-300", 4096, 300));
    assertThat(Profile.custom(1000, 64).name()).isEqualTo("1000-64");
    assertThatThrownBy(() -> Profile.custom(0, 10)).hasMessageContaining("--input-tokens");
    assertThatThrownBy(() -> Profile.custom(10, 0)).hasMessageContaining("--output-tokens");
  }

  @Test
  void mixParsesShapesWeightsAndBuckets() {
    Mix mix = Mix.parse("1k:512=0.7, 4k:300=0.3");
    assertThat(mix.entries())
        .containsExactly(
            new Mix.Entry(1024, 512, 0.7, "1k-512"), new Mix.Entry(4096, 300, 0.3, "4k-300"));
  }

  @Test
  void mixWeightsAreNormalisedAndPickFollowsThem() {
    Mix mix = Mix.parse("100:10=1,2k:1k=3");
    assertThat(mix.entries().get(0).weight()).isCloseTo(0.25, within(1e-12));
    assertThat(mix.entries().get(1).bucket()).isEqualTo("2k-1k");
    assertThat(mix.pick(0.0).bucket()).isEqualTo("100-10");
    assertThat(mix.pick(0.2499).bucket()).isEqualTo("100-10");
    assertThat(mix.pick(0.25).bucket()).isEqualTo("2k-1k");
    assertThat(mix.pick(0.9999999).bucket()).isEqualTo("2k-1k");
  }

  @Test
  void badMixNamesTheFlagAndTheEntry() {
    assertThatThrownBy(() -> Mix.parse("1k:512"))
        .hasMessageContaining("--mix")
        .hasMessageContaining("1k:512");
    assertThatThrownBy(() -> Mix.parse("1k:512=0")).hasMessageContaining("--mix");
    assertThatThrownBy(() -> Mix.parse("0:512=1")).hasMessageContaining("--mix");
    assertThatThrownBy(() -> Mix.parse("")).hasMessageContaining("--mix");
    assertThatThrownBy(() -> Mix.parse("1k:512=1,")).hasMessageContaining("--mix");
    assertThatThrownBy(() -> Mix.parse("9999999k:1=1")).hasMessageContaining("too large");
  }
}
