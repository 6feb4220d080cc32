package io.phasemeter.proxy.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServicePort;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.openshift.api.model.monitoring.v1.Endpoint;
import io.fabric8.openshift.api.model.monitoring.v1.PrometheusRule;
import io.fabric8.openshift.api.model.monitoring.v1.Rule;
import io.fabric8.openshift.api.model.monitoring.v1.ServiceMonitor;
import io.phasemeter.proxy.budget.AlertRule;
import io.phasemeter.proxy.budget.AlertRules;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * config/kubernetes/ read into the fabric8 Kubernetes model (typed objects, as the API server would
 * decode them; an unknown or misspelt field lands in additionalProperties and fails the test), then
 * the layout the README promises is checked: the proxy as a sidecar on the pod's public port with
 * vLLM on loopback, probes and scrape on the admin port, and the PrometheusRule generated from the
 * same budgets as dashboards/alerts.yaml. No Secret ships: the admin token is created by the
 * command the README gives, and every manifest that needs it refers to that one.
 */
class KubernetesManifestsTest {
  static final Path DIR = Path.of("../config/kubernetes");
  static final Path BUDGETS = Path.of("../config/budgets.yaml");
  static final Path README = Path.of("../README.md");

  /** The README's command that creates the admin token's Secret, before kubectl apply. */
  static final String CREATE_ADMIN_SECRET =
      "kubectl create secret generic phasemeter-admin"
          + " --from-literal=token=\"$(openssl rand -hex 32)\"";

  /** What the README's command stores: 32 random bytes as hex, as openssl prints them. */
  private static final String README_TOKEN = randomHex(32);

  private static String randomHex(int bytes) {
    byte[] b = new byte[bytes];
    new java.security.SecureRandom().nextBytes(b);
    return java.util.HexFormat.of().formatHex(b);
  }

