package io.phasemeter.load.campaign;

import io.phasemeter.load.http.Transport;
import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.ApiKey;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Starts the inference server with the user's command and times how long it takes to be usable:
 * from the process start to {@code GET /health} answering 200 ({@code health_ms}), and to the first
 * successful one-token completion ({@code ready_ms}) on the campaign's API (an embedding of one
 * word for {@code embeddings}: a server of an embedding model answers no completion). Starts come
 * in pairs: a cold start (after the server was stopped and the optional {@code --cold-cmd} ran,
 * e.g. to drop the page cache), then a warm restart right after stopping it again. Without a cold
 * command only the campaign's first start is sure to be cold; the report says so.
 */
final class StartupProbe {
  private static final long POLL_MS = 50;

  /**
   * One timed start. Times are from the process start in milliseconds; NaN when not reached.
   *
   * @param pair the pair's number, from 1
   * @param kind {@code cold} or {@code warm}
   * @param error why the server did not become ready, or null
   */
  record Start(int pair, String kind, double healthMs, double readyMs, String error) {}

  private final String command;
  private final String coldCommand;
  private final URI server;
  private final String model;
  private final Api api;
  private final ApiKey apiKey;
  private final Duration readyTimeout;
  private final Path logDir;
  private final PrintWriter out;
  private final HttpClient http;
  private int launches;

  StartupProbe(
      String command,
      String coldCommand,
      URI server,
      String model,
      Api api,
      ApiKey apiKey,
      Duration readyTimeout,
      Path logDir,
      PrintWriter out,
      Transport transport) {
    this.http =
        transport.applyTrust(HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2))).build();
    this.command = command;
    this.coldCommand = coldCommand;
    this.server = server;
    this.model = model;
    this.api = api;
    this.apiKey = apiKey;
    this.readyTimeout = readyTimeout;
    this.logDir = logDir;
    this.out = out;
  }

  /** A started server, and how its start went. */
  record Launched(Process process, Start start) {}

  /**
   * Measures {@code pairs} cold/warm pairs and leaves the last warm start running for the campaign
   * (the caller stops it). When a start fails, the measurement ends there; {@link Launched#process}
   * is then null.
   */
  Launched measure(int pairs, List<Start> starts) throws InterruptedException, IOException {
    Launched last = null;
    for (int p = 1; p <= pairs; p++) {
      if (coldCommand != null) {
        runColdCommand();
      }
      Launched cold = launch(p, "cold");
      starts.add(cold.start());
      stop(cold.process());
      if (cold.start().error() != null) {
        return new Launched(null, cold.start());
      }
      last = launch(p, "warm");
      starts.add(last.start());
      if (last.start().error() != null) {
        stop(last.process());
        return new Launched(null, last.start());
      }
      if (p < pairs) {
        stop(last.process());
      }
    }
    return last;
  }

  /** Starts the command once and waits until it is ready, failed, exited or timed out. */
  Launched launch(int pair, String kind) throws IOException, InterruptedException {
    launches++;
    ProcessBuilder pb = new ProcessBuilder("sh", "-c", command).redirectErrorStream(true);
    pb.redirectOutput(logDir.resolve("server-start-" + launches + ".log").toFile());
    long t0 = System.nanoTime();
    Process process = pb.start();
    long deadline = t0 + readyTimeout.toNanos();
    double health = Double.NaN;
    String error = null;
    while (true) {
      if (!process.isAlive()) {
        error = "the start command exited with " + process.exitValue() + " before it was ready";
        break;
      }
      if (System.nanoTime() > deadline) {
        error = "not ready within " + readyTimeout.toSeconds() + " s";
        break;
      }
      if (Double.isNaN(health)) {
        if (status(HttpRequest.newBuilder(server.resolve("/health")).GET()) == 200) {
          health = (System.nanoTime() - t0) / 1e6;
          continue;
        }
      } else if (status(completion()) == 200) {
        break;
      }
      Thread.sleep(POLL_MS);
    }
    double ready = error == null ? (System.nanoTime() - t0) / 1e6 : Double.NaN;
    Start s = new Start(pair, kind, health, ready, error);
    out.println(
        String.format(
            Locale.ROOT,
            "phasemeter campaign: server start %d (%s): %s",
            pair,
            kind,
            error != null
                ? "FAILED: " + error
                : String.format(
                    Locale.ROOT,
                    "/health after %.0f ms, first completion after %.0f ms",
                    health,
                    ready)));
    out.flush();
    return new Launched(process, s);
  }

  /** One token of the campaign's API (chat and completions: a text completion, as before). */
  private HttpRequest.Builder completion() {
    String m =
        com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.textNode(model).toString();
    String path;
    String body;
    switch (api) {
      case RESPONSES -> {
        path = api.path();
        body = "{\"model\":" + m + ",\"input\":\"Hello\",\"max_output_tokens\":1}";
      }
      case EMBEDDINGS -> {
        path = api.path();
        body = "{\"model\":" + m + ",\"input\":\"Hello\"}";
      }
      default -> {
        path = "/v1/completions";
        body = "{\"model\":" + m + ",\"prompt\":\"Hello\",\"max_tokens\":1}";
      }
    }
    HttpRequest.Builder b =
        HttpRequest.newBuilder(server.resolve(path))
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    if (apiKey != null) {
      // A server with auth on refuses the probe without the key: it would never be "ready".
      apiKey.headers().forEach(b::header);
    }
    return b;
  }

  private int status(HttpRequest.Builder request) throws InterruptedException {
    try {
      return http.send(
              request.timeout(Duration.ofSeconds(30)).build(),
              HttpResponse.BodyHandlers.discarding())
          .statusCode();
    } catch (IOException e) {
      return 0; // not listening yet
    }
  }

  private void runColdCommand() throws IOException, InterruptedException {
    Process p =
        new ProcessBuilder("sh", "-c", coldCommand)
            .redirectErrorStream(true)
            .redirectOutput(logDir.resolve("cold-cmd.log").toFile())
            .start();
    if (!p.waitFor(readyTimeout.toSeconds(), TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new IOException("--cold-cmd did not finish within " + readyTimeout.toSeconds() + " s");
    }
  }

  /** Stops the process and everything it started (TERM, then KILL after 10 s). */
  static void stop(Process process) throws InterruptedException {
    if (process == null) {
      return;
    }
    List<ProcessHandle> tree = new ArrayList<>(process.descendants().toList());
    tree.forEach(ProcessHandle::destroy);
    process.destroy();
    if (!process.waitFor(10, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      process.waitFor(5, TimeUnit.SECONDS);
    }
    for (ProcessHandle h : tree) {
      if (h.isAlive()) {
        h.destroyForcibly();
      }
    }
    // Wait for the children to go too, so the port is free for the next start.
    for (ProcessHandle h : tree) {
      try {
        h.onExit().get(10, TimeUnit.SECONDS);
      } catch (Exception e) {
        // Already gone or stuck: nothing more to do from here.
      }
    }
  }
}
