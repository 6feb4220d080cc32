package io.phasemeter.proxy.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code pools[].upstreams} entries as a URL or {@code {url, slots}}: how the pool's slots are
 * shared among its upstreams, and the one-line errors of what cannot be shared.
 */
class UpstreamSlotsConfigTest {
  private static ProxyConfig.Pool pool(String upstreams, String slots) {
    return ConfigLoader.parse(
            "pools:\n"
                + "  - name: p\n"
                + "    models: [m]\n"
                + "    upstreams: "
                + upstreams
                + "\n"
                + (slots == null ? "" : "    slots: " + slots + "\n"),
            "test.yaml")
        .pools()
        .get(0);
  }

  private static org.assertj.core.api.AbstractThrowableAssert<?, ? extends Throwable> refused(
      String upstreams, String slots) {
    return assertThatThrownBy(() -> pool(upstreams, slots))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("test.yaml: ")
        .hasMessageContaining("pools[0]")
        .satisfies(e -> assertThat(e.getMessage()).doesNotContain("\n"));
  }

  @Test
  void plainUrlsShareThePoolsSlotsEvenlyTheRemainderToTheFirst() {
    assertThat(pool("[http://a:1, http://b:2]", "16").upstreamSlots()).containsExactly(8, 8);
    assertThat(pool("[http://a:1, http://b:2, http://c:3]", "8").upstreamSlots())
        .containsExactly(3, 3, 2);
    ProxyConfig.Pool byDefault = pool("[http://a:1, http://b:2]", null);
    assertThat(byDefault.slots()).isEqualTo(ProxyConfig.Pool.DEFAULT_SLOTS);
    assertThat(byDefault.upstreamSlots()).containsExactly(32, 32);
  }

  @Test
  void upstreamsWithoutSlotsShareWhatTheOthersLeave() {
    ProxyConfig.Pool p = pool("[{url: http://a:1, slots: 10}, http://b:2, http://c:3]", "21");

    assertThat(p.slots()).isEqualTo(21);
    assertThat(p.upstreamSlots()).containsExactly(10, 6, 5);
    assertThat(p.upstreamUrls()).containsExactly("http://a:1", "http://b:2", "http://c:3");
    assertThat(p.upstreams().get(0)).hasToString("http://a:1 (10 slots)");
    assertThat(p.upstreams().get(1)).hasToString("http://b:2");
  }

  @Test
  void whenEveryUpstreamNamesItsSlotsThePoolsAreTheirSum() {
    ProxyConfig.Pool p = pool("[{url: http://a:1, slots: 4}, {url: http://b:2, slots: 12}]", null);

    assertThat(p.slots()).isEqualTo(16);
    assertThat(p.upstreamSlots()).containsExactly(4, 12);
    assertThat(pool("[{url: http://a:1, slots: 4}, {url: http://b:2, slots: 12}]", "16").slots())
        .as("a pool's slots that agree are fine")
        .isEqualTo(16);
  }

  @Test
  void aPoolsSlotsThatContradictItsUpstreamsAreRefused() {
    refused("[{url: http://a:1, slots: 4}, {url: http://b:2, slots: 12}]", "10")
        .hasMessageContaining("slots: pool 'p' has 10 but its upstreams' own slots add up to 16");
  }

  @Test
  void upstreamsWithoutSlotsMustEachGetOne() {
    refused("[{url: http://a:1, slots: 4}, http://b:2]", "4")
        .hasMessageContaining("slots: pool 'p' has 4")
        .hasMessageContaining("leaves 0 for 1 upstream(s) without slots of their own");
    refused("[http://a:1, http://b:2, http://c:3]", "2").hasMessageContaining("leaves 2 for 3");
  }

  @Test
  void anUpstreamsSlotsMustBePositive() {
    refused("[{url: http://a:1, slots: 0}]", null)
        .hasMessageContaining("upstreams[0]")
        .hasMessageContaining("slots: upstream 'http://a:1' must have at least 1 (got 0)");
  }

  @Test
  void anEntryIsAUrlOrUrlAndSlotsNothingElse() {
    refused("[{url: http://a:1, weight: 2}]", null)
        .hasMessageContaining("unknown key 'pools[0].upstreams[0].weight'");
    refused("[{slots: 2}]", null)
        .hasMessageContaining("pools[0].upstreams[0]: url: an upstream needs its base URL");
    refused("[{url: ftp://a, slots: 2}]", null).hasMessageContaining("ftp://a");
  }

  @Test
  void theEnvironmentSetsThePoolsSlotsAsBefore() {
    ProxyConfig c = ConfigLoader.load(null, Map.of("PHASEMETER_POOLS_0_SLOTS", "8"));

    assertThat(c.pools().get(0).slots()).isEqualTo(8);
    assertThat(c.pools().get(0).upstreamSlots()).containsExactly(8);
  }

  @Test
  void theTestConstructorTakesUrls() {
    ProxyConfig.Pool p =
        new ProxyConfig.Pool(
            "p",
            List.of("m"),
            List.of("http://a:1", "http://b:2"),
            3,
            new ProxyConfig.Queue(10, Duration.ofSeconds(1)),
            new ProxyConfig.Timeouts(
                Duration.ofSeconds(1), Duration.ofSeconds(1), Duration.ofSeconds(1)));

    assertThat(p.upstreamSlots()).containsExactly(2, 1);
  }
}
