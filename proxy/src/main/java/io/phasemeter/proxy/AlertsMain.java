package io.phasemeter.proxy;

import io.phasemeter.proxy.budget.AlertRules;
import io.phasemeter.proxy.budget.Budgets;
import io.phasemeter.proxy.config.ConfigException;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code phasemeter alerts}: renders Prometheus alerting rules from budgets.yaml. */
@Command(
    name = "phasemeter alerts",
    mixinStandardHelpOptions = true,
    versionProvider = ProxyMain.Version.class,
    description = {
      "Renders Prometheus alerting rules from the budgets file (one group, phasemeter-budgets).",
      "For each budget: one alert per server-side phase it limits (the share of requests above"
          + " the limit, read from the bucket whose le is the limit, over its window, per pool,"
          + " across all proxy replicas, above 1 - quantile; with slo_period, a fast-burn page and"
          + " a slow-burn ticket instead) and one alert on its error rate. Client-only phases (network_envelope, ttft_envelope,"
          + " client_total, client_ttft, transport_setup, schedule_lag) are judged by"
          + " 'phasemeter load --budgets' and only noted in a comment.",
      "A budget with slo_ms and min_attainment also gets Phasemeter<Budget>AttainmentBreached: the share of"
          + " the requests the proxy judged under it that met every objective"
          + " (llm_slo_requests_total), per tenant and pool (by llm_tenant, llm_pool), over its"
          + " window, below min_attainment; with slo_period, a fast-burn page and a slow-burn"
          + " ticket over the error budget 1 - min_attainment. A budget with a tenant selects"
          + " llm_tenant=\"<tenant>\" in every rule.",
      "The repository keeps the output for config/budgets.yaml in dashboards/alerts.yaml; a test"
          + " fails when the two drift apart."
    },
    footer = {
      "",
      "Example:",
      "  phasemeter alerts --budgets config/budgets.yaml --out dashboards/alerts.yaml",
      "  phasemeter alerts --budgets config/budgets.yaml --kubernetes"
          + " --out config/kubernetes/prometheusrule.yaml",
      "",
      "Exit codes: 0 written, 1 cannot write the output, 2 bad usage or a bad budgets file."
    },
    exitCodeOnInvalidInput = 2)
public final class AlertsMain implements Callable<Integer> {

  @Option(
      names = {"-b", "--budgets"},
      paramLabel = "FILE",
      description = "budgets file (default: ${DEFAULT-VALUE})",
      defaultValue = "config/budgets.yaml")
  Path budgets;

  @Option(
      names = {"-o", "--out"},
      paramLabel = "FILE",
      description = "write the rules here instead of to standard output")
  Path out;

  @Option(
      names = "--kubernetes",
      description =
          "write a Prometheus Operator PrometheusRule manifest (monitoring.coreos.com/v1)"
              + " holding the same rules; the repository keeps it in"
              + " config/kubernetes/prometheusrule.yaml")
  boolean kubernetes;

  private final PrintWriter stdout;
  private final PrintWriter stderr;

  AlertsMain(PrintWriter stdout, PrintWriter stderr) {
    this.stdout = stdout;
    this.stderr = stderr;
  }

  public static void main(String[] args) {
    PrintWriter out = new PrintWriter(System.out, true, StandardCharsets.UTF_8);
    PrintWriter err = new PrintWriter(System.err, true, StandardCharsets.UTF_8);
    int code = commandLine(out, err).execute(args);
    out.flush();
    if (code != 0) {
      System.exit(code);
    }
  }

  /** The command line, writing to the given streams (tests use it). */
  public static CommandLine commandLine(PrintWriter out, PrintWriter err) {
    CommandLine cl = new CommandLine(new AlertsMain(out, err));
    cl.setOut(out);
    cl.setErr(err);
    return cl;
  }

  @Override
  public Integer call() {
    Budgets loaded;
    String rules;
    try {
      loaded = Budgets.load(budgets);
      rules =
          kubernetes
              ? AlertRules.renderPrometheusRule(loaded, budgets.toString())
              : AlertRules.render(loaded, budgets.toString());
    } catch (ConfigException e) {
      stderr.println("phasemeter alerts: " + e.getMessage());
      return 2;
    }
    if (out == null) {
      stdout.print(rules);
      stdout.flush();
      return 0;
    }
    try {
      Path parent = out.toAbsolutePath().getParent();
      if (parent != null) {
        Files.createDirectories(parent);
      }
      Files.writeString(out, rules, StandardCharsets.UTF_8);
    } catch (IOException e) {
      stderr.println("phasemeter alerts: cannot write " + out + " (" + e.getMessage() + ")");
      return 1;
    }
    stderr.println(
        "phasemeter alerts: wrote " + AlertRules.rules(loaded).size() + " rules to " + out);
    return 0;
  }
}
