package io.phasemeter.load.campaign;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.phasemeter.load.Version;
import io.phasemeter.load.http.Transport;
import io.phasemeter.load.join.Admins;
import io.phasemeter.load.workload.ApiKey;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The conditions a campaign's figures hold under, gathered by the tool and never typed by hand:
 * Phasemeter's version and git commit, the plan's and the proxy config's SHA-256, the upstream's
 * {@code /v1/models} answer and server headers, what the proxy's admin listener tells (its version,
 * sampling, and the slots configured per pool from {@code llm_slots_configured}), the pools and
 * limits of the given proxy config, and the user's labels (hardware, engine, quantization).
 */
public final class Conditions {
  /**
   * Conditions that make two campaigns incomparable when they differ: the model, the routing,
   * limits and pools of the proxy, and every label (hardware, engine). {@code compare --vary KEY}
   * accepts a named one as the thing being compared.
   */
  static final List<String> GUARDED_PREFIXES =
      List.of(
          "model",
          "proxy_config_sha256",
          "proxy_config.pools",
          "proxy_config.limits",
          "proxy_slots_capacity",
          "labels.");

  private static final Set<String> SKIPPED_HEADERS =
      Set.of("date", "content-length", "content-type", "transfer-encoding", "connection");

  private Conditions() {}

