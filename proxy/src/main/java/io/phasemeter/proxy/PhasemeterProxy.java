package io.phasemeter.proxy;

import io.opentelemetry.api.OpenTelemetry;
import io.phasemeter.proxy.config.ProxyConfig;
import io.phasemeter.proxy.pipeline.Pipeline;
import io.phasemeter.proxy.pipeline.RequestObserver;
import io.phasemeter.proxy.pipeline.SlotPool;
import io.phasemeter.proxy.telemetry.NanoClock;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;

/**
 * The measuring reverse proxy: the public OpenAI-compatible listener in front of the configured
 * pools. Everything it needs comes in through {@link #builder}; nothing is global, so tests can run
 * two side by side.
 */
public final class PhasemeterProxy {
  private final Pipeline pipeline;
  private final HttpServer server;

  private PhasemeterProxy(Pipeline pipeline, HttpServer server) {
    this.pipeline = pipeline;
    this.server = server;
  }

  /** Starts building a proxy for {@code config} on {@code vertx}. */
  public static Builder builder(Vertx vertx, ProxyConfig config) {
    return new Builder(vertx, config);
  }

  /** The public listener's bound port. */
  public int port() {
    return server.actualPort();
  }

  /** Requests currently between headers parsed and root end. */
  public int inFlight() {
    return pipeline.inFlight();
  }

  /** The slot pools, by pool name. */
  public Map<String, SlotPool> slotPools() {
    return pipeline.slotPools();
  }

  /** Stops listening and closes the upstream clients. */
  public Future<Void> close() {
    return server.close().compose(v -> pipeline.close());
  }

  /** The version of this build. */
  public static String version() {
    try (InputStream in =
        PhasemeterProxy.class.getResourceAsStream("/phasemeter-proxy-version.properties")) {
      Properties p = new Properties();
      if (in != null) {
        p.load(in);
      }
      return p.getProperty("version", "dev");
    } catch (IOException e) {
      return "dev";
    }
  }

  /** Collects the proxy's collaborators; {@link #start()} binds the listener. */
  public static final class Builder {
    private final Vertx vertx;
    private final ProxyConfig config;
    private OpenTelemetry openTelemetry = OpenTelemetry.noop();
    private NanoClock clock = NanoClock.system();
    private final List<RequestObserver> observers = new ArrayList<>();

    private Builder(Vertx vertx, ProxyConfig config) {
      this.vertx = Objects.requireNonNull(vertx);
      this.config = Objects.requireNonNull(config);
    }

    /** The OpenTelemetry instance spans go to (default: no-op). */
    public Builder openTelemetry(OpenTelemetry openTelemetry) {
      this.openTelemetry = Objects.requireNonNull(openTelemetry);
      return this;
    }

    /** The clock every duration is measured with (default: {@link NanoClock#system()}). */
    public Builder clock(NanoClock clock) {
      this.clock = Objects.requireNonNull(clock);
      return this;
    }

    /** Adds an observer told about every finished request. */
    public Builder observer(RequestObserver observer) {
      observers.add(Objects.requireNonNull(observer));
      return this;
    }

    /** Binds the public listener and completes with the running proxy. */
    public Future<PhasemeterProxy> start() {
      Pipeline pipeline = new Pipeline(vertx, config, openTelemetry, clock, observers);
      HttpServerOptions options =
          new HttpServerOptions()
              .setHost(config.listen().host())
              .setPort(config.listen().port())
              .setTcpNoDelay(true)
              .setHandle100ContinueAutomatically(false)
              .setCompressionSupported(false)
              .setMaxInitialLineLength(8192)
              .setMaxHeaderSize(16384);
      return vertx
          .createHttpServer(options)
          .requestHandler(pipeline::handle)
          .listen()
          .map(server -> new PhasemeterProxy(pipeline, server));
    }
  }
}
