package io.phasemeter.bench;

import io.vertx.core.DeploymentOptions;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.PoolOptions;
import io.vertx.httpproxy.HttpProxy;

/**
 * The platform's ceiling for bench/run: a reverse proxy built from {@code
 * io.vertx:vertx-http-proxy} on the same Vert.x version as Phasemeter, measuring nothing. Usage:
 * {@code BareProxy LISTEN_PORT UPSTREAM_PORT [INSTANCES [POOL_SIZE]]}; each instance is a verticle
 * with its own server (sharing the port) and its own upstream client, so it runs on its own event
 * loop.
 *
 * <p>The transport is {@code -Dbench.transport=native} (the default: Netty's epoll where it loads,
 * as Phasemeter's {@code transport: auto}) or {@code nio}; the first line printed says which one
 * runs, since a native transport that fails to load falls back to NIO.
 */
public final class BareProxy {
  private BareProxy() {}

  public static void main(String[] args) {
    int listen = Integer.parseInt(args[0]);
    int upstream = Integer.parseInt(args[1]);
    int instances = args.length > 2 ? Integer.parseInt(args[2]) : 1;
    // Upstream connections per instance: 72 covers wrk -c16; streams need one each.
    int poolSize = args.length > 3 ? Integer.parseInt(args[3]) : 72;
    String transport = System.getProperty("bench.transport", "native");
    if (!transport.equals("native") && !transport.equals("nio")) {
      System.err.println("bench.transport must be native or nio, got " + transport);
      System.exit(2);
    }
    Vertx vertx =
        Vertx.vertx(new VertxOptions().setPreferNativeTransport(transport.equals("native")));
    Throwable why = vertx.unavailableNativeTransportCause();
    System.out.println(
        "transport: "
            + (vertx.isNativeTransportEnabled() ? "native" : "nio")
            + " (asked "
            + transport
            + (transport.equals("native") && why != null ? "; native unavailable: " + why : "")
            + ")");
    vertx
        .deployVerticle(
            () -> new ProxyVerticle(listen, upstream, poolSize),
            new DeploymentOptions().setInstances(instances))
        .onSuccess(
            id ->
                System.out.println(
                    "bare vertx-http-proxy on 127.0.0.1:"
                        + listen
                        + " -> 127.0.0.1:"
                        + upstream
                        + " ("
                        + instances
                        + " event loop(s))"))
        .onFailure(
            err -> {
              err.printStackTrace();
              System.exit(1);
            });
  }

  private static final class ProxyVerticle extends VerticleBase {
    private final int listen;
    private final int upstream;
    private final int poolSize;

    ProxyVerticle(int listen, int upstream, int poolSize) {
      this.listen = listen;
      this.upstream = upstream;
      this.poolSize = poolSize;
    }

    @Override
    public Future<?> start() {
      HttpClient client =
          vertx.createHttpClient(
              new HttpClientOptions().setKeepAlive(true).setTcpNoDelay(true),
              new PoolOptions().setHttp1MaxSize(poolSize));
      HttpProxy proxy = HttpProxy.reverseProxy(client).origin(upstream, "127.0.0.1");
      return vertx
          .createHttpServer(
              new HttpServerOptions().setHost("127.0.0.1").setPort(listen).setTcpNoDelay(true))
          .requestHandler(proxy)
          .listen();
    }
  }
}
