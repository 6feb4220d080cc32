package io.phasemeter.load;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.phasemeter.load.http.Transport;
import io.phasemeter.load.join.Admins;
import io.phasemeter.load.join.ReplicaFeeds;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.Writer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** {@code phasemeter load join-k6 RUN.json --admin URL [--admin URL …] [--admin-discover …]}. */
@Command(
    name = "join-k6",
    mixinStandardHelpOptions = true,
    description = {
      "Joins a k6 run of config/k6/phase-envelope.js with the proxy's records: reads the trace id"
          + " of every request from k6's JSON output (k6 run --out json=RUN.json; the script puts"
          + " it on each sample as metadata), fetches each record from the admin listener"
          + " (/admin/records/{traceId}; kept 10 minutes by default) of every replica given"
          + " (--admin, repeatable; --admin-discover dns://NAME:PORT resolves a name to every"
          + " replica's address) and computes per request"
          + " network_envelope = k6's http_req_duration - the proxy's root. Quantiles are taken"
          + " over those per-request differences, for joined successful requests; a negative"
          + " envelope is counted, never clipped.",
      "",
      "Writes k6-join.csv (one row per request, no bodies, the replica whose record joined it)"
          + " into --out and prints the join coverage, each replica's part and the envelope's"
          + " p50/p95/p99.",
      "",
      "Exit codes: 0 every request joined; 4 some request has no record (listed, at most 10);"
          + " 2 bad usage or a file that is not k6 JSON output with trace ids."
    },
    exitCodeOnInvalidInput = 2)
final class K6JoinCommand implements Callable<Integer> {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern TRACE_ID = Pattern.compile("[0-9a-f]{32}");
  private static final int LISTED = 10;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Parameters(paramLabel = "RUN.json", description = "k6's JSON output (--out json=RUN.json)")
  Path input;

  @Option(
      names = "--admin",
      paramLabel = "URL",
      description =
          "the proxy's admin URL, e.g. http://127.0.0.1:9464; repeatable, one per replica")
  List<String> admins = new ArrayList<>();

  @Option(
      names = "--admin-discover",
      paramLabel = "dns://NAME:PORT",
      description = "every replica's admin address from a name (a Kubernetes headless Service)")
  String adminDiscover;

  @Option(names = "--admin-token", paramLabel = "TOKEN", description = "admin bearer token")
  String adminToken;

  @Option(
      names = "--ca-file",
      paramLabel = "FILE",
      description =
          "PEM certificates to trust INSTEAD of the platform's trust store when --admin is https"
              + " (the proxy's admin.tls), as load run")
  Path caFile;

  @Option(
      names = "--insecure",
      description =
          "with an https --admin, verify neither its certificate nor its name (a warning)")
  boolean insecure;

  @Option(
      names = "--out",
      paramLabel = "DIR",
      description = "where k6-join.csv goes (default: phasemeter-out/join-k6-<time>)")
  Path out;

  /** One request of the k6 run. */
  record K6Request(String traceId, int status, double durationMs) {}

  /** One request and the proxy's record of it, if found, with the replica that had it. */
  record Joined(K6Request k6, boolean found, String outcome, double rootMs, String replica) {
    double envelopeMs() {
      return found ? k6.durationMs() - rootMs : Double.NaN;
    }

    boolean ok() {
      return found && k6.status() / 100 == 2 && "success".equals(outcome);
    }
  }

