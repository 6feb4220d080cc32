package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Vertx;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;

/**
 * The join across a fleet (issue 35): three {@code phasemeter proxy} processes behind nginx
 * round-robin, as behind a Kubernetes Service, the load client given every replica's admin (by URL,
 * then by a name that resolves to all three) joins every request, and each replica's part is what
 * nginx says it served; one replica killed mid-run: its unfinished requests fail at the client, it
 * is reported down, and the run ends on time. The fleet is shared by the tests; the kill comes
 * last.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class FleetJoinTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int REPLICAS = 3;

  @TempDir static Path dir;
  private Vertx vertx;
  private ProxyFleet fleet;

  @BeforeAll
  void start() throws Exception {
    Assumptions.assumeTrue(ProxyFleet.nginxPresent(), "nginx is not installed");
    vertx = Vertx.vertx();
    // About 40 ms a request (8 decode steps of 5 ms): a few requests in flight on each replica.
    Simulator sim =
        Simulator.start(
                vertx,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(64)
                    .withDecodeStepMs(5)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(1_000_000))
            .await(10, TimeUnit.SECONDS);
    fleet = ProxyFleet.start(dir, REPLICAS, sim.port());
    fleet.warmUp(90);
  }

  @AfterAll
  void stop() throws Exception {
    if (fleet != null) {
      fleet.close();
    }
    if (vertx != null) {
      vertx.close().await(10, TimeUnit.SECONDS);
    }
  }

  private List<String> runArgs(Path out, String duration, int concurrency) {
    return new ArrayList<>(
        List.of(
            "run",
            "--url",
            fleet.url(),
            "--model",
            "sim-llama",
            "--api",
            "chat",
            "--output-tokens",
            "8",
            "--concurrency",
            Integer.toString(concurrency),
            "--duration",
            duration,
            "--report-interval",
            "1s",
            "--out",
            out.toString()));
  }

  /** The load client in this JVM, as the other tests run it; its exit code. */
  private int runHere(List<String> args, StringWriter out) {
    StringWriter err = new StringWriter();
    int code =
        LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
            .execute(RunArgs.quiet(args));
    out.append(err.toString());
    return code;
  }

  @Test
  @Order(1)
  void threeAdminsJoinEveryRequestAndEachReplicasPartIsWhatItServed() throws Exception {
    Path out = dir.resolve("three-admins");
    List<String> args = runArgs(out, "3s", 9);
    for (ProxyFleet.Replica r : fleet.replicas) {
      args.addAll(List.of("--admin", r.adminUrl()));
    }
    StringWriter log = new StringWriter();
    int code = runHere(args, log);
    System.out.println(log);
    assertThat(code).as(log.toString()).isZero();
    JsonNode s = JSON.readTree(out.resolve("summary.json").toFile());
    assertEveryRequestJoinedWhereNginxSentIt(s, log.toString());
    assertThat(log.toString()).contains("replica " + fleet.replicas.get(2).name());
    assertThat(Files.readString(out.resolve("report.html"))).contains("<h2>Replicas</h2>");
  }

  /**
   * The DNS form: one name with three loopback addresses (a hosts file given to the JVM with {@code
   * -Djdk.net.hosts.file}, as a headless Service's name has one address per ready pod), the load
   * client in a JVM of its own (the JDK reads that property once, at start).
   */
  @Test
  @Order(2)
  void oneNameResolvingToEveryReplicaJoinsEveryRequest() throws Exception {
    Path hosts = dir.resolve("hosts");
    StringBuilder h = new StringBuilder();
    for (ProxyFleet.Replica r : fleet.replicas) {
      h.append(r.adminHost()).append(" phasemeter-admin.fleet.test\n");
    }
    Files.writeString(hosts, h.toString());
    Path out = dir.resolve("dns");
    List<String> args = runArgs(out, "3s", 9);
    args.addAll(
        List.of("--admin-discover", "dns://phasemeter-admin.fleet.test:" + fleet.adminPort));
    List<String> cmd =
        new ArrayList<>(
            List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Djdk.net.hosts.file=" + hosts,
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-cp",
                System.getProperty("java.class.path"),
                "io.phasemeter.load.LoadMain"));
    cmd.addAll(List.of(RunArgs.quiet(args)));
    Path log = dir.resolve("dns.log");
    Process p =
        new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    assertThat(p.waitFor(120, TimeUnit.SECONDS)).as("the run ends").isTrue();
    String text = Files.readString(log);
    System.out.println(text);
    assertThat(p.exitValue()).as(text).isZero();
    JsonNode s = JSON.readTree(out.resolve("summary.json").toFile());
    assertEveryRequestJoinedWhereNginxSentIt(s, text);
    assertThat(s.at("/conditions/admin_url").asText())
        .isEqualTo("dns://phasemeter-admin.fleet.test:" + fleet.adminPort);
  }

  /**
   * Coverage 1.000; the replicas are the three admins by name, all up; the sum of their joined is
   * the run's joined; and each replica's joined is exactly the requests nginx's log says that
   * replica served (the truth, from outside both the client and the proxies).
   */
  private void assertEveryRequestJoinedWhereNginxSentIt(JsonNode s, String log) throws Exception {
    long ok = s.at("/requests/ok").asLong();
    assertThat(ok).as(log).isPositive();
    assertThat(s.at("/requests/errors").asLong()).as(log).isZero();
    assertThat(s.get("join_coverage").asDouble()).as(log).isEqualTo(1.0);
    JsonNode replicas = s.at("/join/replicas");
    assertThat(replicas).hasSize(REPLICAS);
    String prefix = s.at("/conditions/trace_id_prefix").asText();
    Map<String, Long> served = new HashMap<>();
    for (ProxyFleet.Logged l : fleet.logged(prefix).values()) {
      assertThat(l.status()).isEqualTo(200);
      served.merge(fleet.byPort(l.proxyPort()).name(), 1L, Long::sum);
    }
    assertThat(served.values().stream().mapToLong(Long::longValue).sum()).isEqualTo(ok);
    long sum = 0;
    for (JsonNode r : replicas) {
      String name = r.get("replica").asText();
      assertThat(r.get("state").asText()).as(name).isEqualTo("up");
      assertThat(r.get("joined").asLong()).as(name).isEqualTo(served.get(name));
      assertThat(r.get("share").asDouble())
          .as(name)
          .isEqualTo((double) served.get(name) / ok, org.assertj.core.data.Offset.offset(1e-9));
      sum += r.get("joined").asLong();
    }
    assertThat(sum).isEqualTo(s.at("/join/joined").asLong()).isEqualTo(ok);
    assertThat(served.keySet())
        .containsExactlyInAnyOrderElementsOf(
            fleet.replicas.stream().map(ProxyFleet.Replica::name).toList());
  }

  /**
   * Replica 2 is killed (SIGKILL) while requests are in flight on it: the requests it held fail at
   * the client (nginx answers 502), never counted as successes; its feed is reported down with the
   * others up; every success is joined but those whose records died with the replica; the run ends
   * in bounded time.
   */
  @Test
  @Order(3)
  void aReplicaKilledMidRunFailsItsRequestsAndIsReportedDown() throws Exception {
    Path out = dir.resolve("killed");
    List<String> args = runArgs(out, "4s", 12);
    for (ProxyFleet.Replica r : fleet.replicas) {
      args.addAll(List.of("--admin", r.adminUrl()));
    }
    args.addAll(List.of("--max-error-rate", "50%", "--timeout", "10s"));
    StringWriter log = new StringWriter();
    ProxyFleet.Replica victim = fleet.replicas.get(2);
    int code =
        assertTimeoutPreemptively(
            Duration.ofSeconds(90),
            () -> {
              CompletableFuture<Integer> run =
                  CompletableFuture.supplyAsync(() -> runHere(args, log));
              // Killed once the run is under way and the victim has served some of it (nginx's log
              // says so): its feed then has records to attribute, and requests are in flight on it.
              long before = fleet.served(victim);
              Awaitility.await()
                  .atMost(Duration.ofSeconds(60))
                  .pollInterval(Duration.ofMillis(20))
                  .until(() -> fleet.served(victim) >= before + 3 || run.isDone());
              assertThat(run.isDone())
                  .as("the run is still going when the replica is killed")
                  .isFalse();
              fleet.kill(2);
              return run.get();
            });
    System.out.println(log);
    assertThat(code).as(log.toString()).isZero();
    JsonNode s = JSON.readTree(out.resolve("summary.json").toFile());
    long sent = s.at("/requests/sent").asLong();
    long ok = s.at("/requests/ok").asLong();
    long errors = s.at("/requests/errors").asLong();
    assertThat(ok + errors).isEqualTo(sent);
    assertThat(errors).as("the requests the killed replica held").isPositive();
    // Every request nginx answered with an error is a failure at the client, never a success.
    String prefix = s.at("/conditions/trace_id_prefix").asText();
    Map<String, ProxyFleet.Logged> logged = fleet.logged(prefix);
    Map<String, String> classes = pairClasses(out.resolve("pairs.csv"));
    long bad = 0;
    for (ProxyFleet.Logged l : logged.values()) {
      if (l.status() >= 500) {
        bad++;
        assertThat(classes.get(l.traceId())).as(l.traceId()).isNotNull().isNotEqualTo("NONE");
      }
    }
    assertThat(bad).as("nginx answered the killed replica's requests 502").isPositive();
    assertThat(bad).isLessThanOrEqualTo(errors);
    JsonNode replicas = s.at("/join/replicas");
    assertThat(replicas).hasSize(REPLICAS);
    long sum = 0;
    for (JsonNode r : replicas) {
      boolean killed = r.get("replica").asText().equals(victim.name());
      assertThat(r.get("state").asText()).isEqualTo(killed ? "down" : "up");
      assertThat(r.get("joined").asLong()).isPositive();
      sum += r.get("joined").asLong();
    }
    assertThat(sum).isEqualTo(s.at("/join/joined").asLong());
    // Every success joined, but one whose response the killed replica finished and whose record
    // it had not yet published when it was killed (seen: 1 of 724): such a record is gone with it.
    // So every unjoined success is one nginx says the killed replica served, at most the requests
    // in flight.
    Map<String, Boolean> joined = pairJoined(out.resolve("pairs.csv"));
    long lost = 0;
    for (Map.Entry<String, String> c : classes.entrySet()) {
      if (c.getValue().equals("NONE") && !joined.get(c.getKey())) {
        lost++;
        assertThat(logged.get(c.getKey()).proxyPort()).as(c.getKey()).isEqualTo(victim.port());
      }
    }
    assertThat(lost).isLessThanOrEqualTo(12);
    assertThat(s.get("join_coverage").asDouble()).isEqualTo((double) (ok - lost) / ok);
    assertThat(log.toString()).containsPattern("replica " + victim.name() + " +joined .*down");
  }

  /** pairs.csv's joined column by trace id. */
  private static Map<String, Boolean> pairJoined(Path csv) throws Exception {
    List<String> lines = Files.readAllLines(csv);
    List<String> header = io.phasemeter.load.report.RunMerge.splitCsv(lines.get(0));
    int trace = header.indexOf("trace_id");
    int joined = header.indexOf("joined");
    Map<String, Boolean> out = new HashMap<>();
    for (String line : lines.subList(1, lines.size())) {
      List<String> f = io.phasemeter.load.report.RunMerge.splitCsv(line);
      out.put(f.get(trace), Boolean.parseBoolean(f.get(joined)));
    }
    return out;
  }

  /** pairs.csv's error class by trace id. */
  private static Map<String, String> pairClasses(Path csv) throws Exception {
    List<String> lines = Files.readAllLines(csv);
    List<String> header = io.phasemeter.load.report.RunMerge.splitCsv(lines.get(0));
    int trace = header.indexOf("trace_id");
    int cls = header.indexOf("class");
    Map<String, String> out = new HashMap<>();
    for (String line : lines.subList(1, lines.size())) {
      List<String> f = io.phasemeter.load.report.RunMerge.splitCsv(line);
      out.put(f.get(trace), f.get(cls));
    }
    return out;
  }
}
