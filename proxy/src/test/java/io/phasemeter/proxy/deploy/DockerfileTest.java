package io.phasemeter.proxy.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Dockerfile, checked without a container engine (none runs here): a linter (dockerfilelint,
 * installed by .ci/run) and the rules the README promises, read from its instructions.
 */
class DockerfileTest {
  static final Path ROOT = Path.of("..");
  private static List<String> instructions;

  /** The Dockerfile's instructions, continuation lines joined, comments dropped. */
  @BeforeAll
  static void read() throws Exception {
    instructions = new ArrayList<>();
    StringBuilder current = new StringBuilder();
    for (String line : Files.readAllLines(ROOT.resolve("Dockerfile"))) {
      String t = line.strip();
      if (current.length() == 0 && (t.isEmpty() || t.startsWith("#"))) {
        continue;
      }
      if (t.endsWith("\\")) {
        current.append(t, 0, t.length() - 1).append(' ');
      } else {
        instructions.add(current.append(t).toString());
        current.setLength(0);
      }
    }
  }

  private static List<String> all(String keyword) {
    return instructions.stream().filter(i -> i.startsWith(keyword + " ")).toList();
  }

  @Test
  void lintsClean() {
    ExternalTool.DOCKERFILELINT.require();
    ExternalTool.Result r = ExternalTool.DOCKERFILELINT.run(ROOT, "Dockerfile");
    assertThat(r.exit()).as("dockerfilelint Dockerfile:%n%s", r.output()).isZero();
  }

  @Test
  void multiStageOnPinnedBasesWithASlimJreToRun() {
    List<String> from = all("FROM");
    assertThat(from).hasSize(2);
    assertThat(from.get(0)).contains("-jdk").endsWith(" AS build");
    assertThat(from.get(1)).contains("-jre").doesNotContain(" AS ");
    // A tag that names an exact release, never latest or a bare major version.
    assertThat(from)
        .allSatisfy(f -> assertThat(f).matches("FROM [\\w./-]+:\\d+\\.\\d+\\.\\d+\\S*.*"));
    assertThat(all("COPY")).anySatisfy(c -> assertThat(c).startsWith("COPY --from=build "));
  }

  @Test
  void runsAsANonRootUserAfterTheLastRootStep() {
    List<String> user = all("USER");
    assertThat(user).isNotEmpty();
    String last = user.get(user.size() - 1);
    assertThat(last).doesNotContain("root").isNotEqualTo("USER 0").isNotEqualTo("USER 0:0");
    int lastUser = instructions.lastIndexOf(last);
    assertThat(instructions.subList(lastUser, instructions.size()))
        .noneSatisfy(i -> assertThat(i).startsWith("RUN "));
  }

  @Test
  void exposesTheDefaultPortsAndChecksHealthOnTheAdminPort() throws Exception {
    ProxyConfig defaults =
        ConfigLoader.parse(Files.readString(ROOT.resolve("config/proxy.yaml")), "proxy.yaml");
    assertThat(all("EXPOSE"))
        .containsExactly("EXPOSE " + defaults.listen().port() + " " + defaults.admin().port());
    List<String> health = all("HEALTHCHECK");
    assertThat(health).hasSize(1);
    assertThat(health.get(0))
        .contains("/health/live")
        .contains(String.valueOf(defaults.admin().port()))
        .contains("--interval=")
        .contains("--timeout=");
  }

  /** The variables the image's ENV instructions set, quotes removed. */
  private static java.util.Map<String, String> imageEnvironment() {
    java.util.Map<String, String> env = new java.util.LinkedHashMap<>();
    Matcher m =
        Pattern.compile("(\\w+)=(\"([^\"]*)\"|\\S+)").matcher(String.join("\n", all("ENV")));
    while (m.find()) {
      env.put(m.group(1), m.group(3) != null ? m.group(3) : m.group(2));
    }
    return env;
  }

  @Test
  void theImageShipsNoOpenAdminPortTheTokenComesFromDockerRun() throws Exception {
    java.util.Map<String, String> env = imageEnvironment();
    assertThat(env).containsEntry("PHASEMETER_ADMIN_HOST", "0.0.0.0");
    assertThat(env.keySet())
        .as("a token baked into the image, or an admin port opened on purpose")
        .doesNotContain("PHASEMETER_ADMIN_TOKEN", "PHASEMETER_ADMIN_ALLOW_OPEN");
    assertThat(String.join("\n", instructions)).doesNotContainIgnoringCase("ADMIN_TOKEN");
    Path shipped = ROOT.resolve("config/proxy.yaml");

    // As the image runs it (its ENV over the config it copies to /config), with no token given.
    assertThatThrownBy(() -> ConfigLoader.load(shipped, env))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining(
            "admin.host: 0.0.0.0 is reachable beyond this machine and admin.token is empty");

    // With the token given at docker run -e.
    java.util.Map<String, String> run = new java.util.HashMap<>(env);
    run.put(
        "PHASEMETER_ADMIN_TOKEN",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
    ProxyConfig cfg = ConfigLoader.load(shipped, run);
    assertThat(cfg.admin().host()).isEqualTo("0.0.0.0");
    assertThat(cfg.admin().open()).isFalse();

    // A placeholder given at docker run -e stops it as surely as none.
    run.put("PHASEMETER_ADMIN_TOKEN", "change-me");
    assertThatThrownBy(() -> ConfigLoader.load(shipped, run))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("admin.token: looks like a placeholder, and admin.host 0.0.0.0");
  }

  @Test
  void readsItsConfigFromAVolumeAndSizesTheJvmForAContainer() {
    assertThat(all("VOLUME")).containsExactly("VOLUME [\"/config\"]");
    assertThat(all("CMD")).containsExactly("CMD [\"--config\", \"/config/proxy.yaml\"]");
    assertThat(all("ENTRYPOINT")).singleElement().asString().contains("phasemeter-proxy.jar");
    String env = String.join("\n", all("ENV"));
    Matcher ram = Pattern.compile("-XX:MaxRAMPercentage=(\\d+)").matcher(env);
    assertThat(ram.find()).as("heap sized from the container's memory limit").isTrue();
    assertThat(Integer.parseInt(ram.group(1))).isBetween(50, 80);
    assertThat(env).contains("-XX:+ExitOnOutOfMemoryError").doesNotContain("-Xmx");
  }
}
