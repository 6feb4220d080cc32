package io.phasemeter.load.http;

import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import java.net.URI;
import java.util.concurrent.TimeUnit;

/** A small blocking GET for the few admin calls made outside the hot path. */
public final class HttpGet {
  private HttpGet() {}

  public record Result(int status, String body) {}

  /**
   * GETs {@code uri}, trusting over https what {@code transport} trusts (--ca-file, --insecure).
   */
  public static Result get(Vertx vertx, URI uri, String token, Transport transport)
      throws Exception {
    HttpClient client = vertx.createHttpClient(transport.applyTrust(new HttpClientOptions()));
    Promise<Result> done = Promise.promise();
    vertx
        .getOrCreateContext()
        .runOnContext(
            v -> {
              RequestOptions o =
                  new RequestOptions()
                      .setMethod(HttpMethod.GET)
                      .setHost(uri.getHost())
                      .setSsl("https".equalsIgnoreCase(uri.getScheme()))
                      .setPort(
                          uri.getPort() > 0
                              ? uri.getPort()
                              : "https".equalsIgnoreCase(uri.getScheme()) ? 443 : 80)
                      .setURI(
                          uri.getRawPath()
                              + (uri.getRawQuery() == null ? "" : "?" + uri.getRawQuery()));
              if (token != null && !token.isBlank()) {
                o.putHeader("authorization", "Bearer " + token);
              }
              client
                  .request(o)
                  .compose(r -> r.send())
                  .compose(r -> r.body().map(b -> new Result(r.statusCode(), b.toString())))
                  .onComplete(done);
            });
    try {
      return done.future().await(10, TimeUnit.SECONDS);
    } finally {
      client.close();
    }
  }
}
