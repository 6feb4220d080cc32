package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ProxyMainTest {

  @TempDir Path dir;

  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  private int run(String... args) {
    return ProxyMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(args);
  }

  private Path write(String yaml) throws IOException {
    Path file = dir.resolve("proxy.yaml");
    Files.writeString(file, yaml);
    return file;
  }

  private String errLine() {
    assertThat(err.toString().lines()).hasSize(1);
    return err.toString().strip();
  }

  @Test
  void helpNamesTheConfigFileAndTheEnvironmentOverrides() {
    assertThat(run("--help")).isZero();

    assertThat(out.toString()).contains("--config", "--check", "PHASEMETER_", "OTEL_");
    assertThat(err.toString()).isEmpty();
  }

  @Test
  void version() {
    assertThat(run("--version")).isZero();

    assertThat(out.toString()).startsWith("phasemeter-proxy ");
  }

  @Test
  void checkPrintsThePools() throws IOException {
    Path file =
        write(
            """
            pools:
              - name: llama
                models: [llama-8b]
                upstreams: [http://gpu1:8000, http://gpu2:8000]
                slots: 16
                queue: {max: 50}
              - name: small
                models: [tiny]
                upstreams: [http://cpu:8001]
                connections: {reuse: off, preconnect: 1}
            """);

    assertThat(run("--check", "--config", file.toString())).isZero();

    assertThat(out.toString().lines())
        .containsExactly(
            "pool llama: models [llama-8b] -> http://gpu1:8000 [8 slots], http://gpu2:8000"
                + " [8 slots] (16 slots, queue 50; health /health every 5s)",
            "  upstream connections: reuse: auto (kept alive and reused; once an upstream is seen"
                + " closing them after its responses, one request each, 2 spares opened ahead of"
                + " demand)",
            "pool small: models [tiny] -> http://cpu:8001 (64 slots, queue 1000; health /health"
                + " every 5s)",
            "  upstream connections: reuse: off (one request each, Connection: close; 1 spare"
                + " opened ahead of demand)",
            "transport: auto",
            "admin: 127.0.0.1:9464, loopback only, no token",
            "budgets: none",
            "routes: 0 from the config, then the built-in table (chat, completions, responses,"
                + " embeddings and pooling measured; vLLM's admin endpoints denied; every other"
                + " path passed through)");
    assertThat(err.toString()).isEmpty();
  }

  @Test
  void checkPrintsTheConfiguredRoutes() throws IOException {
    Path file =
        write(
            """
            pools:
              - {name: default, models: [m], upstreams: ['http://gpu1:8000']}
              - {name: whisper, models: [w], upstreams: ['http://gpu2:8000']}
            routes:
              - {path: /v1/audio/**, handler: passthrough, pool: whisper}
              - {path: /tokenize, handler: deny}
            """);

    assertThat(run("--check", "--config", file.toString())).isZero();

    assertThat(out.toString())
        .contains("route /v1/audio/** -> passthrough (pool whisper)\n")
        .contains("route /tokenize -> deny\n")
        .contains("routes: 2 from the config");
  }

  @Test
  void budgetsAreFoundNextToTheConfigAndBadOnesStopStartUp() throws Exception {
    Path config = dir.resolve("config");
    Files.createDirectories(config);
    Files.writeString(
        config.resolve("budgets.yaml"),
        "budgets:\n  - name: b\n    quantile: 0.9\n    window: 1m\n"
            + "    limits_ms: {queue: 100}\n    max_error_rate: 0.1\n    min_join_coverage: 0.9\n");
    Path proxyYaml = config.resolve("proxy.yaml");
    Files.writeString(proxyYaml, "budgets: config/budgets.yaml\n");
    assertThat(run("--check", "--config", proxyYaml.toString())).isZero();
    assertThat(out.toString()).contains("budgets: 1 from config/budgets.yaml");

    Files.writeString(proxyYaml, "budgets: config/missing.yaml\n");
    assertThat(run("--check", "--config", proxyYaml.toString())).isEqualTo(2);
    assertThat(err.toString().trim())
        .startsWith("phasemeter proxy: ")
        .contains("missing.yaml")
        .doesNotContain("\n");
  }

  @Test
  void budgetsWithGoodputObjectivesStartAndABadOneStopsStartUp() throws Exception {
    Path config = dir.resolve("config");
    Files.createDirectories(config);
    String budget =
        "budgets:\n  - name: b\n    quantile: 0.9\n    window: 1m\n"
            + "    limits_ms: {queue: 100}\n    max_error_rate: 0.1\n    min_join_coverage: 0.9\n";
    Files.writeString(
        config.resolve("budgets.yaml"),
        budget + "    slo_ms: {client_ttft: 500, tpot: 50, client_total: 10000, queue: 250}\n");
    Path proxyYaml = config.resolve("proxy.yaml");
    Files.writeString(proxyYaml, "budgets: config/budgets.yaml\n");
    assertThat(run("--check", "--config", proxyYaml.toString())).as(err.toString()).isZero();
    assertThat(out.toString()).contains("budgets: 1 from config/budgets.yaml");

    Files.writeString(config.resolve("budgets.yaml"), budget + "    slo_ms: {ttft: 500}\n");
    assertThat(run("--check", "--config", proxyYaml.toString())).isEqualTo(2);
    assertThat(err.toString().trim())
        .startsWith("phasemeter proxy: ")
        .contains(
            "budgets[0] (b).slo_ms.ttft: ambiguous: in limits_ms 'ttft' means the server's"
                + " figure; write client_ttft (the client's) or server_ttft (the proxy's)")
        .doesNotContain("\n");
  }

  @Test
  void checkSaysHowAnEngineLoadPoolRoutes() throws IOException {
    Path file =
        write(
            """
            pools:
              - name: llama
                models: [llama-8b]
                upstreams: [http://gpu1:8000, http://gpu2:8000]
                routing: engine_load
            """);

    assertThat(run("--check", "--config", file.toString())).isZero();

    assertThat(out.toString().lines())
        .contains(
            "  routing: engine_load (each upstream's /metrics every 250ms, timeout 250ms;"
                + " least_loaded for an upstream without a fresh scrape)");
  }

  @Test
  void anUnknownRoutingStopsStartUpWithOneLineNamingTheKey() throws IOException {
    Path file =
        write("pools: [{name: a, models: [m], upstreams: ['http://h'], routing: fastest}]\n");

    assertThat(run("--check", "--config", file.toString())).isEqualTo(2);

    assertThat(errLine())
        .isEqualTo(
            "phasemeter proxy: "
                + file
                + ": pools[0].routing: must be least_loaded or engine_load (got fastest)");
  }

  @Test
  void upstreamSlotsThatContradictThePoolStopStartUpWithOneLineAndExitCodeTwo() throws IOException {
    Path file =
        write(
            """
            pools:
              - name: llama
                models: [llama-8b]
                upstreams: [{url: http://gpu1:8000, slots: 4}, {url: http://gpu2:8000, slots: 4}]
                slots: 16
            """);

    assertThat(run("--check", "--config", file.toString())).isEqualTo(2);

    assertThat(errLine())
        .startsWith("phasemeter proxy: ")
        .contains("pools[0]: slots: pool 'llama' has 16 but its upstreams' own slots add up to 8");
  }

  @Test
  void anOpenAdminPortStopsStartUpWithOneLineAndExitCodeTwo() throws IOException {
    Path file = write("admin: {host: 0.0.0.0, port: 9464}\n");

    assertThat(run("--check", "--config", file.toString())).isEqualTo(2);

    assertThat(errLine())
        .isEqualTo(
            "phasemeter proxy: "
                + file
                + ": admin.host: 0.0.0.0 is reachable beyond this machine and admin.token is empty;"
                + " set admin.token (PHASEMETER_ADMIN_TOKEN) or admin.allow_open: true");
    assertThat(out.toString()).isEmpty();
  }

  @Test
  void aPlaceholderAdminTokenStopsStartUpWithOneLineThatDoesNotPrintIt() throws IOException {
    // config/kubernetes/secret.yaml shipped this one, and the proxy started with it on 0.0.0.0.
    Path file = write("admin: {host: 0.0.0.0, port: 9464, token: change-me}\n");

    assertThat(run("--check", "--config", file.toString())).isEqualTo(2);

    assertThat(errLine())
        .isEqualTo(
            "phasemeter proxy: "
                + file
                + ": admin.token: looks like a placeholder, and admin.host 0.0.0.0 is reachable"
                + " beyond this machine; set a random token of at least 16 characters (e.g."
                + " openssl rand -hex 32) in admin.token or PHASEMETER_ADMIN_TOKEN");
    assertThat(out.toString()).isEmpty();
  }

  @Test
  void aOneCharacterAdminTokenFromTheEnvironmentStopsTheProxyWithExitCodeTwo() throws Exception {
    // As the Deployment runs it: the token in PHASEMETER_ADMIN_TOKEN, the host 0.0.0.0, no --check.
    Path yaml = dir.resolve("proxy.yaml");
    Files.writeString(
        yaml, "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 0.0.0.0, port: 0}\n");
    ProcessBuilder pb =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp",
                System.getProperty("java.class.path"),
                "io.phasemeter.proxy.ProxyMain",
                "--config",
                yaml.toString())
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("token.out").toFile());
    pb.environment().put("PHASEMETER_ADMIN_TOKEN", "Q");
    Process p = pb.start();
    // Bounded: were the token ever accepted, the proxy would run on.
    boolean exited = p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS);
    if (!exited) {
      p.destroyForcibly();
    }
    String output = Files.readString(dir.resolve("token.out"));
    assertThat(exited).as(output).isTrue();
    assertThat(p.exitValue()).as(output).isEqualTo(2);
    assertThat(output.strip())
        .isEqualTo(
            "phasemeter proxy: "
                + yaml
                + ": admin.token: shorter than 16 characters, and admin.host 0.0.0.0 is reachable"
                + " beyond this machine; set a random token of at least 16 characters (e.g."
                + " openssl rand -hex 32) in admin.token or PHASEMETER_ADMIN_TOKEN");
    assertThat(output).doesNotContain("Q");
  }

  @Test
  void anAdminPortAllowedOpenStartsWithAWarning() throws IOException {
    Path file = write("admin: {host: 0.0.0.0, port: 9464, allow_open: true}\n");

    assertThat(run("--check", "--config", file.toString())).isZero();

    assertThat(out.toString().lines())
        .contains(
            "admin: 0.0.0.0:9464, OPEN: no token (admin.allow_open: true)",
            "WARNING: admin listener on 0.0.0.0 has no token and admin.allow_open is true: anyone"
                + " who reaches it may read records, stats and metrics and post engine spans to"
                + " /v1/traces; set admin.token (PHASEMETER_ADMIN_TOKEN) to guard it");
    assertThat(err.toString()).isEmpty();
  }

  @Test
  void anAdminPortWithATokenSaysItIsGuarded() throws IOException {
    Path file = write("admin: {host: 0.0.0.0, port: 9464, token: pm-admin-do-not-print}\n");

    assertThat(run("--check", "--config", file.toString())).isZero();

    assertThat(out.toString().lines()).contains("admin: 0.0.0.0:9464, bearer token required");
    assertThat(out.toString()).doesNotContain("WARNING", "do-not-print");
  }

  @Test
  void aBadOtelProtocolVariableIsOneLineAndExitCodeTwo() throws Exception {
    // The variable is read from the process environment: a JVM of its own.
    Path yaml = dir.resolve("proxy.yaml");
    Files.writeString(
        yaml, "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n");
    ProcessBuilder pb =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp",
                System.getProperty("java.class.path"),
                "io.phasemeter.proxy.ProxyMain",
                "--config",
                yaml.toString())
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("otel.out").toFile());
    pb.environment().put("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon");
    Process p = pb.start();
    // Bounded: were the variable ever accepted, the proxy would run on.
    boolean exited = p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS);
    if (!exited) {
      p.destroyForcibly();
    }
    String output = Files.readString(dir.resolve("otel.out"));
    assertThat(exited).as(output).isTrue();
    assertThat(p.exitValue()).as(output).isEqualTo(2);
    assertThat(output.strip())
        .isEqualTo(
            "phasemeter proxy: OTEL_EXPORTER_OTLP_PROTOCOL: 'carrier-pigeon' is not supported"
                + " (use http/protobuf or grpc)");
  }

  @Test
  void badConfigIsOneLineAndExitCodeTwo() throws IOException {
    Path file = write("pools: [{name: a, models: [m], upstreams: ['http://h'], slots: 0}]\n");

    assertThat(run("--check", "-c", file.toString())).isEqualTo(2);

    assertThat(errLine()).startsWith("phasemeter proxy: " + file + ": ").contains("slots");
    assertThat(out.toString()).isEmpty();
  }

  @Test
  void unknownKeyIsOneLine() throws IOException {
    Path file = write("listen: {prot: 1}\n");

    assertThat(run("--check", "--config", file.toString())).isEqualTo(2);

    assertThat(errLine()).startsWith("phasemeter proxy: " + file + ": ").contains("prot");
  }

  @Test
  void invalidYamlIsOneLine() throws IOException {
    Path file = write("listen: {port: 1\nadmin: [\n");

    assertThat(run("--check", "--config", file.toString())).isEqualTo(2);

    assertThat(errLine()).startsWith("phasemeter proxy: " + file + ": not valid YAML");
  }

  @Test
  void missingExplicitFileIsAnError() {
    Path missing = dir.resolve("nope.yaml");

    assertThat(run("--check", "--config", missing.toString())).isEqualTo(2);

    assertThat(errLine()).isEqualTo("phasemeter proxy: " + missing + ": file not found");
  }

  @Test
  void unknownOptionExitsTwo() {
    assertThat(run("--frobnicate")).isEqualTo(2);

    assertThat(err.toString()).contains("--frobnicate");
  }

  @Test
  void aMissingKeysFileIsAClearLine() throws IOException {
    Path file = write("auth: {enabled: true, keys_file: no-such-keys.yaml}\n");

    assertThat(run("--check", "--config", file.toString())).isEqualTo(2);

    assertThat(errLine())
        .startsWith("phasemeter proxy: " + file + ": auth.keys_file")
        .contains("no-such-keys.yaml", "not found");
  }

  private Path tenantKeys(int marked) throws IOException {
    StringBuilder keys = new StringBuilder("keys:\n");
    for (int i = 0; i < marked; i++) {
      keys.append("  - {name: t")
          .append(i)
          .append(", sha256: \"")
          .append(String.format("%064x", i + 1))
          .append("\", tenant_metrics: true}\n");
    }
    Path file = dir.resolve("keys.yaml");
    Files.writeString(file, keys + "...\n");
    return file;
  }

  @Test
  void aKeysFilePastTheTenantBoundStopsStartUpNamingTheKey() throws IOException {
    Path keys = tenantKeys(64);
    Path file =
        write(
            "listen: {host: 127.0.0.1, port: 0}\nadmin: {host: 127.0.0.1, port: 0}\n"
                + "auth: {enabled: true, keys_file: "
                + keys
                + "}\ntenants: {names: [team-a]}\n");

    assertThat(run("--config", file.toString())).isEqualTo(2);

    assertThat(errLine())
        .isEqualTo(
            "phasemeter proxy: "
                + keys
                + ": keys[63].tenant_metrics: 't63' would be tenant 65; at most 64 in all"
                + " (tenants.names: 1, keys with tenant_metrics: true: 64), each a value of the"
                + " llm_tenant label");
  }

  @Test
  void aTenantsBudgetNeedsATenantOfTheProxyAndALabelledHistogram() throws IOException {
    Path keys = tenantKeys(2);
    Path budgets = dir.resolve("budgets.yaml");
    Path file =
        write(
            "auth: {enabled: true, keys_file: "
                + keys
                + "}\ntenants: {names: [team-a]}\nbudgets: "
                + budgets
                + "\n");
    String common = "quantile: 0.9, window: 1m, max_error_rate: 0.1, min_join_coverage: 0";

    Files.writeString(
        budgets,
        "budgets:\n  - {name: a, tenant: team-a, limits_ms: {ttft: 500, tpot: 50, total: 9000,"
            + " client_ttft: 600}, "
            + common
            + "}\n  - {name: b, tenant: t1, limits_ms: {total: 500}, "
            + common
            + "}\n  - {name: c, tenant: other, limits_ms: {total: 500}, "
            + common
            + "}\n");
    assertThat(run("--check", "--config", file.toString())).as(err.toString()).isZero();
    assertThat(out.toString())
        .contains(
            "tenants: 3 allowlisted (team-a, t0, t1); every other request is 'other';"
                + " llm_tenant not on the phase histograms");

    Files.writeString(
        budgets,
        "budgets:\n  - {name: x, tenant: team-z, limits_ms: {total: 500}, " + common + "}\n");
    assertThat(run("--check", "--config", file.toString())).isEqualTo(2);
    assertThat(errLine())
        .startsWith(
            "phasemeter proxy: "
                + budgets
                + ": budgets[0] (x).tenant: 'team-z' is not a tenant of this proxy");

    err.getBuffer().setLength(0);
    Files.writeString(
        budgets, "budgets:\n  - {name: q, tenant: t0, limits_ms: {queue: 50}, " + common + "}\n");
    assertThat(run("--check", "--config", file.toString())).isEqualTo(2);
    assertThat(errLine())
        .startsWith("phasemeter proxy: " + budgets + ": budgets[0] (q).limits_ms.queue: ")
        .contains("set tenants.phase_histograms: true");

    err.getBuffer().setLength(0);
    Files.writeString(
        file,
        "auth: {enabled: true, keys_file: "
            + keys
            + "}\ntenants: {names: [team-a], phase_histograms: true}\nbudgets: "
            + budgets
            + "\n");
    assertThat(run("--check", "--config", file.toString())).as(err.toString()).isZero();

    Files.writeString(
        budgets, "budgets:\n  - {name: i, tenant: t0, limits_ms: {itl: 50}, " + common + "}\n");
    assertThat(run("--check", "--config", file.toString())).isEqualTo(2);
    assertThat(errLine()).contains("budgets[0] (i).limits_ms.itl: ", "which it never has");
  }
}