  /**
   * Gathers everything; a part that cannot be fetched is recorded with its error, never guessed.
   */
  static ObjectNode gather(
      Path planFile,
      URI url,
      Admins admins,
      String adminToken,
      Path proxyConfig,
      Map<String, String> labels,
      String model,
      ApiKey apiKey,
      Transport transport) {
    ObjectNode c = JsonNodeFactory.instance.objectNode();
    c.put("phasemeter_version", Version.version());
    c.put("git_commit", Version.gitCommit());
    c.put("plan_file", planFile.toString());
    c.put("plan_sha256", sha256(planFile));
    c.put("model", model);
    c.put("target_url", url.toString());
    c.put("admin_url", admins == null ? null : admins.describe());
    // One replica answers for the fleet's version and config: the first given, or the name's.
    URI admin = admins == null ? null : admins.any();
    ObjectNode l = c.putObject("labels");
    labels.forEach(l::put);
    HttpClient http =
        transport.applyTrust(HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5))).build();
    c.set("upstream_models", models(http, url, apiKey));
    if (proxyConfig != null) {
      c.put("proxy_config_file", proxyConfig.toString());
      c.put("proxy_config_sha256", sha256(proxyConfig));
      c.set("proxy_config", proxyConfigSettings(proxyConfig));
    }
    if (admin != null) {
      c.set("proxy_admin", adminStats(http, admin, adminToken));
      c.set("proxy_slots_capacity", slotsCapacity(http, admin, adminToken));
    }
    c.put("client_java", System.getProperty("java.version"));
    c.put(
        "client_os",
        System.getProperty("os.name")
            + " "
            + System.getProperty("os.version")
            + " "
            + System.getProperty("os.arch"));
    c.put("client_cpus", Runtime.getRuntime().availableProcessors());
    c.put("started_at", Instant.now().toString());
    return c;
  }

  /** Hex SHA-256 of a file's bytes, or {@code "unreadable: …"}. */
  static String sha256(Path file) {
    try {
      return HexFormat.of()
          .formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file)));
    } catch (IOException | NoSuchAlgorithmException e) {
      return "unreadable: " + e.getMessage();
    }
  }

  /**
   * {@code GET {url}/v1/models}: status, the server's headers (not date or length) and body. With
   * the campaign's API key, which a server with auth on asks for here too.
   */
  static ObjectNode models(HttpClient http, URI url, ApiKey apiKey) {
    ObjectNode o = JsonNodeFactory.instance.objectNode();
    try {
      HttpRequest.Builder b =
          HttpRequest.newBuilder(url.resolve("/v1/models")).timeout(Duration.ofSeconds(10)).GET();
      if (apiKey != null) {
        apiKey.headers().forEach(b::header);
      }
      HttpResponse<String> r = http.send(b.build(), HttpResponse.BodyHandlers.ofString());
      o.put("status", r.statusCode());
      ObjectNode headers = o.putObject("headers");
      r.headers()
          .map()
          .forEach(
              (k, v) -> {
                String key = k.toLowerCase(Locale.ROOT);
                if (!SKIPPED_HEADERS.contains(key) && !key.startsWith(":")) {
                  headers.put(key, String.join(", ", v));
                }
              });
      o.set("body", jsonOrText(r.body()));
    } catch (Exception e) {
      o.put("error", String.valueOf(e.getMessage() == null ? e : e.getMessage()));
    }
    return o;
  }

  private static ObjectNode adminStats(HttpClient http, URI admin, String token) {
    ObjectNode o = JsonNodeFactory.instance.objectNode();
    try {
      HttpResponse<String> r = get(http, admin.resolve("/admin/stats"), token);
      JsonNode stats = new ObjectMapper().readTree(r.body());
      for (String key : List.of("version", "sampling", "record_schema", "window_s")) {
        if (stats.has(key)) {
          o.set(key, stats.get(key));
        }
      }
      o.put(
          "note",
          "/admin/stats does not state pools, slots or queue limits; the slots per pool come"
              + " from llm_slots_configured on /metrics, the rest from --proxy-config");
    } catch (Exception e) {
      o.put("error", String.valueOf(e.getMessage()));
    }
    return o;
  }

  /**
   * The slots configured per pool, scraped from the admin listener's Prometheus text: {@code
   * llm_slots_configured} (every upstream's, whether available or not), or {@code
   * llm_slots_capacity} from a proxy older than it. The capacity alone would vary with which
   * upstreams were out at the moment the campaign started, and make two campaigns look incomparable
   * that ran against the same deployment.
   */
  private static JsonNode slotsCapacity(HttpClient http, URI admin, String token) {
    ObjectNode configured = JsonNodeFactory.instance.objectNode();
    ObjectNode capacity = JsonNodeFactory.instance.objectNode();
    try {
      HttpResponse<String> r = get(http, admin.resolve("/metrics"), token);
      for (String line : r.body().split("\n")) {
        ObjectNode into =
            line.startsWith("llm_slots_configured{")
                ? configured
                : line.startsWith("llm_slots_capacity{") ? capacity : null;
        if (into != null) {
          int at = line.indexOf("llm_pool=\"");
          String pool = at < 0 ? "?" : line.substring(at + 10, line.indexOf('"', at + 10));
          String value = line.substring(line.lastIndexOf(' ') + 1);
          into.put(pool, (long) Double.parseDouble(value));
        }
      }
    } catch (Exception e) {
      return JsonNodeFactory.instance.textNode("unavailable: " + e.getMessage());
    }
    return configured.isEmpty() ? capacity : configured;
  }

  /**
   * The pools (models, upstreams, slots, queue, timeouts) and limits of a proxy config file. A
   * {@code PHASEMETER_*} environment override of the running proxy is not visible here; the live
   * slot capacity ({@code proxy_slots_capacity}, with {@code --admin}) is.
   */
  private static JsonNode proxyConfigSettings(Path file) {
    ObjectNode o = JsonNodeFactory.instance.objectNode();
    try {
      JsonNode root = new ObjectMapper(new YAMLFactory()).readTree(file.toFile());
      for (String key : List.of("pools", "limits", "auth")) {
        if (root != null && root.has(key)) {
          o.set(key, root.get(key));
        }
      }
    } catch (IOException e) {
      o.put("error", e.getMessage());
    }
    return o;
  }

  private static HttpResponse<String> get(HttpClient http, URI uri, String token)
      throws IOException, InterruptedException {
    HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10)).GET();
    if (token != null && !token.isBlank()) {
      b.header("authorization", "Bearer " + token);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  private static JsonNode jsonOrText(String body) {
    try {
      return new ObjectMapper().readTree(body);
    } catch (IOException e) {
      return JsonNodeFactory.instance.textNode(body);
    }
  }
}