  @Override
  public Integer call() {
    PrintWriter stdout = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    List<K6Request> requests;
    List<URI> replicas;
    Transport transport;
    try {
      transport = Transport.of(caFile, insecure, false);
      Admins a = Admins.parse(admins, adminDiscover);
      if (a == null) {
        throw new IllegalArgumentException("give --admin URL (repeatable) or --admin-discover");
      }
      replicas = replicas(a, ReplicaFeeds.JDK);
      requests = read(input);
    } catch (IOException | IllegalArgumentException e) {
      err.println("phasemeter load join-k6: " + e.getMessage());
      return 2;
    }
    if (requests.isEmpty()) {
      err.println(
          "phasemeter load join-k6: "
              + input
              + " holds no request with a trace id (run config/k6/phase-envelope.js with --out"
              + " json=FILE)");
      return 2;
    }
    if (insecure) {
      err.println(
          "phasemeter load join-k6: warning: --insecure: the admin listener's certificate and name"
              + " are not verified");
    }
    HttpClient http =
        transport.applyTrust(HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5))).build();
    List<Joined> joined = new ArrayList<>(requests.size());
    ReplicaLookup lookup = new ReplicaLookup(replicas);
    int done = 0;
    for (K6Request r : requests) {
      try {
        joined.add(lookup.find(http, r));
      } catch (IOException e) {
        err.println("phasemeter load join-k6: " + e.getMessage());
        return 2;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return 2;
      }
      if (++done % 1000 == 0) {
        stdout.println(
            "phasemeter load join-k6: " + done + " of " + requests.size() + " looked up");
        stdout.flush();
      }
    }
    Path dir = out == null ? LoadMain.defaultOut("join-k6") : out;
    try {
      write(dir.resolve("k6-join.csv"), joined);
    } catch (IOException e) {
      err.println("phasemeter load join-k6: cannot write " + dir + ": " + e.getMessage());
      return 2;
    }
    long found = joined.stream().filter(Joined::found).count();
    double[] envelopes =
        joined.stream().filter(Joined::ok).mapToDouble(Joined::envelopeMs).sorted().toArray();
    long negative = Arrays.stream(envelopes).filter(v -> v < 0).count();
    stdout.println(
        String.format(
            Locale.ROOT,
            "phasemeter load join-k6: %d requests, %d with a proxy record (join coverage %.1f%%)",
            requests.size(),
            found,
            100.0 * found / requests.size()));
    if (replicas.size() > 1) {
      Map<String, Long> byReplica = new LinkedHashMap<>();
      replicas.forEach(u -> byReplica.put(Admins.replicaName(u), 0L));
      joined.stream()
          .filter(Joined::found)
          .forEach(j -> byReplica.merge(j.replica(), 1L, Long::sum));
      byReplica.forEach(
          (name, n) ->
              stdout.println(
                  String.format(
                      Locale.ROOT,
                      "phasemeter load join-k6: replica %s: %d records (share %.1f%%)%s",
                      name,
                      n,
                      found == 0 ? 0.0 : 100.0 * n / found,
                      lookup.unreachable().contains(name) ? ", unreachable" : "")));
    }
    stdout.println(
        String.format(
            Locale.ROOT,
            "phasemeter load join-k6: network_envelope over %d joined successful requests: p50"
                + " %.2f ms, p95 %.2f ms, p99 %.2f ms, %d negative",
            envelopes.length,
            quantile(envelopes, 0.50),
            quantile(envelopes, 0.95),
            quantile(envelopes, 0.99),
            negative));
    stdout.println(
        "phasemeter load join-k6: written to " + dir.toAbsolutePath().resolve("k6-join.csv"));
    if (found < requests.size()) {
      stdout.println("phasemeter load join-k6: no record for " + (requests.size() - found) + ":");
      joined.stream()
          .filter(j -> !j.found())
          .limit(LISTED)
          .forEach(j -> stdout.println("  trace=" + j.k6().traceId()));
      return LoadRun.INVALID_RUN;
    }
    return 0;
  }

  /**
   * The requests of a k6 JSON output, in the order they first appear: each {@code
   * http_req_duration} point with a {@code trace_id} in its metadata (samples without one, such as
   * setup()'s, are skipped). A trace id that comes twice is an error: the join would be ambiguous.
   */
  static List<K6Request> read(Path file) throws IOException {
    Map<String, K6Request> byId = new LinkedHashMap<>();
    int lineNo = 0;
    try (BufferedReader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
      String line;
      while ((line = in.readLine()) != null) {
        lineNo++;
        if (line.isBlank()) {
          continue;
        }
        JsonNode s;
        try {
          s = JSON.readTree(line);
        } catch (JsonProcessingException e) {
          throw new IllegalArgumentException(
              file + " line " + lineNo + " is not JSON: is it k6's --out json output?");
        }
        if (!"Point".equals(s.path("type").asText())
            || !"http_req_duration".equals(s.path("metric").asText())) {
          continue;
        }
        JsonNode data = s.path("data");
        String id = data.at("/metadata/trace_id").asText(null);
        if (id == null) {
          continue;
        }
        if (!TRACE_ID.matcher(id).matches()) {
          throw new IllegalArgumentException(
              file + " line " + lineNo + ": trace_id '" + id + "' is not 32 hex digits");
        }
        K6Request r =
            new K6Request(id, data.at("/tags/status").asInt(0), data.path("value").asDouble());
        if (byId.putIfAbsent(id, r) != null) {
          throw new IllegalArgumentException(
              file + " line " + lineNo + ": trace id " + id + " appears twice");
        }
      }
    }
    return new ArrayList<>(byId.values());
  }

  /** The admin URLs given and every address the name resolves to, at most 256. */
  static List<URI> replicas(Admins a, ReplicaFeeds.Resolver resolver) {
    List<URI> all = new ArrayList<>(a.urls());
    if (a.discovers()) {
      try {
        for (java.net.InetAddress addr : resolver.resolve(a.discoverHost())) {
          String host = addr.getHostAddress();
          host =
              addr instanceof java.net.Inet6Address ? "[" + host.replaceAll("%.*", "") + "]" : host;
          URI u = URI.create("http://" + host + ":" + a.discoverPort());
          if (!all.contains(u)) {
            all.add(u);
          }
        }
      } catch (java.net.UnknownHostException e) {
        throw new IllegalArgumentException(
            "--admin-discover " + a.discoverText() + ": it does not resolve");
      }
    }
    if (all.isEmpty()) {
      throw new IllegalArgumentException("--admin-discover " + a.discoverText() + ": no address");
    }
    return all.size() > ReplicaFeeds.MAX_REPLICAS ? all.subList(0, ReplicaFeeds.MAX_REPLICAS) : all;
  }

  /**
   * Looks each trace id up on the replicas, first on the one that had the last record (a k6 run
   * through one replica asks it alone); a replica that refuses the connection is asked no more.
   */
  private final class ReplicaLookup {
    private final List<URI> replicas;
    private final java.util.Set<String> unreachable = new java.util.LinkedHashSet<>();
    private int last;

    ReplicaLookup(List<URI> replicas) {
      this.replicas = replicas;
    }

    java.util.Set<String> unreachable() {
      return unreachable;
    }

    Joined find(HttpClient http, K6Request r) throws IOException, InterruptedException {
      IOException failed = null;
      for (int k = 0; k < replicas.size(); k++) {
        int i = (last + k) % replicas.size();
        URI admin = replicas.get(i);
        String name = Admins.replicaName(admin);
        if (unreachable.contains(name)) {
          continue;
        }
        try {
          Joined j = fetch(http, admin, name, r);
          if (j.found()) {
            last = i;
            return j;
          }
        } catch (java.net.ConnectException | java.net.http.HttpConnectTimeoutException e) {
          // Refused, or no answer to the connect at all (a deleted pod's address): asked no more.
          unreachable.add(name);
          failed = new IOException("cannot reach " + admin + ": " + e.getMessage(), e);
        }
      }
      if (unreachable.size() == replicas.size()) {
        throw failed != null ? failed : new IOException("no replica can be reached");
      }
      return new Joined(r, false, null, Double.NaN, null);
    }
  }

  private Joined fetch(HttpClient http, URI admin, String name, K6Request r)
      throws IOException, InterruptedException {
    String base = admin.toString().replaceAll("/+$", "");
    HttpRequest.Builder req =
        HttpRequest.newBuilder(URI.create(base + "/admin/records/" + r.traceId()))
            .timeout(Duration.ofSeconds(10));
    if (adminToken != null && !adminToken.isBlank()) {
      req.header("authorization", "Bearer " + adminToken);
    }
    HttpResponse<String> resp = http.send(req.build(), HttpResponse.BodyHandlers.ofString());
    if (resp.statusCode() == 404) {
      return new Joined(r, false, null, Double.NaN, null);
    }
    if (resp.statusCode() != 200) {
      throw new IOException(
          "cannot read "
              + base
              + ": GET /admin/records/"
              + r.traceId()
              + " answered "
              + resp.statusCode());
    }
    JsonNode rec = JSON.readTree(resp.body());
    return new Joined(
        r, true, rec.path("outcome").asText(null), rec.path("root_ms").asDouble(), name);
  }

  private static void write(Path file, List<Joined> joined) throws IOException {
    Files.createDirectories(file.getParent());
    try (Writer w = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
      w.write(
          "trace_id,status,k6_duration_ms,found,outcome,server_root_ms,network_envelope_ms,"
              + "replica\n");
      for (Joined j : joined) {
        w.write(
            String.format(
                Locale.ROOT,
                "%s,%d,%.3f,%b,%s,%s,%s,%s%n",
                j.k6().traceId(),
                j.k6().status(),
                j.k6().durationMs(),
                j.found(),
                j.outcome() == null ? "" : j.outcome(),
                j.found() ? String.format(Locale.ROOT, "%.3f", j.rootMs()) : "",
                j.found() ? String.format(Locale.ROOT, "%.3f", j.envelopeMs()) : "",
                j.replica() == null ? "" : j.replica()));
      }
    }
  }

  /** Nearest-rank quantile of sorted values; NaN when there are none. */
  static double quantile(double[] sorted, double q) {
    if (sorted.length == 0) {
      return Double.NaN;
    }
    int rank = (int) Math.ceil(q * sorted.length);
    return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
  }
}
