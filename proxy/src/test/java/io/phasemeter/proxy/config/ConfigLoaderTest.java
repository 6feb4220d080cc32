package io.phasemeter.proxy.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.proxy.config.ProxyConfig.Pool;
import io.phasemeter.proxy.config.ProxyConfig.Upstream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.assertj.core.api.AbstractThrowableAssert;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ConfigLoaderTest {

  @TempDir Path dir;

  private Path write(String yaml) throws IOException {
    Path file = dir.resolve("proxy.yaml");
    Files.writeString(file, yaml);
    return file;
  }

  /**
   * Asserts the failure is one {@link ConfigException} line naming {@code file} and {@code key}.
   */
  private AbstractThrowableAssert<?, ?> failsNaming(String yaml, String key) throws IOException {
    Path file = write(yaml);
    return assertThatThrownBy(() -> ConfigLoader.load(file, Map.of()))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith(file + ": ")
        .hasMessageContaining(key)
        .satisfies(e -> assertThat(e.getMessage()).doesNotContain("\n", "\r"));
  }

  @Test
  void builtInDefaults() {
    ProxyConfig c = ConfigLoader.load(null, Map.of());

    assertThat(c).isEqualTo(ConfigLoader.defaults());
    assertThat(c.listen()).isEqualTo(new ProxyConfig.Listen("0.0.0.0", 8080));
    assertThat(c.admin()).isEqualTo(new ProxyConfig.Admin("127.0.0.1", 9464, ""));
    assertThat(c.limits().maxBodyBytes()).isEqualTo(10_485_760L);
    assertThat(c.auth()).isEqualTo(new ProxyConfig.Auth(false, null));
    assertThat(c.pools()).hasSize(1);
    Pool p = c.pools().get(0);
    assertThat(p.name()).isEqualTo("default");
    assertThat(p.models()).containsExactly("sim-llama");
    assertThat(p.upstreamUrls()).containsExactly("http://127.0.0.1:8000");
    assertThat(p.slots()).isEqualTo(64);
    assertThat(p.queue()).isEqualTo(new ProxyConfig.Queue(1000, Duration.ofSeconds(30)));
    assertThat(p.timeouts())
        .isEqualTo(
            new ProxyConfig.Timeouts(
                Duration.ofSeconds(2), Duration.ofSeconds(120), Duration.ofSeconds(30)));
    assertThat(c.telemetry().serviceName()).isEqualTo("phasemeter-proxy");
    assertThat(c.telemetry().otlp()).isEqualTo(new ProxyConfig.Otlp(null, "http/protobuf"));
    assertThat(c.telemetry().sampling())
        .isEqualTo(new ProxyConfig.Sampling(1.0, true, Duration.ofSeconds(2)));
    assertThat(c.telemetry().records())
        .isEqualTo(
            new ProxyConfig.Records(100_000, Duration.ofMinutes(10), Duration.ofSeconds(30)));
    assertThat(c.poolFor("sim-llama")).isSameAs(p);
    assertThat(c.poolFor("gpt-4")).isNull();
    assertThat(p.routing()).isEqualTo(ProxyConfig.Routing.LEAST_LOADED);
    assertThat(p.scrapeInterval()).isEqualTo(Duration.ofMillis(250));
    assertThat(p.scrapeTimeout()).isEqualTo(Duration.ofMillis(250));
  }

  @Test
  void routingAndItsScrapes() throws IOException {
    String pool = "pools: [{name: a, models: [m], upstreams: ['http://h'], routing: engine_load";
    Pool p = ConfigLoader.load(write(pool + "}]\n"), Map.of()).pools().get(0);
    assertThat(p.routing()).isEqualTo(ProxyConfig.Routing.ENGINE_LOAD);
    // The timeout follows the interval, up to 1 s.
    p = ConfigLoader.load(write(pool + ", scrape_interval: 5s}]\n"), Map.of()).pools().get(0);
    assertThat(p.scrapeInterval()).isEqualTo(Duration.ofSeconds(5));
    assertThat(p.scrapeTimeout()).isEqualTo(Duration.ofSeconds(1));
    p =
        ConfigLoader.load(
                write(pool + ", scrape_interval: 100ms, scrape_timeout: 300ms}]\n"), Map.of())
            .pools()
            .get(0);
    assertThat(p.scrapeTimeout()).isEqualTo(Duration.ofMillis(300));
    assertThat(
            ConfigLoader.load(null, Map.of("PHASEMETER_POOLS_0_ROUTING", "engine_load"))
                .pools()
                .get(0)
                .routing())
        .isEqualTo(ProxyConfig.Routing.ENGINE_LOAD);
  }

  @Test
  void routingErrorsNameTheKey() throws IOException {
    String pool = "pools: [{name: a, models: [m], upstreams: ['http://h'], ";
    failsNaming(pool + "routing: round_robin}]\n", "pools[0].routing")
        .hasMessageContaining("must be least_loaded or engine_load (got round_robin)");
    failsNaming(pool + "routing: engine_load, scrape_interval: 5ms}]\n", "scrape_interval")
        .hasMessageContaining("at least 10ms");
    failsNaming(pool + "scrape_interval: 0s}]\n", "scrape_interval");
    failsNaming(pool + "scrape_interval: 100ms, scrape_timeout: 301ms}]\n", "scrape_timeout")
        .hasMessageContaining("at most 3 x scrape_interval (300ms)");
    failsNaming(pool + "scrape_timeout: 0s}]\n", "scrape_timeout");
    failsNaming(pool + "external: true, routing: engine_load}]\n", "routing")
        .hasMessageContaining("external");
  }

  @Test
  void emptyFileMeansDefaults() throws IOException {
    assertThat(ConfigLoader.load(write(""), Map.of())).isEqualTo(ConfigLoader.defaults());
    assertThat(ConfigLoader.load(write("# nothing set\n"), Map.of()))
        .isEqualTo(ConfigLoader.defaults());
  }

  @Test
  void userFileIsMergedOntoDefaults() throws IOException {
    Path file =
        write(
            """
            listen: {port: 9000}
            telemetry:
              sampling: {ratio: 0.25}
            pools:
              - name: llama
                models: [llama-8b, llama-8b-instruct]
                upstreams: [http://gpu1:8000, http://gpu2:8000]
                slots: 16
              - name: mistral
                models: [mistral-7b]
                upstreams: [https://mistral.internal/v1]
                queue: {max: 10}
                timeouts: {first_token: 5s}
            """);

    ProxyConfig c = ConfigLoader.load(file, Map.of());

    assertThat(c.listen()).isEqualTo(new ProxyConfig.Listen("0.0.0.0", 9000));
    assertThat(c.admin().port()).isEqualTo(9464);
    assertThat(c.telemetry().sampling())
        .isEqualTo(new ProxyConfig.Sampling(0.25, true, Duration.ofSeconds(2)));
    assertThat(c.telemetry().serviceName()).isEqualTo("phasemeter-proxy");
    assertThat(c.pools()).extracting(Pool::name).containsExactly("llama", "mistral");

    Pool llama = c.pools().get(0);
    assertThat(llama.models()).containsExactly("llama-8b", "llama-8b-instruct");
    assertThat(llama.upstreamUrls()).containsExactly("http://gpu1:8000", "http://gpu2:8000");
    assertThat(llama.slots()).isEqualTo(16);
    assertThat(llama.queue()).isEqualTo(new ProxyConfig.Queue(1000, Duration.ofSeconds(30)));
    assertThat(llama.timeouts())
        .isEqualTo(
            new ProxyConfig.Timeouts(
                Duration.ofSeconds(2), Duration.ofSeconds(120), Duration.ofSeconds(30)));

    Pool mistral = c.pools().get(1);
    assertThat(mistral.slots()).isEqualTo(64);
    assertThat(mistral.queue()).isEqualTo(new ProxyConfig.Queue(10, Duration.ofSeconds(30)));
    assertThat(mistral.timeouts())
        .isEqualTo(
            new ProxyConfig.Timeouts(
                Duration.ofSeconds(2), Duration.ofSeconds(5), Duration.ofSeconds(30)));
    assertThat(c.poolFor("mistral-7b")).isSameAs(mistral);
    assertThat(mistral.upstreamAddresses())
        .containsExactly(
            new Upstream("https://mistral.internal/v1", "mistral.internal", 443, true, ""));
  }

  @Test
  void parseNamesTheGivenSource() {
    ProxyConfig c = ConfigLoader.parse("listen: {port: 7000}\n", "inline.yaml");

    assertThat(c.listen().port()).isEqualTo(7000);
    assertThatThrownBy(() -> ConfigLoader.parse("listen: {prot: 1}\n", "inline.yaml"))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("inline.yaml: ")
        .hasMessageContaining("prot");
  }

  @Test
  void environmentOverridesTheFile() throws IOException {
    Path file = write("listen: {port: 9000}\nlimits: {max_body_bytes: 100}\n");

    ProxyConfig c =
        ConfigLoader.load(
            file,
            Map.of(
                "PHASEMETER_LISTEN_PORT", "9090",
                "PHASEMETER_LIMITS_MAX_BODY_BYTES", "5",
                "PHASEMETER_POOLS_0_SLOTS", "8",
                "PHASEMETER_POOLS_0_UPSTREAMS", "http://a:1,http://b:2",
                "PHASEMETER_TELEMETRY_SAMPLING_KEEP_SLOWER_THAN", "500ms",
                "PHASEMETER_TELEMETRY_OTLP_ENDPOINT", "http://collector:4318",
                "PHASEMETER_ADMIN_TOKEN", "s3cret",
                "HOME", "/root",
                "OTEL_SERVICE_NAME", "ignored-here"));

    assertThat(c.listen().port()).isEqualTo(9090);
    assertThat(c.limits().maxBodyBytes()).isEqualTo(5);
    assertThat(c.pools().get(0).slots()).isEqualTo(8);
    assertThat(c.pools().get(0).upstreamUrls()).containsExactly("http://a:1", "http://b:2");
    assertThat(c.telemetry().sampling().keepSlowerThan()).isEqualTo(Duration.ofMillis(500));
    assertThat(c.telemetry().otlp().endpoint()).isEqualTo("http://collector:4318");
    assertThat(c.admin().token()).isEqualTo("s3cret");
    assertThat(c.telemetry().serviceName()).isEqualTo("phasemeter-proxy");
  }

  @Test
  void environmentAloneOverridesDefaults() {
    ProxyConfig c = ConfigLoader.load(null, Map.of("PHASEMETER_POOLS_0_MODELS", "a, b"));

    assertThat(c.pools().get(0).models()).containsExactly("a", "b");
  }

  @Test
  void textValuesFromTheEnvironmentStayText() {
    ProxyConfig c =
        ConfigLoader.load(
            null,
            Map.of(
                "PHASEMETER_ADMIN_TOKEN", "0123",
                "PHASEMETER_POOLS_0_NAME", "007",
                "PHASEMETER_POOLS_0_MODELS_0", "0x10",
                "PHASEMETER_TELEMETRY_SERVICE_NAME", "true"));

    assertThat(c.admin().token()).isEqualTo("0123");
    assertThat(c.pools().get(0).name()).isEqualTo("007");
    assertThat(c.pools().get(0).models()).containsExactly("0x10");
    assertThat(c.telemetry().serviceName()).isEqualTo("true");
  }

  @Test
  void environmentVariableNamingNoKeyIsAnError() {
    assertThatThrownBy(() -> ConfigLoader.load(null, Map.of("PHASEMETER_LISTEN_PROT", "1")))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("PHASEMETER_LISTEN_PROT");
    assertThatThrownBy(() -> ConfigLoader.load(null, Map.of("PHASEMETER_NOPE", "1")))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("PHASEMETER_NOPE");
    assertThatThrownBy(() -> ConfigLoader.load(null, Map.of("PHASEMETER_POOLS_3_SLOTS", "1")))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("PHASEMETER_POOLS_3_SLOTS")
        .hasMessageContaining("out of range");
    assertThatThrownBy(() -> ConfigLoader.load(null, Map.of("PHASEMETER_POOLS_X_SLOTS", "1")))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("PHASEMETER_POOLS_X_SLOTS");
  }

  @Test
  void environmentValueIsValidatedLikeTheFile() {
    assertThatThrownBy(() -> ConfigLoader.load(null, Map.of("PHASEMETER_POOLS_0_SLOTS", "0")))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("slots");
  }

  @Test
  void unknownKey() throws IOException {
    failsNaming("listen: {prot: 1}\n", "prot").hasMessageContaining("listen");
    failsNaming("lisen: {port: 1}\n", "lisen");
    failsNaming("pools: [{name: a, models: [m], upstreams: ['http://h'], slot: 2}]\n", "slot");
  }

  @Test
  void http2IsOffOnPlaintextOnWithTlsAndItsLimitsAreChecked() throws IOException {
    ProxyConfig.Listen plain = ConfigLoader.parse("listen: {port: 7000}\n", "a.yaml").listen();
    assertThat(plain.http2()).isFalse();
    assertThat(plain.http2MaxConcurrentStreams())
        .isEqualTo(ProxyConfig.Listen.DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS)
        .isEqualTo(128);
    assertThat(plain.http2MaxHeaderListSize())
        .isEqualTo(ProxyConfig.Listen.DEFAULT_HTTP2_MAX_HEADER_LIST_SIZE)
        .isEqualTo(16384);
    String tls = "tls: {cert_file: /etc/p/tls.crt, key_file: /etc/p/tls.key}";
    assertThat(ConfigLoader.parse("listen: {" + tls + "}\n", "b.yaml").listen().http2()).isTrue();
    assertThat(
            ConfigLoader.parse("listen: {http2: false, " + tls + "}\n", "c.yaml").listen().http2())
        .isFalse();
    ProxyConfig.Listen h2c =
        ConfigLoader.parse(
                "listen: {http2: true, http2_max_concurrent_streams: 4,"
                    + " http2_max_header_list_size: 4096}\n",
                "d.yaml")
            .listen();
    assertThat(h2c.http2()).isTrue();
    assertThat(h2c.tls()).isNull();
    assertThat(h2c.http2MaxConcurrentStreams()).isEqualTo(4);
    assertThat(h2c.http2MaxHeaderListSize()).isEqualTo(4096);

    failsNaming("listen: {http2: maybe}\n", "http2").hasMessageContaining("listen");
    failsNaming("listen: {http2_max_concurrent_streams: 0}\n", "http2_max_concurrent_streams")
        .hasMessageContaining("at least 1");
    failsNaming("listen: {http2_max_concurrent_streams: many}\n", "http2_max_concurrent_streams");
    failsNaming("listen: {http2_max_header_list_size: 512}\n", "http2_max_header_list_size")
        .hasMessageContaining("at least 1024");
    failsNaming("listen: {http2_max_header_list_size: -1}\n", "http2_max_header_list_size");
  }

  @Test
  void slotsMustBePositive() throws IOException {
    failsNaming("pools: [{name: a, models: [m], upstreams: ['http://h'], slots: 0}]\n", "slots")
        .hasMessageContaining("pools[0]");
  }

  @Test
  void badDuration() throws IOException {
    failsNaming(
            "pools: [{name: a, models: [m], upstreams: ['http://h'], queue: {timeout: 3 parsecs}}]\n",
            "timeout")
        .hasMessageContaining("pools[0]")
        .hasMessageContaining("3 parsecs");
    failsNaming("telemetry: {records: {ttl: soon}}\n", "ttl");
    failsNaming(
        "telemetry: {records: {feed_write_timeout: 0s}}\n", "telemetry.records.feed_write_timeout");
  }

  @Test
  void invalidUpstreamUrl() throws IOException {
    failsNaming("pools: [{name: a, models: [m], upstreams: ['ftp://x']}]\n", "upstreams")
        .hasMessageContaining("ftp://x");
    failsNaming("pools: [{name: a, models: [m], upstreams: ['http://bad host']}]\n", "upstreams");
    failsNaming("pools: [{name: a, models: [m], upstreams: []}]\n", "upstreams");
  }

  @Test
  void duplicatePoolName() throws IOException {
    failsNaming(
            """
            pools:
              - {name: a, models: [m1], upstreams: ['http://h']}
              - {name: a, models: [m2], upstreams: ['http://h']}
            """,
            "pools")
        .hasMessageContaining("'a'");
  }

  @Test
  void modelInTwoPools() throws IOException {
    failsNaming(
            """
            pools:
              - {name: a, models: [m1, shared], upstreams: ['http://h']}
              - {name: b, models: [shared], upstreams: ['http://h']}
            """,
            "pools")
        .hasMessageContaining("'shared'");
  }

  @Test
  void badProtocol() throws IOException {
    failsNaming("telemetry: {otlp: {protocol: carrier-pigeon}}\n", "telemetry.otlp.protocol")
        .hasMessageContaining("carrier-pigeon");
  }

  @Test
  void badOtlpEndpoint() throws IOException {
    failsNaming("telemetry: {otlp: {endpoint: 'not a url'}}\n", "telemetry.otlp.endpoint");
  }

  @Test
  void ratioAboveOne() throws IOException {
    failsNaming("telemetry: {sampling: {ratio: 1.5}}\n", "telemetry.sampling.ratio")
        .hasMessageContaining("1.5");
  }

  @Test
  void invalidYaml() throws IOException {
    failsNaming("listen: {port: 1\nadmin: [\n", "not valid YAML at line 2")
        .hasMessageContaining("expected ',' or '}'");
    failsNaming("listen:\n  port: 1\n port: 2\n", "YAML");
  }

  @Test
  void wrongTypeNamesTheKey() throws IOException {
    failsNaming("listen: {port: many}\n", "listen.port");
  }

  @Test
  void missingFile() {
    Path missing = dir.resolve("absent.yaml");

    assertThatThrownBy(() -> ConfigLoader.load(missing, Map.of()))
        .isInstanceOf(ConfigException.class)
        .hasMessage(missing + ": file not found");
  }

  @Test
  void authWithoutKeysFile() throws IOException {
    failsNaming("auth: {enabled: true}\n", "auth.keys_file");
  }

  @Test
  void topLevelMustBeAMapping() throws IOException {
    failsNaming("- listen\n- admin\n", "top level");
    failsNaming("just words\n", "top level");
  }

  @Test
  void adminMustNotShareTheListenPort() throws IOException {
    failsNaming("listen: {host: 127.0.0.1, port: 9464}\n", "admin.port");
  }

  @Test
  void anAdminPortBeyondLoopbackWithoutATokenIsRefused() throws IOException {
    Path file = write("admin: {host: 0.0.0.0, port: 9464}\n");

    assertThatThrownBy(() -> ConfigLoader.load(file, Map.of()))
        .isInstanceOf(ConfigException.class)
        .hasMessage(
            file
                + ": admin.host: 0.0.0.0 is reachable beyond this machine and admin.token"
                + " is empty; set admin.token (PHASEMETER_ADMIN_TOKEN) or admin.allow_open: true");
    for (String host : List.of("::", "10.0.0.5", "proxy.internal", "128.0.0.1", "127.0.0")) {
      failsNaming("admin: {host: '" + host + "'}\n", "admin.token is empty");
    }
    // The image's way: the host from the environment, no token.
    assertThatThrownBy(() -> ConfigLoader.load(null, Map.of("PHASEMETER_ADMIN_HOST", "0.0.0.0")))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("admin.host: 0.0.0.0 is reachable beyond this machine");
  }

  @Test
  void anAdminPortBeyondLoopbackIsAcceptedWithATokenOrWhenAllowedOpen() throws IOException {
    ProxyConfig withToken =
        ConfigLoader.load(
            write("admin: {host: 0.0.0.0, port: 9464}\n"),
            Map.of("PHASEMETER_ADMIN_TOKEN", STRONG_TOKEN));
    assertThat(withToken.admin().open()).isFalse();
    assertThat(withToken.admin().allowOpen()).isFalse();

    ProxyConfig open =
        ConfigLoader.load(write("admin: {host: 0.0.0.0, allow_open: true}\n"), Map.of());
    assertThat(open.admin().open()).isTrue();
    assertThat(open.admin()).isEqualTo(new ProxyConfig.Admin("0.0.0.0", 9464, "", true));
    assertThat(
            ConfigLoader.load(
                    null,
                    Map.of("PHASEMETER_ADMIN_ALLOW_OPEN", "true", "PHASEMETER_ADMIN_HOST", "::"))
                .admin()
                .open())
        .isTrue();
  }

  @Test
  void anAdminPortOnLoopbackNeedsNoToken() throws IOException {
    for (String host :
        List.of(
            "127.0.0.1",
            "127.1.2.3",
            "localhost",
            "LOCALHOST",
            "::1",
            "[::1]",
            "0:0:0:0:0:0:0:1")) {
      ProxyConfig c = ConfigLoader.load(write("admin: {host: '" + host + "'}\n"), Map.of());
      assertThat(c.admin().token()).as(host).isEmpty();
      assertThat(c.admin().open()).as(host).isFalse();
    }
    assertThat(ConfigLoader.defaults().admin().allowOpen()).isFalse();
  }

  /** What {@code openssl rand -hex 32} prints: the token the README tells you to make. */
  static final String STRONG_TOKEN =
      "3f9c2a7e81d4b6f05e2c9a1d7b3e8f4061a5c9d2e7b4f8a03c6d1e9b5a2f7c48";

  /** Shipped or typed placeholders, short tokens, and tokens of one or a few characters. */
  static final List<String> WEAK_TOKENS =
      List.of(
          "change-me",
          "CHANGEME",
          " change_me ",
          "token",
          "secret",
          "password",
          "admin",
          "test",
          "example",
          "replace-me",
          "placeholder",
          "your-token",
          "s3cret",
          "x",
          "0123456789abcde",
          "xxxxxxxxxxxxxxxxxxxxxxxx",
          "abababababababababab",
          "change-me-in-production",
          "Replace-With-Your-Own-Token",
          "phasemeter-admin-token",
          "${PHASEMETER_ADMIN_TOKEN}",
          "<admin-token-goes-here>");

  @Test
  void aWeakAdminTokenBeyondLoopbackIsRefusedWithoutBeingPrinted() throws IOException {
    // Not proxy.yaml: failsNaming below writes that one.
    Path file =
        Files.writeString(dir.resolve("beyond.yaml"), "admin: {host: 0.0.0.0, port: 9464}\n");
    String beyond =
        ", and admin.host 0.0.0.0 is reachable beyond this machine; set a random token of at least"
            + " 16 characters (e.g. openssl rand -hex 32) in admin.token or PHASEMETER_ADMIN_TOKEN";
    // One of three fixed lines: nothing of the token itself (not even its length) is printed.
    List<String> lines =
        List.of(
            file + ": admin.token: looks like a placeholder" + beyond,
            file + ": admin.token: shorter than 16 characters" + beyond,
            file + ": admin.token: fewer than 5 different characters" + beyond);
    for (String token : WEAK_TOKENS) {
      // From the environment (the image's and the Deployment's way) and from the file; allow_open
      // is about having no token and does not excuse a weak one.
      for (Map<String, String> env :
          List.of(
              Map.of("PHASEMETER_ADMIN_TOKEN", token),
              Map.of("PHASEMETER_ADMIN_TOKEN", token, "PHASEMETER_ADMIN_ALLOW_OPEN", "true"))) {
        assertThatThrownBy(() -> ConfigLoader.load(file, env))
            .as(token)
            .isInstanceOf(ConfigException.class)
            .satisfies(e -> assertThat(e.getMessage()).isIn(lines));
      }
      failsNaming(
          "admin: {host: '::', token: '" + token.replace("'", "''") + "'}\n", "admin.token: ");
    }
    assertThatThrownBy(() -> ConfigLoader.load(file, Map.of("PHASEMETER_ADMIN_TOKEN", "change-me")))
        .hasMessage(lines.get(0));
    assertThatThrownBy(() -> ConfigLoader.load(file, Map.of("PHASEMETER_ADMIN_TOKEN", "x")))
        .hasMessage(lines.get(1));
    assertThatThrownBy(
            () -> ConfigLoader.load(file, Map.of("PHASEMETER_ADMIN_TOKEN", "abababababababab")))
        .hasMessage(lines.get(2));
  }

  @Test
  void aRandomAdminTokenBeyondLoopbackIsAcceptedAndTrimmed() throws IOException {
    Path file = write("admin: {host: 0.0.0.0, port: 9464}\n");
    for (String token :
        List.of(
            STRONG_TOKEN,
            "9e107d9d372bb682", // openssl rand -hex 8: 16 characters
            "q3Zr8VtL0pXw2YbN5sKd7HfJ", // openssl rand -base64 18
            "pm-admin-do-not-print")) {
      assertThat(ConfigLoader.load(file, Map.of("PHASEMETER_ADMIN_TOKEN", token)).admin().token())
          .isEqualTo(token);
    }
    // The header's value is trimmed before it is compared, so the configured one is too (a Secret
    // made --from-file keeps the file's last newline).
    assertThat(
            ConfigLoader.load(file, Map.of("PHASEMETER_ADMIN_TOKEN", " " + STRONG_TOKEN + "\n"))
                .admin()
                .token())
        .isEqualTo(STRONG_TOKEN);
  }

  @Test
  void aWeakAdminTokenOnLoopbackIsAllowed() throws IOException {
    for (String token : WEAK_TOKENS) {
      ProxyConfig c =
          ConfigLoader.load(
              write("admin: {host: 127.0.0.1}\n"), Map.of("PHASEMETER_ADMIN_TOKEN", token));
      assertThat(c.admin().token()).as(token).isEqualTo(token.strip());
    }
  }

  @Test
  void upstreamDefaultsPortsAndStripsTheApiPrefix() {
    assertThat(Upstream.parse("http://h")).isEqualTo(new Upstream("http://h", "h", 80, false, ""));
    assertThat(Upstream.parse("https://h"))
        .isEqualTo(new Upstream("https://h", "h", 443, true, ""));
    assertThat(Upstream.parse(" http://h:8000/ "))
        .isEqualTo(new Upstream("http://h:8000/", "h", 8000, false, ""));
    assertThat(Upstream.parse("http://h:8000/v1").basePath()).isEmpty();
    assertThat(Upstream.parse("http://h:8000/v1/").basePath()).isEmpty();
    assertThat(Upstream.parse("http://h:1/prefix").basePath()).isEqualTo("/prefix");
    assertThat(Upstream.parse("http://h:1/prefix/v1/").basePath()).isEqualTo("/prefix");
    assertThat(Upstream.parse("HTTPS://h:1").tls()).isTrue();
    assertThat(Upstream.parse("http://10.0.0.5:8000").authority()).isEqualTo("10.0.0.5:8000");
  }

  @Test
  void upstreamRejectsWhatIsNotHttp() {
    for (String bad : List.of("ftp://x", "h:8000", "http://", "http://a b", "")) {
      assertThatThrownBy(() -> Upstream.parse(bad))
          .as(bad)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("upstreams");
    }
  }

  @Test
  void copiesKeepEverythingElse() {
    ProxyConfig c = ConfigLoader.defaults();

    assertThat(c.withListenPort(0).withAdminPort(0).listen().port()).isZero();
    assertThat(c.withListenPort(0).pools()).isEqualTo(c.pools());
    assertThat(c.withLimits(new ProxyConfig.Limits(7)).limits().maxBodyBytes()).isEqualTo(7);
  }

  @Test
  void theShippedConfigSaysWhatTheDefaultsSayButTheBudgets() {
    ProxyConfig shipped = ConfigLoader.load(Path.of("../config/proxy.yaml"), Map.of());
    ProxyConfig defaults = ConfigLoader.defaults();

    assertThat(shipped.budgets()).isEqualTo("config/budgets.yaml");
    assertThat(
            new ProxyConfig(
                shipped.listen(),
                shipped.admin(),
                shipped.limits(),
                shipped.auth(),
                shipped.pools(),
                shipped.telemetry(),
                null,
                shipped.drain()))
        .isEqualTo(defaults);
  }

  @org.junit.jupiter.params.ParameterizedTest
  @org.junit.jupiter.params.provider.CsvSource(
      delimiter = '|',
      value = {
        "retries: 2|retries: must be 0 or 1",
        "health: {path: health}|health.path: must start with /",
        "health: {failures: 0}|health.failures: must be at least 1",
        "ejection: {after: 0}|ejection.after: must be at least 1",
        "ejection: {backoff: 10s, max_backoff: 1s}|ejection.max_backoff: must be at least",
        "queue: {max_overtakes: -1}|queue.max_overtakes: must be 0 or more",
        "api_key_env: not-a-name|api_key_env: 'not-a-name' is not an environment variable"
      })
  void gatewayKeysAreCheckedAndNamed(String poolLine, String message) {
    String yaml =
        "pools:\n  - name: p\n    models: [m]\n    upstreams: [http://a:1]\n    " + poolLine + "\n";

    assertThatThrownBy(() -> ConfigLoader.parse(yaml, "gw.yaml"))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("gw.yaml: ")
        .hasMessageContaining(message);
  }

  @Test
  void gatewayKeysParse() {
    ProxyConfig c =
        ConfigLoader.parse(
            "auth: {enabled: true, keys_file: k.yaml, reload_interval: 1s}\n"
                + "drain: {timeout: 5s}\n"
                + "pools:\n  - name: p\n    models: [m]\n    upstreams: [https://api.example/v1]\n"
                + "    external: true\n    api_key_env: PROVIDER_KEY\n    retries: 0\n"
                + "    queue: {max_overtakes: 0}\n",
            "gw.yaml");

    Pool p = c.pools().get(0);
    assertThat(c.auth().reloadInterval()).isEqualTo(Duration.ofSeconds(1));
    assertThat(c.drain().timeout()).isEqualTo(Duration.ofSeconds(5));
    assertThat(p.external()).isTrue();
    assertThat(p.activeHealthChecks()).isFalse();
    assertThat(p.apiKeyEnv()).isEqualTo("PROVIDER_KEY");
    assertThat(p.retries()).isZero();
    assertThat(p.queue().maxOvertakes()).isZero();
    assertThat(p.upstreamAddresses().get(0).tls()).isTrue();
    assertThat(ConfigLoader.defaults().pools().get(0).activeHealthChecks()).isTrue();
  }

  @Test
  void listenerAndTraceIntakeBoundsHaveDefaultsAndRefuseNonsenseNamingTheKey() throws IOException {
    ProxyConfig c = ConfigLoader.defaults();
    assertThat(c.listen().maxConnections()).isZero();
    assertThat(c.admin().maxConnections()).isEqualTo(256);
    assertThat(c.admin().receiveTimeout()).isEqualTo(java.time.Duration.ofSeconds(10));
    assertThat(c.telemetry().engineSpans().maxBodyBytes()).isEqualTo(4 * 1024 * 1024);
    assertThat(c.telemetry().engineSpans().maxSpans()).isEqualTo(2048);
    failsNaming("listen: {max_connections: -1}\n", "listen.max_connections");
    failsNaming("admin: {max_connections: 0}\n", "admin.max_connections");
    failsNaming("admin: {receive_timeout: 0s}\n", "admin.receive_timeout");
    failsNaming(
        "telemetry: {engine_spans: {max_body_bytes: 0}}\n",
        "telemetry.engine_spans.max_body_bytes");
    failsNaming("telemetry: {engine_spans: {max_spans: 0}}\n", "telemetry.engine_spans.max_spans");
  }

  @Test
  void tenantsParseWithTheirDefaultsAndTheEnvironment() {
    assertThat(ConfigLoader.defaults().tenants()).isEqualTo(ProxyConfig.Tenants.NONE);
    ProxyConfig c =
        ConfigLoader.parse(
            "tenants: {header: X-Tenant-ID, names: [team-a, team.b_2], phase_histograms: true}\n",
            "t.yaml");
    assertThat(c.tenants().header()).isEqualTo("x-tenant-id");
    assertThat(c.tenants().names()).containsExactly("team-a", "team.b_2");
    assertThat(c.tenants().phaseHistograms()).isTrue();

    ProxyConfig env =
        ConfigLoader.load(
            null,
            Map.of(
                "PHASEMETER_TENANTS_HEADER", "x-team",
                "PHASEMETER_TENANTS_NAMES", "a,b",
                "PHASEMETER_TENANTS_PHASE_HISTOGRAMS", "true"));
    assertThat(env.tenants())
        .isEqualTo(new ProxyConfig.Tenants("x-team", java.util.List.of("a", "b"), true));
  }

  @Test
  void badTenantsAreRefusedNamingTheKey() throws IOException {
    failsNaming("tenants: {names: [team a]}\n", "tenants.names[0]: 'team a' must be 1 to 64");
    failsNaming("tenants: {names: [a, other]}\n", "tenants.names[1]: 'other' is reserved");
    failsNaming("tenants: {names: [a, b, a]}\n", "tenants.names[2]: 'a' is listed twice");
    String names =
        java.util.stream.IntStream.range(0, 65)
            .mapToObj(i -> "t" + i)
            .collect(java.util.stream.Collectors.joining(", "));
    failsNaming("tenants: {names: [" + names + "]}\n", "tenants.names: at most 64 values (got 65)");
    failsNaming("tenants: {header: \"x tenant\"}\n", "tenants.header: 'x tenant' is not");
    failsNaming("tenants: {header: Authorization}\n", "tenants.header: 'authorization' carries");
    failsNaming("tenants: {names: [a], label: x}\n", "unknown key 'tenants.label'");
  }
}
