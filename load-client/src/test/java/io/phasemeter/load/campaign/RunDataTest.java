package io.phasemeter.load.campaign;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A run's campaign metrics read from its summary.json. */
class RunDataTest {
  private static RunData data(String goodput) throws Exception {
    return new RunData(new ObjectMapper().readTree("{\"goodput\":" + goodput + "}"), List.of());
  }

  @Test
  void serverAttainmentIsTheProxysOwnAndAShareLikeAttainment() throws Exception {
    RunData judged =
        data("{\"attainment\":0.9,\"server\":{\"judged\":40,\"met\":38,\"attainment\":0.95}}");
    assertThat(judged.metrics()).containsEntry("attainment", 0.9);
    assertThat(judged.metrics()).containsEntry(RunData.SERVER_ATTAINMENT, 0.95);
    // No record carried the proxy's verdict (an older proxy, no objectives there): no figure.
    assertThat(data("{\"attainment\":0.9}").metrics().get(RunData.SERVER_ATTAINMENT)).isNaN();
    assertThat(RunData.GOODPUT).contains(RunData.SERVER_ATTAINMENT);
    assertThat(CampaignReport.bounds(RunData.SERVER_ATTAINMENT)).containsExactly(0, 1);
  }
}
