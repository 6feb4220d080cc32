package io.phasemeter.proxy.budget;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.core.Phases;
import io.phasemeter.proxy.pipeline.Phase;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The budget keys and the pipeline's phases are the catalogue's, nothing more or less. */
class BudgetPhaseTest {

  @Test
  void everyCatalogueEntryButTheGatewaysPartsIsABudgetKey() {
    for (Phases p : Phases.values()) {
      boolean gatewayPart = p == Phases.AUTH || p == Phases.PREPARE || p == Phases.ROUTE;
      assertThat(BudgetPhase.fromKey(p.key()).isPresent()).as(p.key()).isEqualTo(!gatewayPart);
    }
    assertThat(BudgetPhase.values()).hasSize(Phases.values().length - 3);
    for (BudgetPhase b : BudgetPhase.values()) {
      assertThat(b.name()).isEqualTo(b.entry().name());
    }
  }

  @Test
  void thePipelineHasEveryPipelinePhaseOfTheCatalogue() {
    assertThat(Arrays.stream(Phase.all()).map(Phase::entry))
        .containsExactlyInAnyOrderElementsOf(
            Arrays.stream(Phases.values())
                .filter(p -> p.source() == Phases.Source.PIPELINE)
                .toList());
  }

  @Test
  void ownersComeFromTheCatalogue() {
    assertThat(BudgetPhase.QUEUE.owner()).isEqualTo("inference-pool capacity");
    assertThat(BudgetPhase.RECEIVE.owner()).isEqualTo("network (client upload)");
    assertThat(BudgetPhase.ENGINE_QUEUE.owner())
        .isEqualTo("model server capacity (its own scheduler queue)");
  }
}
