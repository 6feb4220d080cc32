package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.phasemeter.core.Durations;
import io.phasemeter.load.report.Goodput;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import picocli.CommandLine.ParseResult;

/**
 * The load client's Jobs in config/kubernetes/ as the container would run them: their arguments,
 * with Kubernetes' {@code $(VAR)} references replaced by sample values, parsed by the real {@code
 * phasemeter load} command line (nothing executed), then turned into the run's options, so that a
 * renamed or removed flag, or a value the client refuses, fails the build rather than the Job.
 * (KubernetesManifestsTest, in the proxy module, checks the manifests' Kubernetes side.)
 */
class KubernetesJobArgsTest {
  private static final Path DIR = Path.of("../config/kubernetes");
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());
  private static final Pattern VAR = Pattern.compile("\\$\\(([A-Za-z_][A-Za-z0-9_]*)\\)");

  /** What the container's environment would give each variable the arguments refer to. */
  private static final Map<String, String> SAMPLES =
      Map.of("ADMIN_TOKEN", "0123456789abcdef".repeat(4), "JOB_COMPLETION_INDEX", "2");

  /** The container's command and arguments, every {@code $(VAR)} replaced by its sample. */
  private static List<String> commandLine(String file) throws Exception {
    JsonNode c =
        YAML.readTree(Files.readString(DIR.resolve(file)))
            .path("spec")
            .path("template")
            .path("spec")
            .path("containers")
            .get(0);
    List<String> line = new ArrayList<>();
    for (JsonNode a : c.path("command")) {
      line.add(a.asText());
    }
    for (JsonNode a : c.path("args")) {
      Matcher m = VAR.matcher(a.asText());
      StringBuilder sb = new StringBuilder();
      while (m.find()) {
        assertThat(SAMPLES)
            .as("a sample value for $(%s) in %s", m.group(1), file)
            .containsKey(m.group(1));
        m.appendReplacement(sb, Matcher.quoteReplacement(SAMPLES.get(m.group(1))));
      }
      m.appendTail(sb);
      line.add(sb.toString());
    }
    return line;
  }

  /**
   * Parses the arguments after {@code java -jar /app/phasemeter-load.jar} with the real command.
   */
  private static ParseResult parse(List<String> line) {
    assertThat(line.subList(0, 3)).containsExactly("java", "-jar", "/app/phasemeter-load.jar");
    CommandLine cl =
        LoadMain.commandLine(
            new PrintWriter(new StringWriter(), true), new PrintWriter(new StringWriter(), true));
    // Throws on an unknown option, a missing value or a value of the wrong type.
    return cl.parseArgs(line.subList(3, line.size()).toArray(String[]::new));
  }

  @Test
  void theCapacitySearchJobsArgumentsAreASearchTheClientAccepts() throws Exception {
    ParseResult parsed = parse(commandLine("search/capacity-search-job.yaml"));
    assertThat(parsed.subcommand()).isNotNull();
    assertThat(parsed.subcommand().commandSpec().name()).isEqualTo("search");
    SearchCommand search = (SearchCommand) parsed.subcommand().commandSpec().userObject();
    if (search.duration == null) {
      search.duration = SearchCommand.DEFAULT_PROBE; // as the search fills it in before a probe
    }
    LoadOptions o = search.options();
    assertThat(o.admin()).as("joined: the limiting phase needs --admin").isNotNull();
    assertThat(o.adminToken()).isEqualTo(SAMPLES.get("ADMIN_TOKEN"));
    assertThat(o.budgets()).isEqualTo(Path.of("/config/budgets.yaml"));
    assertThat(o.out().toString()).startsWith("/results/");
    // The objectives are ones a joined, streamed run can judge (what the search checks at start).
    assertThat(search.objectivesGiven()).isTrue();
    Goodput.of(o.slo(), io.phasemeter.load.budget.ClientBudgets.none(), o.model())
        .check(o.api(), o.stream(), true, o.joinSampledOnly());
    // The search's own values, as it parses them.
    assertThat(search.maxRate).isPositive().isGreaterThanOrEqualTo(o.rate());
    assertThat(Durations.parsePositive("--max-duration", search.maxDuration)).isPositive();
    assertThat(LoadMain.share("--resolution", search.resolution)).isBetween(0.0, 1.0);
    assertThat(LoadMain.share("--min-attainment", search.minAttainment)).isBetween(0.0, 1.0);
  }

  @Test
  void theLoadJobsArgumentsAreARunTheClientAccepts() throws Exception {
    ParseResult parsed = parse(commandLine("load-job.yaml"));
    assertThat(parsed.subcommand().commandSpec().name()).isEqualTo("run");
    LoadOptions o = ((LoadMain.Run) parsed.subcommand().commandSpec().userObject()).options();
    assertThat(o.admin()).isNotNull();
    // The join spans the fleet: every pod's admin, from the headless admin-service.yaml.
    assertThat(o.admin().discoverHost()).isEqualTo("phasemeter-admin");
    assertThat(o.admin().discoverPort()).isEqualTo(9464);
    assertThat(o.out()).isEqualTo(Path.of("/results/" + SAMPLES.get("JOB_COMPLETION_INDEX")));
  }

  @Test
  void aRenamedFlagFailsTheParse() throws Exception {
    List<String> line = new ArrayList<>(commandLine("search/capacity-search-job.yaml"));
    line.set(line.indexOf("--max-rate"), "--max-load");
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> parse(line))
        .isInstanceOf(CommandLine.ParameterException.class)
        .hasMessageContaining("--max-load");
  }
}