  private static final ObjectMapper YAML =
      new ObjectMapper(new YAMLFactory())
          .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, true);

  private static <T> T read(String file, Class<T> type) throws Exception {
    return YAML.readValue(Files.readString(DIR.resolve(file)), type);
  }

  /** The ConfigMap's proxy.yaml as the proxy container reads it, with the container's env. */
  private static ProxyConfig proxyConfig() throws Exception {
    return proxyConfig(proxyEnvironment());
  }

  private static ProxyConfig proxyConfig(Map<String, String> env) throws Exception {
    ConfigMap cm = read("proxy-config.yaml", ConfigMap.class);
    Path file = Files.createTempFile("proxy-config", ".yaml");
    try {
      Files.writeString(file, cm.getData().get("proxy.yaml"));
      return ConfigLoader.load(file, env);
    } finally {
      Files.delete(file);
    }
  }

  /**
   * The proxy container's environment: plain values as written, secretKeyRef values as the README's
   * command creates them (a reference to another Secret or key, or an optional one, fails).
   */
  private static Map<String, String> proxyEnvironment() throws Exception {
    Map<String, String> env = new java.util.HashMap<>();
    for (EnvVar v : container(pod(), "proxy").getEnv()) {
      if (v.getValueFrom() == null) {
        env.put(v.getName(), v.getValue());
        continue;
      }
      assertIsTheReadmesAdminSecret(v);
      env.put(v.getName(), README_TOKEN);
    }
    return env;
  }

  /**
   * {@code v} comes from the Secret the README's command creates, and the pod does not start
   * without it (a secretKeyRef is required unless it says optional: true).
   */
  private static void assertIsTheReadmesAdminSecret(EnvVar v) {
    var ref = v.getValueFrom().getSecretKeyRef();
    assertThat(ref).as("%s comes from a Secret", v.getName()).isNotNull();
    assertThat(ref.getName()).as(v.getName()).isEqualTo("phasemeter-admin");
    assertThat(ref.getKey()).as(v.getName()).isEqualTo("token");
    assertThat(ref.getOptional()).as("%s is optional", v.getName()).isNotEqualTo(Boolean.TRUE);
  }

  private static PodSpec pod() throws Exception {
    Deployment d = read("deployment.yaml", Deployment.class);
    assertThat(d.getKind()).isEqualTo("Deployment");
    assertThat(d.getApiVersion()).isEqualTo("apps/v1");
    assertThat(d.getSpec().getSelector().getMatchLabels())
        .isEqualTo(d.getSpec().getTemplate().getMetadata().getLabels());
    return d.getSpec().getTemplate().getSpec();
  }

  private static Container container(PodSpec pod, String name) {
    return pod.getContainers().stream().filter(c -> c.getName().equals(name)).findFirst().get();
  }

  private static int port(Container c, String name) {
    return c.getPorts().stream()
        .filter(p -> name.equals(p.getName()))
        .map(ContainerPort::getContainerPort)
        .findFirst()
        .orElseThrow();
  }

  /**
   * Every file under config/kubernetes/, relative to it ({@code search/…} for the subdirectory that
   * {@code kubectl apply -f config/kubernetes/} does not read).
   */
  private static List<String> files() throws Exception {
    try (var s = Files.walk(DIR)) {
      return s.filter(Files::isRegularFile)
          .map(p -> DIR.relativize(p).toString().replace('\\', '/'))
          .sorted()
          .collect(Collectors.toList());
    }
  }

  @Test
  void everyManifestIsAKnownTypeWithNoUnknownFields() throws Exception {
    List<String> files = files();
    assertThat(files)
        .containsExactly(
            "admin-service.yaml",
            "deployment.yaml",
            "load-job.yaml",
            "prometheusrule.yaml",
            "proxy-config.yaml",
            "redis-deployment.yaml",
            "redis-service.yaml",
            "search/capacity-search-job.yaml",
            "service.yaml",
            "servicemonitor.yaml");
    Map<String, Class<?>> types =
        Map.of(
            "admin-service.yaml", Service.class,
            "deployment.yaml", Deployment.class,
            "load-job.yaml", Job.class,
            "prometheusrule.yaml", PrometheusRule.class,
            "proxy-config.yaml", ConfigMap.class,
            "redis-deployment.yaml", Deployment.class,
            "redis-service.yaml", Service.class,
            "search/capacity-search-job.yaml", Job.class,
            "service.yaml", Service.class,
            "servicemonitor.yaml", ServiceMonitor.class);
    for (String f : files) {
      Object o = read(f, types.get(f));
      assertThat(o).as(f).isNotNull();
      // fabric8 keeps fields it does not know instead of failing: a typo would hide there.
      assertThat(YAML.writeValueAsString(o)).as(f).doesNotContain("additionalProperties");
      assertNoAdditionalProperties(o, f);
    }
  }

  /** Walks the typed tree; any object holding unknown fields fails the test with its path. */
  private static void assertNoAdditionalProperties(Object o, String path) throws Exception {
    if (o == null || o instanceof String || o instanceof Number || o instanceof Boolean) {
      return;
    }
    if (o instanceof Map<?, ?> m) {
      for (var e : m.entrySet()) {
        assertNoAdditionalProperties(e.getValue(), path + "." + e.getKey());
      }
      return;
    }
    if (o instanceof List<?> l) {
      for (int i = 0; i < l.size(); i++) {
        assertNoAdditionalProperties(l.get(i), path + "[" + i + "]");
      }
      return;
    }
    if (!o.getClass().getName().startsWith("io.fabric8.")) {
      return;
    }
    for (var m : o.getClass().getMethods()) {
      if (m.getParameterCount() != 0
          || !m.getName().startsWith("get")
          || m.getName().equals("getClass")) {
        continue;
      }
      Object v = m.invoke(o);
      if (m.getName().equals("getAdditionalProperties")) {
        assertThat((Map<?, ?>) v).as("unknown fields at %s", path).isNullOrEmpty();
      } else {
        assertNoAdditionalProperties(v, path + "." + m.getName().substring(3));
      }
    }
  }

  @Test
  void theProxyIsASidecarOnThePublicPortAndVllmListensOnLoopbackOnly() throws Exception {
    PodSpec pod = pod();
    ProxyConfig cfg = proxyConfig();
    assertThat(pod.getContainers()).extracting(Container::getName).containsExactly("proxy", "vllm");
    Container proxy = container(pod, "proxy");
    assertThat(port(proxy, "http")).isEqualTo(cfg.listen().port());
    assertThat(port(proxy, "admin")).isEqualTo(cfg.admin().port());
    assertThat(cfg.listen().host()).isEqualTo("0.0.0.0");
    assertThat(cfg.admin().host()).isEqualTo("0.0.0.0");
    assertThat(proxy.getArgs()).containsExactly("--config", "/config/proxy.yaml");
    assertThat(proxy.getVolumeMounts())
        .anySatisfy(
            m -> {
              assertThat(m.getMountPath()).isEqualTo("/config");
              assertThat(m.getReadOnly()).isTrue();
            });
    assertThat(proxy.getSecurityContext().getRunAsUser()).isEqualTo(10001L);
    // The admin port leaves loopback, so it is guarded by a token from the Secret: without it the
    // proxy would refuse to start.
    assertThat(proxy.getEnv())
        .filteredOn(v -> v.getName().equals("PHASEMETER_ADMIN_TOKEN"))
        .singleElement()
        .satisfies(
            v -> {
              assertThat(v.getValue()).isNull();
              assertThat(v.getValueFrom().getSecretKeyRef().getName())
                  .isEqualTo("phasemeter-admin");
              assertThat(v.getValueFrom().getSecretKeyRef().getKey()).isEqualTo("token");
            });
    assertThat(cfg.admin().token()).isEqualTo(README_TOKEN);
    assertThat(cfg.admin().open()).isFalse();
    Map<String, String> noToken = new java.util.HashMap<>(proxyEnvironment());
    noToken.remove("PHASEMETER_ADMIN_TOKEN");
    assertThatThrownBy(() -> proxyConfig(noToken))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("admin.token is empty");

    Container vllm = container(pod, "vllm");
    assertThat(vllm.getPorts()).isNullOrEmpty();
    assertThat(vllm.getArgs()).contains("--host=127.0.0.1", "--port=8000");
    ProxyConfig.Pool pool = cfg.pools().get(0);
    assertThat(pool.upstreams())
        .extracting(Object::toString)
        .containsExactly("http://127.0.0.1:8000");
    String model =
        vllm.getArgs().stream()
            .filter(a -> a.startsWith("--model="))
            .findFirst()
            .orElseThrow()
            .substring("--model=".length());
    assertThat(pool.models()).containsExactly(model);
    String maxSeqs =
        vllm.getArgs().stream()
            .filter(a -> a.startsWith("--max-num-seqs="))
            .findFirst()
            .orElseThrow()
            .substring("--max-num-seqs=".length());
    assertThat(pool.slots())
        .as("waiting happens in the proxy's queue phase, not inside vLLM")
        .isLessThanOrEqualTo(Integer.parseInt(maxSeqs));
  }

  @Test
  void probesAskTheAdminPortsHealthEndpoints() throws Exception {
    Container proxy = container(pod(), "proxy");
    assertThat(proxy.getReadinessProbe().getHttpGet().getPath()).isEqualTo("/health/ready");
    assertThat(proxy.getReadinessProbe().getHttpGet().getPort().getStrVal()).isEqualTo("admin");
    assertThat(proxy.getLivenessProbe().getHttpGet().getPath()).isEqualTo("/health/live");
    assertThat(proxy.getLivenessProbe().getHttpGet().getPort().getStrVal()).isEqualTo("admin");
  }

  @Test
  void theServiceExposesProxyPortsAndTheServiceMonitorScrapesAdminMetrics() throws Exception {
    Service svc = read("service.yaml", Service.class);
    Deployment d = read("deployment.yaml", Deployment.class);
    assertThat(svc.getSpec().getSelector()).isEqualTo(d.getSpec().getSelector().getMatchLabels());
    assertThat(svc.getSpec().getPorts())
        .extracting(ServicePort::getName, ServicePort::getPort, p -> p.getTargetPort().getStrVal())
        .containsExactly(
            org.assertj.core.groups.Tuple.tuple("http", 8080, "http"),
            org.assertj.core.groups.Tuple.tuple("admin", 9464, "admin"));

    ServiceMonitor sm = read("servicemonitor.yaml", ServiceMonitor.class);
    assertThat(sm.getSpec().getSelector().getMatchLabels())
        .isEqualTo(svc.getMetadata().getLabels());
    Endpoint e = sm.getSpec().getEndpoints().get(0);
    assertThat(e.getPort()).isEqualTo("admin");
    assertThat(e.getPath()).isEqualTo("/metrics");
    assertThat(e.getAuthorization().getType()).isEqualTo("Bearer");
    // The Secret the README's command creates.
    assertThat(e.getAuthorization().getCredentials().getName()).isEqualTo("phasemeter-admin");
    assertThat(e.getAuthorization().getCredentials().getKey()).isEqualTo("token");
    assertThat(e.getAuthorization().getCredentials().getOptional()).isNotEqualTo(Boolean.TRUE);
    // Prometheus presents the very token the proxy is given.
    var proxyToken =
        container(pod(), "proxy").getEnv().stream()
            .filter(v -> v.getName().equals("PHASEMETER_ADMIN_TOKEN"))
            .findFirst()
            .orElseThrow()
            .getValueFrom()
            .getSecretKeyRef();
    assertThat(e.getAuthorization().getCredentials().getName()).isEqualTo(proxyToken.getName());
    assertThat(e.getAuthorization().getCredentials().getKey()).isEqualTo(proxyToken.getKey());
  }

  @Test
  void theConfigMapCarriesTheRepositorysBudgetsAndAValidProxyConfig() throws Exception {
    ConfigMap cm = read("proxy-config.yaml", ConfigMap.class);
    assertThat(cm.getData().get("budgets.yaml"))
        .as("proxy-config.yaml's budgets.yaml must equal config/budgets.yaml")
        .isEqualTo(Files.readString(BUDGETS));
    assertThat(proxyConfig().budgets()).isEqualTo("/config/budgets.yaml");
    assertThat(Budgets.parse(cm.getData().get("budgets.yaml"), "cm").budgets()).isNotEmpty();
  }

  @Test
  void thePrometheusRuleIsGeneratedFromTheBudgetsAndHoldsTheSameRulesAsAlertsYaml()
      throws Exception {
    Budgets budgets = Budgets.load(BUDGETS);
    assertThat(Files.readString(DIR.resolve("prometheusrule.yaml")))
        .as(
            "config/kubernetes/prometheusrule.yaml no longer matches config/budgets.yaml: run"
                + " ./phasemeter alerts --budgets config/budgets.yaml --kubernetes --out"
                + " config/kubernetes/prometheusrule.yaml")
        .isEqualTo(AlertRules.renderPrometheusRule(budgets, "config/budgets.yaml"));
    PrometheusRule pr = read("prometheusrule.yaml", PrometheusRule.class);
    assertThat(pr.getSpec().getGroups()).hasSize(1);
    List<Rule> rules = pr.getSpec().getGroups().get(0).getRules();
    List<AlertRule> expected = AlertRules.rules(budgets);
    assertThat(rules)
        .extracting(Rule::getAlert)
        .containsExactlyElementsOf(expected.stream().map(AlertRule::alert).toList());
    assertThat(rules.stream().map(r -> r.getExpr().getStrVal()).toList())
        .containsExactlyElementsOf(AlertRules.expressions(Path.of("../dashboards/alerts.yaml")));
  }

  @Test
  void theSharedLimitsRedisIsWhereTheCommentedConfigPointsAndItsServiceSelectsIt()
      throws Exception {
    Deployment redis = read("redis-deployment.yaml", Deployment.class);
    Service service = read("redis-service.yaml", Service.class);
    assertThat(service.getSpec().getSelector())
        .isEqualTo(redis.getSpec().getTemplate().getMetadata().getLabels());
    assertThat(service.getSpec().getPorts().get(0).getPort()).isEqualTo(6379);
    String proxyYaml = read("proxy-config.yaml", ConfigMap.class).getData().get("proxy.yaml");
    assertThat(proxyYaml)
        .contains("redis://" + service.getMetadata().getName() + ":6379")
        .contains("password_env: REDIS_PASSWORD");
    // The commented block, uncommented, is a valid configuration.
    StringBuilder uncommented = new StringBuilder();
    boolean in = false;
    for (String line : proxyYaml.split("\n")) {
      if (line.startsWith("# auth:")) {
        in = true;
      }
      if (in) {
        uncommented.append(line.replaceFirst("^# ?", "")).append('\n');
      }
    }
    String pools =
        "pools:\n  - {name: default, models: [m], upstreams: ['http://127.0.0.1:8000']}\n";
    ProxyConfig c =
        io.phasemeter.proxy.config.ConfigLoader.parse(pools + uncommented, "proxy-config.yaml");
    assertThat(c.auth().sharedLimits().enabled()).isTrue();
    assertThat(c.auth().sharedLimits().endpoints())
        .containsExactly("redis://phasemeter-redis:6379");
  }

  @Test
  void theLoadJobRunsInParallelAndWritesOneDirectoryPerInstance() throws Exception {
    Job job = read("load-job.yaml", Job.class);
    assertThat(job.getSpec().getParallelism()).isGreaterThan(1);
    assertThat(job.getSpec().getCompletionMode()).isEqualTo("Indexed");
    Container load = job.getSpec().getTemplate().getSpec().getContainers().get(0);
    String cmd = String.join(" ", load.getCommand()) + " " + String.join(" ", load.getArgs());
    assertThat(cmd)
        .contains("phasemeter-load.jar", " run ", "--url http://phasemeter-vllm:8080")
        .contains("--admin-discover dns://" + adminService().getMetadata().getName() + ":9464")
        .contains("--out /results/$(JOB_COMPLETION_INDEX)");
    // --admin-token $(ADMIN_TOKEN): the proxy's token, from the same Secret.
    assertThat(load.getArgs()).containsSubsequence("--admin-token", "$(ADMIN_TOKEN)");
    assertThat(load.getEnv())
        .filteredOn(v -> v.getName().equals("ADMIN_TOKEN"))
        .singleElement()
        .satisfies(KubernetesManifestsTest::assertIsTheReadmesAdminSecret);
  }

  /**
   * The headless Service the load client resolves to every pod's admin listener: no cluster IP (a
   * name with one address per pod, not a balanced one), the inference pods, their admin port.
   */
  @Test
  void theAdminServiceIsHeadlessAndResolvesToEveryInferencePodsAdminPort() throws Exception {
    Service admin = adminService();
    Deployment d = read("deployment.yaml", Deployment.class);
    assertThat(admin.getSpec().getClusterIP()).isEqualTo("None");
    assertThat(admin.getSpec().getSelector()).isEqualTo(d.getSpec().getSelector().getMatchLabels());
    assertThat(admin.getSpec().getPorts())
        .extracting(ServicePort::getName, ServicePort::getPort, p -> p.getTargetPort().getStrVal())
        .containsExactly(org.assertj.core.groups.Tuple.tuple("admin", 9464, "admin"));
    assertThat(pod().getContainers().stream().flatMap(c -> c.getPorts().stream()))
        .anySatisfy(
            p -> {
              assertThat(p.getName()).isEqualTo("admin");
              assertThat(p.getContainerPort()).isEqualTo(9464);
            });
    // Not the ServiceMonitor's: Prometheus scrapes through service.yaml, once per pod already.
    ServiceMonitor sm = read("servicemonitor.yaml", ServiceMonitor.class);
    assertThat(sm.getSpec().getSelector().getMatchLabels())
        .isNotEqualTo(admin.getMetadata().getLabels());
  }

  private static Service adminService() throws Exception {
    return read("admin-service.yaml", Service.class);
  }

  /** The capacity search's Job, in a subdirectory that {@code kubectl apply -f DIR/} skips. */
  static final String SEARCH_JOB = "search/capacity-search-job.yaml";

  /** The value following {@code flag} in {@code args}. */
  private static String arg(List<String> args, String flag) {
    int i = args.indexOf(flag);
    assertThat(i).as("%s in %s", flag, args).isNotNegative().isLessThan(args.size() - 1);
    return args.get(i + 1);
  }

  @Test
  void theCapacitySearchJobIsOneInstanceAgainstWhatTheLoadJobUses() throws Exception {
    Job search = read(SEARCH_JOB, Job.class);
    Job load = read("load-job.yaml", Job.class);
    assertThat(search.getSpec().getParallelism()).isEqualTo(1);
    assertThat(search.getSpec().getCompletions()).isEqualTo(1);
    assertThat(search.getSpec().getCompletionMode()).isNull();
    assertThat(search.getSpec().getBackoffLimit()).isZero();
    assertThat(search.getMetadata().getName()).isNotEqualTo(load.getMetadata().getName());
    PodSpec pod = search.getSpec().getTemplate().getSpec();
    PodSpec loadPod = load.getSpec().getTemplate().getSpec();
    assertThat(pod.getRestartPolicy()).isEqualTo("Never");
    Container c = pod.getContainers().get(0);
    Container l = loadPod.getContainers().get(0);
    assertThat(pod.getContainers()).hasSize(1);
    assertThat(c.getImage()).isEqualTo(l.getImage());
    assertThat(c.getCommand()).isEqualTo(l.getCommand());
    List<String> args = c.getArgs();
    assertThat(args.get(0)).isEqualTo("search");
    // The same Service, admin Service, token, model and budgets as the load Job.
    for (String flag :
        List.of("--url", "--admin-discover", "--admin-token", "--model", "--budgets")) {
      assertThat(arg(args, flag)).as(flag).isEqualTo(arg(l.getArgs(), flag));
    }
    assertThat(arg(args, "--slo")).isNotBlank();
    assertThat(args).contains("--max-rate", "--max-duration");
    assertThat(c.getEnv())
        .filteredOn(v -> v.getName().equals("ADMIN_TOKEN"))
        .singleElement()
        .satisfies(KubernetesManifestsTest::assertIsTheReadmesAdminSecret);
    // Its output on the results volume, beside the load Job's; the budgets from the ConfigMap.
    assertThat(pod.getVolumes()).isEqualTo(loadPod.getVolumes());
    assertThat(c.getVolumeMounts()).isEqualTo(l.getVolumeMounts());
    assertThat(arg(args, "--out")).startsWith("/results/");
    assertThat(arg(args, "--budgets")).startsWith("/config/");
    // --max-duration fits under the Job's deadline.
    long maxDuration =
        io.phasemeter.core.Durations.parsePositive("--max-duration", arg(args, "--max-duration"))
            .toSeconds();
    assertThat(search.getSpec().getActiveDeadlineSeconds()).isGreaterThan(maxDuration);
    // kubectl apply -f config/kubernetes/ does not descend into search/: the README says how to
    // start one.
    assertThat(Files.readString(README)).contains("kubectl apply -f config/kubernetes/search/");
    assertThat(Files.readString(DIR.resolve(SEARCH_JOB)))
        .contains("kubectl apply -f config/kubernetes/search/");
  }

  @Test
  void noUsableTokenShipsTheReadmeCreatesTheSecretBeforeApplying() throws Exception {
    // A Secret in the directory would be the same token in every cluster that applied it, and
    // kubectl apply -f config/kubernetes/ would write it over the one created by hand.
    for (Path f : files().stream().map(DIR::resolve).toList()) {
      for (var doc :
          YAML.readerFor(Map.class)
              .<Map<String, Object>>readValues(Files.readString(f))
              .readAll()) {
        assertThat(doc.get("kind")).as(f.toString()).isNotEqualTo("Secret");
      }
    }
    // No container is handed a secret as a literal value.
    List<Container> containers = new java.util.ArrayList<>(pod().getContainers());
    containers.addAll(
        read("load-job.yaml", Job.class).getSpec().getTemplate().getSpec().getContainers());
    containers.addAll(
        read(SEARCH_JOB, Job.class).getSpec().getTemplate().getSpec().getContainers());
    containers.addAll(
        read("redis-deployment.yaml", Deployment.class)
            .getSpec()
            .getTemplate()
            .getSpec()
            .getContainers());
    for (Container c : containers) {
      for (EnvVar v : c.getEnv() == null ? List.<EnvVar>of() : c.getEnv()) {
        if (v.getName().matches("(?i).*(TOKEN|PASSWORD|SECRET|KEY).*")) {
          assertThat(v.getValue()).as("%s in %s", v.getName(), c.getName()).isNull();
          assertThat(v.getValueFrom().getSecretKeyRef()).isNotNull();
        }
      }
    }
    String readme = Files.readString(README);
    assertThat(readme).contains(CREATE_ADMIN_SECRET);
    assertThat(readme.indexOf(CREATE_ADMIN_SECRET))
        .as("the Secret is created before the manifests are applied")
        .isLessThan(readme.indexOf("kubectl apply -f config/kubernetes/"));
    // What the removed secret.yaml shipped stops the proxy now.
    Map<String, String> shipped = new java.util.HashMap<>(proxyEnvironment());
    shipped.put("PHASEMETER_ADMIN_TOKEN", "change-me");
    assertThatThrownBy(() -> proxyConfig(shipped))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("admin.token: looks like a placeholder");
  }
}
