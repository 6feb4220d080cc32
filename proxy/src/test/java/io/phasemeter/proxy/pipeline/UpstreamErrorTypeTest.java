package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The error type of an upstream's 4xx passed through: named by status, one string per status. */
class UpstreamErrorTypeTest {
  @Test
  void everyClientErrorStatusHasOneSharedName() {
    assertThat(GeneratePhase.upstreamErrorType(400)).isEqualTo("upstream_400");
    assertThat(GeneratePhase.upstreamErrorType(499)).isEqualTo("upstream_499");
    // Kept by reference in the record store: the same string each time, not a new one.
    assertThat(GeneratePhase.upstreamErrorType(404)).isSameAs(GeneratePhase.upstreamErrorType(404));
  }

  @Test
  void aStatusOutsideTheClientErrorsIsStillNamed() {
    assertThat(GeneratePhase.upstreamErrorType(302)).isEqualTo("upstream_302");
    assertThat(GeneratePhase.upstreamErrorType(99)).isEqualTo("upstream_99");
  }
}
