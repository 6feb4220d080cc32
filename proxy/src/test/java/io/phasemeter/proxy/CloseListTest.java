package io.phasemeter.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

class CloseListTest {
  private final List<String> closed = new CopyOnWriteArrayList<>();
  private final CloseList list = new CloseList();

  @Test
  void closesTheLastBuiltFirst() {
    list.add("metrics", () -> closed.add("metrics"));
    list.add("telemetry", () -> closed.add("telemetry"));
    list.addAsync("upstreams", () -> closed.add("upstreams") ? Future.succeededFuture() : null);

    assertThat(list.names()).containsExactly("upstreams", "telemetry", "metrics");
    assertThat(list.close().succeeded()).isTrue();
    assertThat(closed).containsExactly("upstreams", "telemetry", "metrics");
  }

  @Test
  void aStepThatThrowsOrFailsDoesNotStopTheOthers() {
    list.add("first", () -> closed.add("first"));
    list.add(
        "throws",
        () -> {
          throw new IllegalStateException("boom");
        });
    list.addAsync("fails", () -> Future.failedFuture(new RuntimeException("no")));
    list.add("last", () -> closed.add("last"));

    Future<Void> done = list.close();

    assertThat(closed).containsExactly("last", "first");
    assertThat(done.failed()).isTrue();
    // The first failure in close order, the later one attached to it.
    assertThat(done.cause()).hasMessageContaining("closing fails failed");
    assertThat(done.cause().getSuppressed()).hasSize(1);
    assertThat(done.cause().getSuppressed()[0]).hasMessageContaining("closing throws failed");
  }

  @Test
  void aStepWaitsForTheOneBeforeIt() {
    Promise<Void> listeners = Promise.promise();
    list.add("upstreams", () -> closed.add("upstreams"));
    list.addAsync("listeners", listeners::future);

    Future<Void> done = list.close();
    assertThat(closed).isEmpty();
    assertThat(done.isComplete()).isFalse();

    listeners.complete();
    assertThat(closed).containsExactly("upstreams");
    assertThat(done.succeeded()).isTrue();
  }

  @Test
  void closingTwiceRunsNothingTheSecondTime() {
    list.add("metrics", () -> closed.add("metrics"));
    list.close();
    assertThat(list.close().succeeded()).isTrue();
    assertThat(closed).containsExactly("metrics");
  }
}
