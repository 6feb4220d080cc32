package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.proxy.gateway.Priority;
import io.phasemeter.proxy.pipeline.Phase;
import io.phasemeter.sim.Simulator;
import io.phasemeter.sim.SimulatorConfig;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.json.JsonObject;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A queue of mixed priorities in front of the simulator: high priority waits less, low priority
 * still progresses (served within the overtaking bound, never timed out), as the records show. The
 * bound is wide here (64) so the ordering is plain; {@code SlotPoolTest} checks the bound itself.
 */
class PriorityQueueTest extends ProxyTestBase {

  @Test
  void highWaitsLessAndLowStillProgresses() throws Exception {
    Simulator sim =
        Simulator.start(
                vertx,
                SimulatorConfig.defaults()
                    .withPort(0)
                    .withSlots(2)
                    .withDecodeStepMs(5)
                    .withDecodeStepGrowth(0)
                    .withPrefillTokensPerSecond(1_000_000))
            .await(10, TimeUnit.SECONDS);
    startProxy(config(sim.port(), 2, "    queue: {max: 1000, timeout: 60s, max_overtakes: 64}\n"));
    Priority[] mix = new Priority[90];
    Random random = new Random(42);
    for (int i = 0; i < mix.length; i++) {
      mix[i] = Priority.values()[random.nextInt(3)];
    }

    // Two long requests hold both slots while the mixed queue forms behind them.
    List<Future<Response>> blockers = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      blockers.add(
          callAsync(
              "/v1/chat/completions",
              "{\"model\":\"sim-llama\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                  + "\"max_tokens\":300,\"ignore_eos\":true}"));
    }
    org.awaitility.Awaitility.await().until(() -> proxy.slotPools().get("default").inUse() == 2);
    List<Future<Response>> all = new ArrayList<>();
    for (Priority p : mix) {
      String body =
          "{\"model\":\"sim-llama\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
              + "\"max_tokens\":16,\"ignore_eos\":true}";
      all.add(
          callAsync(
              HttpMethod.POST,
              "/v1/chat/completions",
              body,
              MultiMap.caseInsensitiveMultiMap().add("x-priority", p.label())));
    }
    org.awaitility.Awaitility.await()
        .until(() -> proxy.slotPools().get("default").queueDepth() == mix.length);
    Future.all(all).await(60, TimeUnit.SECONDS);
    Future.all(blockers).await(60, TimeUnit.SECONDS);

    assertThat(all).allSatisfy(f -> assertThat(f.result().status()).isEqualTo(200));
    List<Finished> done = awaitFinished(mix.length + 2);
    Map<Priority, List<Double>> queueMs = new EnumMap<>(Priority.class);
    for (Finished f : done.subList(2, done.size())) {
      Priority p =
          Priority.parse(new JsonObject(proxy.records().get(f.traceId())).getString("priority"));
      queueMs.computeIfAbsent(p, k -> new ArrayList<>()).add(f.phaseMs(Phase.QUEUE));
    }
    double high = mean(queueMs.get(Priority.HIGH));
    double normal = mean(queueMs.get(Priority.NORMAL));
    double low = mean(queueMs.get(Priority.LOW));
    System.out.printf(
        "mean queue wait: high %.1f ms (n=%d), normal %.1f ms (n=%d), low %.1f ms (n=%d)%n",
        high,
        queueMs.get(Priority.HIGH).size(),
        normal,
        queueMs.get(Priority.NORMAL).size(),
        low,
        queueMs.get(Priority.LOW).size());
    assertThat(high).isLessThan(normal);
    assertThat(normal).isLessThan(low);
    assertThat(queueMs.get(Priority.LOW)).hasSizeGreaterThan(15);
    assertIdle();
  }

  private static double mean(List<Double> xs) {
    return xs.stream().mapToDouble(Double::doubleValue).average().orElseThrow();
  }
}
