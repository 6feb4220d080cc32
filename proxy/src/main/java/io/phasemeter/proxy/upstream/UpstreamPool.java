package io.phasemeter.proxy.upstream;

import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.http.RequestOptions;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The HTTP client of one pool and the choice among its upstreams (round robin). Connections are
 * kept alive and pooled, sized to the pool's slots so a full pool never waits on the client.
 */
public final class UpstreamPool {
  private final ProxyConfig.Pool config;
  private final List<ProxyConfig.Upstream> upstreams;
  private final HttpClientAgent client;
  private final AtomicInteger next = new AtomicInteger();

  public UpstreamPool(Vertx vertx, ProxyConfig.Pool config) {
    this.config = config;
    this.upstreams = config.upstreamAddresses();
    HttpClientOptions options =
        new HttpClientOptions()
            .setKeepAlive(true)
            .setTcpNoDelay(true)
            .setConnectTimeout(
                (int) Math.min(Integer.MAX_VALUE, config.timeouts().connect().toMillis()))
            .setDecompressionSupported(false)
            .setMaxInitialLineLength(8192)
            .setMaxHeaderSize(32768);
    PoolOptions pool = new PoolOptions().setHttp1MaxSize(config.slots() + 8);
    this.client = vertx.createHttpClient(options, pool);
  }

  /** Picks the upstream for the next request. */
  public ProxyConfig.Upstream choose() {
    int i = Math.floorMod(next.getAndIncrement(), upstreams.size());
    return upstreams.get(i);
  }

  /** Opens a POST to {@code path} on {@code upstream} (connecting if needed). */
  public Future<HttpClientRequest> open(ProxyConfig.Upstream upstream, String path) {
    RequestOptions options =
        new RequestOptions()
            .setMethod(HttpMethod.POST)
            .setHost(upstream.host())
            .setPort(upstream.port())
            .setSsl(upstream.tls())
            .setURI(upstream.basePath() + path)
            .setConnectTimeout(config.timeouts().connect().toMillis());
    return client.request(options);
  }

  public ProxyConfig.Pool config() {
    return config;
  }

  public Future<Void> close() {
    return client.close();
  }
}
