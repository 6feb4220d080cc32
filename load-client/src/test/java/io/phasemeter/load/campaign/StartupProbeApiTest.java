package io.phasemeter.load.campaign;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.workload.Api;
import io.phasemeter.load.workload.ApiKey;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --start-cmd}'s first answer is asked of the campaign's API: a server of an embedding model
 * answers no completion, and one that serves only the Responses API is ready all the same.
 */
class StartupProbeApiTest {
  @TempDir Path dir;

  private Vertx vertx;
  private HttpServer server;
  private final List<String> asked = new CopyOnWriteArrayList<>();

  /** Paths answered 200; every other POST gets 404, as a server without that route. */
  private volatile Set<String> serves = Set.of();

  /** The authorization a POST must carry (null: none), as a server with auth on. */
  private volatile String requiredAuth;

  @BeforeEach
  void start() throws Exception {
    vertx = Vertx.vertx();
    server =
        vertx
            .createHttpServer()
            .requestHandler(
                req -> {
                  asked.add(req.method() + " " + req.path());
                  boolean ok = req.path().equals("/health") || serves.contains(req.path());
                  boolean allowed =
                      req.path().equals("/health")
                          || requiredAuth == null
                          || requiredAuth.equals(req.getHeader("authorization"));
                  req.response().setStatusCode(!allowed ? 401 : ok ? 200 : 404).end("{}");
                })
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
  }

  @AfterEach
  void stop() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private StartupProbe.Start probe(Api api) throws Exception {
    return probe(api, null);
  }

  private StartupProbe.Start probe(Api api, ApiKey key) throws Exception {
    // exec: sh becomes the sleep, with no child of its own. Without it, stopping the tree waits
    // for the orphaned sleep through ProcessHandle.onExit, which polls a process that is not the
    // JVM's child (about 2 s a stop here, two stops a probe).
    StartupProbe probe =
        new StartupProbe(
            "exec sleep 30",
            null,
            URI.create("http://127.0.0.1:" + server.actualPort()),
            "m",
            api,
            key,
            Duration.ofSeconds(3),
            dir,
            new PrintWriter(new StringWriter(), true),
            io.phasemeter.load.http.Transport.DEFAULT);
    List<StartupProbe.Start> starts = new ArrayList<>();
    StartupProbe.Launched launched = probe.measure(1, starts);
    StartupProbe.stop(launched.process());
    return starts.get(starts.size() - 1);
  }

  @Test
  void eachApiIsAskedOnItsOwnPath() throws Exception {
    serves = Set.of("/v1/embeddings");
    assertThat(probe(Api.EMBEDDINGS).error()).isNull();
    assertThat(asked).contains("POST /v1/embeddings").doesNotContain("POST /v1/completions");

    asked.clear();
    serves = Set.of("/v1/responses");
    assertThat(probe(Api.RESPONSES).error()).isNull();
    assertThat(asked).contains("POST /v1/responses");

    asked.clear();
    serves = Set.of("/v1/completions");
    assertThat(probe(Api.COMPLETIONS).error()).isNull();
    assertThat(probe(Api.CHAT).error()).isNull();
    assertThat(asked).contains("POST /v1/completions").doesNotContain("POST /v1/responses");
  }

  @Test
  void withAPlanKeyTheFirstCompletionCarriesIt() throws Exception {
    serves = Set.of("/v1/completions");
    requiredAuth = "Bearer sk-probe";
    ApiKey key = ApiKey.fromEnv("api_key_env", "PROBE_KEY", Map.of("PROBE_KEY", "sk-probe"));
    assertThat(probe(Api.COMPLETIONS, key).error()).isNull();
    assertThat(asked).contains("POST /v1/completions");
  }
}
