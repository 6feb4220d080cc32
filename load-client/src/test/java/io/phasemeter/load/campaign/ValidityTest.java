package io.phasemeter.load.campaign;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import org.junit.jupiter.api.Test;

class ValidityTest {
  private static RunData data(long sent, long dropped, RunData.Request... requests)
      throws Exception {
    return new RunData(
        new ObjectMapper()
            .readTree("{\"requests\":{\"sent\":" + sent + ",\"dropped\":" + dropped + "}}"),
        List.of(requests));
  }

  private static RunData.Request ok() {
    return new RunData.Request("NONE", null, 10);
  }

  @Test
  void aCleanRunIsValid() throws Exception {
    assertThat(Validity.reasons(0, data(2, 0, ok(), ok()), null)).isEmpty();
  }

  @Test
  void eachRuleGivesItsOwnReason() throws Exception {
    List<String> r =
        Validity.reasons(
            4,
            data(
                5,
                3,
                ok(),
                new RunData.Request("HTTP_5XX", null, Double.NaN),
                new RunData.Request("INVALID", "completion_tokens 7 != max_tokens 8", 10),
                new RunData.Request("INVALID", "prompt_tokens 120 != prompt tokens sent 100", 10),
                new RunData.Request(
                    "INVALID", "prompt_tokens 1005 != prompt tokens sent 1000", 10)),
            null);
    assertThat(r)
        .containsExactly(
            "3 iterations dropped: the offered load was not generated",
            "1 of 5 requests failed {HTTP_5XX=1}",
            "1 of 5 outputs differ from the length asked for (completion_tokens 7 != max_tokens 8)",
            "1 of 5 inputs differ by more than 1 % (prompt_tokens 120 != prompt tokens sent 100)");
  }

  @Test
  void atMostFiveInvalidReasonsAreNamedTheRestCounted() throws Exception {
    List<RunData.Request> requests = new java.util.ArrayList<>();
    requests.add(ok());
    for (int i = 1; i <= 8; i++) {
      requests.add(new RunData.Request("INVALID", "engine " + i, 10));
    }
    // Seen again after five were named: still counted under its own name; a sixth is not named.
    requests.add(new RunData.Request("INVALID", "engine 1", 10));
    requests.add(new RunData.Request("INVALID", "engine 7", 10));
    List<String> r =
        Validity.reasons(0, data(11, 0, requests.toArray(RunData.Request[]::new)), null);
    assertThat(Validity.INVALID_REASONS_NAMED).isEqualTo(5);
    assertThat(r)
        .containsExactly(
            "10 of 11 requests failed {INVALID (engine 1)=2, INVALID (engine 2)=1, INVALID (engine"
                + " 3)=1, INVALID (engine 4)=1, INVALID (engine 5)=1, INVALID (other reasons)=4}");
  }

  @Test
  void aClientThatErredOrWroteNothingIsInvalid() throws Exception {
    assertThat(Validity.reasons(2, data(1, 0, ok()), null))
        .containsExactly("the client errored: exit 2");
    assertThat(Validity.reasons(4, null, "exit 4, no report written (refused)"))
        .containsExactly("the client errored: exit 4, no report written (refused)");
    assertThat(Validity.reasons(0, data(0, 0), null)).containsExactly("no request was sent");
  }
}
