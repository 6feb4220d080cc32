package io.phasemeter.load.campaign;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.load.workload.Api;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class PlanTest {

  @Test
  void theShippedSamplePlanParses() throws Exception {
    Plan p = Plan.load(Path.of("..", "config", "campaign.yaml"));
    assertThat(p.repeats()).isEqualTo(3);
    assertThat(p.concurrency()).containsExactly(1, 2, 4, 8, 12, 16, 24, 32);
    assertThat(p.rates()).containsExactly(0.15, 0.3, 0.45);
    assertThat(p.points()).hasSize(2 * (8 + 3));
    assertThat(p.points().get(0).id()).isEqualTo("doc-qa/c1");
    assertThat(p.points().get(8).id()).isEqualTo("doc-qa/r0.15");
    assertThat(p.warmupDuration()).isEqualTo(Duration.ofSeconds(30));
    assertThat(p.connectionReuse()).isTrue();
  }

  @Test
  void connectionReuseIsOnOrOff() {
    String base = "model: m\nduration: 1s\nprofiles: [doc-qa]\nconcurrency: [1]\n";
    assertThat(Plan.parse(base, "a.yaml").connectionReuse()).isTrue();
    assertThat(Plan.parse(base + "connection_reuse: off\n", "a.yaml").connectionReuse()).isFalse();
    assertThat(Plan.parse(base + "connection_reuse: \"on\"\n", "a.yaml").connectionReuse())
        .isTrue();
    assertThatThrownBy(() -> Plan.parse(base + "connection_reuse: sometimes\n", "a.yaml"))
        .hasMessage("a.yaml: key 'connection_reuse' must be on or off, got 'sometimes'");
  }

  @Test
  void errorsNameTheFileAndTheKey() {
    String base = "model: m\nduration: 1s\nprofiles: [doc-qa]\nconcurrency: [1]\n";
    assertThatThrownBy(() -> Plan.parse(base + "repeats: 2\n", "plans/a.yaml"))
        .hasMessage("plans/a.yaml: key 'repeats' must be at least 3, got 2");
    assertThatThrownBy(() -> Plan.parse(base + "repets: 3\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'repets' is not a plan key");
    assertThatThrownBy(
            () -> Plan.parse("model: m\nduration: 1s\nprofiles: [huge]\nrates: [1]\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'profiles' holds 'huge'");
    assertThatThrownBy(
            () ->
                Plan.parse("model: m\nduration: soon\nprofiles: [doc-qa]\nrates: [1]\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'duration' must be a duration");
    assertThatThrownBy(() -> Plan.parse("model: m\nduration: 1s\nprofiles: [doc-qa]\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'concurrency' give concurrency levels, rates");
    assertThatThrownBy(() -> Plan.parse(base + "rates: [0]\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'rates' every rate must be a positive number");
  }

  @Test
  void apiIsCompletionsUnlessTheCampaignSaysOtherwise() {
    String base = "model: m\nduration: 1s\nprofiles: [doc-qa]\nconcurrency: [1]\n";
    Plan plain = Plan.parse(base, "a.yaml");
    assertThat(plain.api()).isEqualTo(Api.COMPLETIONS);
    assertThat(plain.stream()).isTrue();
    Plan responses = Plan.parse(base + "api: responses\nstream: false\n", "a.yaml");
    assertThat(responses.api()).isEqualTo(Api.RESPONSES);
    assertThat(responses.stream()).isFalse();
    assertThat(Plan.parse(base + "api: chat\n", "a.yaml").stream()).isTrue();
    // Embeddings never stream: off by default, refused when asked for.
    Plan embeddings = Plan.parse(base + "api: embeddings\n", "a.yaml");
    assertThat(embeddings.api()).isEqualTo(Api.EMBEDDINGS);
    assertThat(embeddings.stream()).isFalse();
    assertThatThrownBy(() -> Plan.parse(base + "api: embeddings\nstream: true\n", "a.yaml"))
        .hasMessage("a.yaml: key 'stream' cannot be true with api: embeddings (never streamed)");
    assertThatThrownBy(() -> Plan.parse(base + "api: response\n", "plans/a.yaml"))
        .hasMessage(
            "plans/a.yaml: key 'api' must be one of chat, completions, responses, embeddings,"
                + " got 'response'");
    assertThatThrownBy(() -> Plan.parse(base + "api: [chat]\n", "a.yaml"))
        .hasMessage("a.yaml: key 'api' must be a single value");
  }

  @Test
  void apiKeyEnvNamesAVariableAndNeverHoldsTheKey() {
    String base = "model: m\nduration: 1s\nprofiles: [doc-qa]\nconcurrency: [1]\n";
    assertThat(Plan.parse(base, "a.yaml").apiKeyEnv()).isNull();
    assertThat(Plan.parse(base + "api_key_env: OPENAI_API_KEY\n", "a.yaml").apiKeyEnv())
        .isEqualTo("OPENAI_API_KEY");
    assertThatThrownBy(() -> Plan.parse(base + "api_key_env: sk-abc-123\n", "a.yaml"))
        .hasMessageStartingWith("a.yaml: key 'api_key_env' must name an environment variable")
        .hasMessageNotContaining("sk-abc-123");
  }
}
