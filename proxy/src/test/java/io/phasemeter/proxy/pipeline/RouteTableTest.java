package io.phasemeter.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.ConfigLoader;
import io.phasemeter.proxy.config.ProxyConfig;
import io.vertx.core.http.HttpMethod;
import java.util.List;
import org.junit.jupiter.api.Test;

class RouteTableTest {
  private final RouteTable defaults = new RouteTable(List.of());

  @Test
  void theBuiltInTableServesVllmsEndpoints() {
    assertThat(defaults.match("/v1/chat/completions").api()).isEqualTo(ApiRoute.Api.CHAT);
    assertThat(defaults.match("/v1/completions").operation()).isEqualTo("text_completion");
    ApiRoute responses = defaults.match("/v1/responses");
    assertThat(responses.api()).isEqualTo(ApiRoute.Api.RESPONSES);
    assertThat(responses.operation()).isEqualTo("responses");
    assertThat(responses.takesSlot()).isTrue();
    assertThat(responses.allows(HttpMethod.GET)).isFalse();
    assertThat(defaults.match("/v1/embeddings").operation()).isEqualTo("embeddings");
    assertThat(defaults.match("/v2/rerank").operation()).isEqualTo("rerank");
    assertThat(defaults.match("/v1/score").api()).isEqualTo(ApiRoute.Api.EMBEDDINGS);
    ApiRoute tokenize = defaults.match("/tokenize");
    assertThat(tokenize.api()).isEqualTo(ApiRoute.Api.PASSTHROUGH);
    assertThat(tokenize.takesSlot()).as("tokenisation holds no generation slot").isFalse();
    assertThat(tokenize.modelFromBody()).isTrue();
    ApiRoute audio = defaults.match("/v1/audio/transcriptions");
    assertThat(audio.takesSlot()).isTrue();
    assertThat(audio.readsBody()).as("an upload is streamed, not buffered").isFalse();
    assertThat(audio.maxBodyBytes()).isEqualTo(32L << 20);
    assertThat(defaults.match("/version").allows(HttpMethod.GET)).isTrue();
  }

  @Test
  void aStoredResponseIsMatchedByItsPatternAndLabelledByIt() {
    ApiRoute one = defaults.match("/v1/responses/resp_abc123");
    assertThat(one.path()).isEqualTo("/v1/responses/{id}");
    assertThat(one.allows(HttpMethod.DELETE)).isTrue();
    assertThat(one.allows(HttpMethod.POST)).isFalse();
    assertThat(one.allowHeader()).isEqualTo("GET, DELETE");
    assertThat(defaults.match("/v1/responses/resp_abc123/cancel").path())
        .isEqualTo("/v1/responses/{id}/cancel");
  }

  @Test
  void administrativeEndpointsAreDenied() {
    for (String p : RouteTable.DENIED) {
      assertThat(defaults.match(p).api()).as(p).isEqualTo(ApiRoute.Api.DENY);
    }
    assertThat(defaults.match("/v1/load_lora_adapter").api()).isEqualTo(ApiRoute.Api.DENY);
  }

  @Test
  void everyOtherPathIsPassedThroughAsOther() {
    ApiRoute other = defaults.match("/some/thing/vllm/adds/later");
    assertThat(other.api()).isEqualTo(ApiRoute.Api.PASSTHROUGH);
    assertThat(other.path()).isEqualTo("other");
    assertThat(other.operation()).isNull();
    assertThat(other.takesSlot()).isFalse();
    assertThat(other.allows(HttpMethod.PATCH)).isTrue();
    assertThat(other.spanName("GET")).isEqualTo("GET");
    assertThat(defaults.match("/").path()).isEqualTo("other");
  }

  @Test
  void configuredRoutesComeFirst() {
    ProxyConfig config =
        ConfigLoader.parse(
            "pools:\n"
                + "  - {name: default, models: [m], upstreams: ['http://127.0.0.1:1']}\n"
                + "  - {name: whisper, models: [w], upstreams: ['http://127.0.0.1:2']}\n"
                + "auth: {enabled: true, keys_file: keys.yaml}\n"
                + "routes:\n"
                + "  - {path: /sleep, handler: passthrough, admin_only: true}\n"
                + "  - {path: /v1/audio/**, handler: passthrough, pool: whisper,"
                + " max_body_bytes: 100}\n"
                + "  - {path: /v1/chat/completions, handler: deny}\n",
            "proxy.yaml");
    RouteTable table = new RouteTable(config.routes());
    ApiRoute sleep = table.match("/sleep");
    assertThat(sleep.api()).isEqualTo(ApiRoute.Api.PASSTHROUGH);
    assertThat(sleep.adminOnly()).isTrue();
    ApiRoute audio = table.match("/v1/audio/transcriptions");
    assertThat(audio.pool()).isEqualTo("whisper");
    assertThat(audio.path()).isEqualTo("/v1/audio/**");
    assertThat(audio.maxBodyBytes()).isEqualTo(100);
    assertThat(table.match("/v1/audio").path())
        .as("** matches no rest too")
        .isEqualTo("/v1/audio/**");
    assertThat(table.match("/v1/chat/completions").api()).isEqualTo(ApiRoute.Api.DENY);
    assertThat(table.match("/v1/completions").api()).isEqualTo(ApiRoute.Api.COMPLETIONS);
    assertThat(table.routes()).hasSize(3 + RouteTable.DEFAULTS.size());
  }

  @Test
  void aBadRouteStopsStartUpWithOneLineNamingTheKey() {
    String pools = "pools:\n  - {name: default, models: [m], upstreams: ['http://127.0.0.1:1']}\n";
    assertThatThrownBy(
            () -> ConfigLoader.parse(pools + "routes:\n  - {path: /x, handler: magic}\n", "p.yaml"))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("routes.handler: must be one of chat, completions, responses");
    assertThatThrownBy(
            () ->
                ConfigLoader.parse(
                    pools + "routes:\n  - {path: '/a/**/b', handler: deny}\n", "p.yaml"))
        .hasMessageContaining("bad segment '**'");
    assertThatThrownBy(
            () ->
                ConfigLoader.parse(
                    pools + "routes:\n  - {path: /x, handler: passthrough, pool: nope}\n",
                    "p.yaml"))
        .hasMessageContaining("routes[0].pool: no pool is named 'nope'");
    assertThatThrownBy(
            () ->
                ConfigLoader.parse(
                    pools + "routes:\n  - {path: /sleep, handler: passthrough, admin_only: true}\n",
                    "p.yaml"))
        .hasMessageContaining("admin_only: needs auth.enabled");
    assertThatThrownBy(
            () ->
                ConfigLoader.parse(
                    pools + "routes:\n  - {path: /x, handler: chat, methods: [FETCH]}\n", "p.yaml"))
        .hasMessageContaining("routes.methods: 'FETCH' is not one of");
    assertThatThrownBy(
            () ->
                ConfigLoader.parse(
                    pools + "routes:\n  - {path: /x, handler: chat, operation: Chat Thing}\n",
                    "p.yaml"))
        .hasMessageContaining("routes.operation");
  }
}
