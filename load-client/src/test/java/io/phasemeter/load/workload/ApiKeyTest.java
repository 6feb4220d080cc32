package io.phasemeter.load.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@link ApiKey}: the key goes into one header and is printed nowhere. */
class ApiKeyTest {
  private static final String KEY = "sk-test-0123456789";

  @Test
  void theKeyIsABearerHeaderAndItsTextNamesOnlyTheVariable() {
    ApiKey k = ApiKey.fromEnv("--api-key-env", "MY_KEY", Map.of("MY_KEY", KEY));
    assertThat(k.headers()).isEqualTo(Map.of("authorization", "Bearer " + KEY));
    assertThat(k.envName()).isEqualTo("MY_KEY");
    assertThat(k.toString()).isEqualTo("ApiKey[env=MY_KEY]");
  }

  @Test
  void everyRequestOfTheWorkloadCarriesItAndNoRequestPrintsIt() {
    ApiKey k = ApiKey.fromEnv("--api-key-env", "MY_KEY", Map.of("MY_KEY", KEY));
    for (Workload w :
        new Workload[] {
          Workload.completions("m", Profile.custom(8, 2), true, 1),
          Workload.chat("m", 4, true, 1),
          Workload.responses("m", 4, false, 1),
          Workload.embeddings("m", 8, 1)
        }) {
      RequestSpec r = w.withHeaders(k.headers()).request(3);
      assertThat(r.headers()).containsEntry("authorization", "Bearer " + KEY);
      assertThat(r.toString()).contains("authorization").doesNotContain(KEY);
      assertThat(w.request(3).headers()).as("the workload itself is unchanged").isEmpty();
    }
  }

  @Test
  void anUnsetEmptyOrMisnamedVariableIsRefusedWithoutTheKey() {
    assertThatThrownBy(() -> ApiKey.fromEnv("--api-key-env", "MY_KEY", Map.of()))
        .hasMessage("--api-key-env: environment variable MY_KEY is not set");
    assertThatThrownBy(() -> ApiKey.fromEnv("--api-key-env", "MY_KEY", Map.of("MY_KEY", "")))
        .hasMessage("--api-key-env: environment variable MY_KEY is empty");
    assertThatThrownBy(() -> ApiKey.fromEnv("--api-key-env", KEY, Map.of("MY_KEY", KEY)))
        .hasMessageStartingWith("--api-key-env takes the name of an environment variable")
        .hasMessageNotContaining(KEY);
    assertThatThrownBy(
            () -> ApiKey.fromEnv("--api-key-env", "MY_KEY", Map.of("MY_KEY", KEY + "\r\n")))
        .hasMessageContaining("MY_KEY holds a space, control or non-ASCII character")
        .hasMessageNotContaining(KEY);
  }
}
