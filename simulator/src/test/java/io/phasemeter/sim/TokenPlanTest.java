package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class TokenPlanTest {

  @Test
  void ignoreEosGivesExactlyMaxTokens() {
    TokenPlan plan = TokenPlan.create(42, 1, 17, 0, true);
    assertThat(plan.completionTokens()).isEqualTo(17);
    assertThat(plan.contentTokens()).isEqualTo(17);
    assertThat(plan.finishReason()).isEqualTo("length");
  }

  @Test
  void eosFallsBetweenMinAndMaxAndCountsAsAToken() {
    boolean sawStop = false;
    boolean sawLength = false;
    for (long h = 0; h < 500; h++) {
      TokenPlan plan = TokenPlan.create(42, h, 10, 4, false);
      assertThat(plan.contentTokens()).isBetween(4, 10);
      if (plan.finishReason().equals("stop")) {
        sawStop = true;
        assertThat(plan.completionTokens()).isEqualTo(plan.contentTokens() + 1);
        assertThat(plan.text(plan.contentTokens())).isEmpty();
      } else {
        sawLength = true;
        assertThat(plan.contentTokens()).isEqualTo(10);
        assertThat(plan.completionTokens()).isEqualTo(10);
      }
    }
    assertThat(sawStop).isTrue();
    assertThat(sawLength).isTrue();
  }

  @Test
  void minTokensEqualToMaxTokensReachesLength() {
    TokenPlan plan = TokenPlan.create(1, 2, 5, 5, false);
    assertThat(plan.finishReason()).isEqualTo("length");
    assertThat(plan.completionTokens()).isEqualTo(5);
  }

  @Test
  void textIsDeterministicAndOneWordPerToken() {
    TokenPlan a = TokenPlan.create(42, 9, 30, 0, true);
    TokenPlan b = TokenPlan.create(42, 9, 30, 0, true);
    assertThat(a.fullText()).isEqualTo(b.fullText());
    assertThat(a.fullText().split(" ")).hasSize(30);
    assertThat(a.text(0)).doesNotStartWith(" ");
    assertThat(a.text(1)).startsWith(" ");
    assertThat(TokenPlan.create(43, 9, 30, 0, true).fullText()).isNotEqualTo(a.fullText());
  }
}
