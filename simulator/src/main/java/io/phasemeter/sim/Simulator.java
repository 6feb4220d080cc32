package io.phasemeter.sim;

import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.io.IOException;
import java.io.InputStream;
import java.util.Objects;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A running simulated vLLM server. Start one with {@link #start(Vertx, SimulatorConfig)}; several
 * can run side by side in one {@link Vertx}.
 */
public final class Simulator {
  private final Vertx vertx;
  private final String deploymentId;
  private final SimulatorVerticle verticle;
  private final AtomicBoolean closed = new AtomicBoolean();

  private Simulator(Vertx vertx, String deploymentId, SimulatorVerticle verticle) {
    this.vertx = vertx;
    this.deploymentId = deploymentId;
    this.verticle = verticle;
  }

  /**
   * Binds the server and starts serving. Port 0 binds an ephemeral port; read it with {@link
   * #port()}.
   */
  public static Future<Simulator> start(Vertx vertx, SimulatorConfig config) {
    return start(vertx, config, null);
  }

  /**
   * As {@link #start(Vertx, SimulatorConfig)}, serving HTTPS with {@code tls} (null: plain HTTP).
   *
   * @throws IllegalArgumentException naming the flag and the file, when a TLS file is unusable
   */
  public static Future<Simulator> start(Vertx vertx, SimulatorConfig config, SimulatorTls tls) {
    Objects.requireNonNull(vertx, "vertx");
    Objects.requireNonNull(config, "config");
    if (tls != null) {
      tls.check(vertx);
    }
    SimulatorVerticle verticle = new SimulatorVerticle(config, System::nanoTime, tls);
    return vertx.deployVerticle(verticle).map(id -> new Simulator(vertx, id, verticle));
  }

  /** This build's version, as {@code GET /version} answers it; {@code dev} when unknown. */
  public static String version() {
    try (InputStream in =
        Simulator.class.getResourceAsStream("/phasemeter-sim-version.properties")) {
      Properties p = new Properties();
      if (in != null) {
        p.load(in);
      }
      return p.getProperty("version", "dev");
    } catch (IOException e) {
      return "dev";
    }
  }

  /** The port actually bound. */
  public int port() {
    return verticle.actualPort();
  }

  /** A snapshot of the counters; safe to call from any thread. */
  public SimulatorStats stats() {
    return verticle.stats();
  }

  /** Stops the server, dropping sequences still running. Idempotent. */
  public Future<Void> close() {
    if (!closed.compareAndSet(false, true)) {
      return Future.succeededFuture();
    }
    return vertx.undeploy(deploymentId);
  }
}
