package io.phasemeter.load.join;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.http.ClientResult;
import io.phasemeter.load.http.ErrorClass;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Client results and proxy records pair on the trace id, whichever comes first. */
public class JoinerTest {
  private static final String PREFIX = "00000000000abcde";

  public static ClientResult client(String traceId, long totalMs) {
    return new ClientResult(
        1,
        traceId,
        "b",
        0,
        0,
        0,
        1_000_000,
        2_000_000,
        5_000_000,
        totalMs * 1_000_000,
        -1,
        0,
        200,
        ErrorClass.NONE,
        null,
        -1,
        8,
        7,
        8,
        null);
  }

  static ServerRecord record(String traceId, double rootMs) {
    return new ServerRecord(
        traceId,
        "m",
        "default",
        true,
        200,
        "success",
        rootMs,
        3.0,
        Map.of("queue", 1.0),
        0.1,
        null,
        7L,
        8L,
        true);
  }

  @Test
  void pairsInEitherOrderAndLeavesTheRestAlone() {
    List<Pair> formed = new ArrayList<>();
    Joiner j = new Joiner(PREFIX, 10, formed::add);
    j.client(client(PREFIX + "0000000000000001", 50));
    j.record(record(PREFIX + "0000000000000001", 40));
    j.record(record(PREFIX + "0000000000000002", 30));
    j.client(client(PREFIX + "0000000000000002", 35));
    j.client(client(PREFIX + "0000000000000003", 20));
    assertThat(formed).hasSize(2).allMatch(Pair::joined);
    assertThat(formed.get(0).networkEnvelopeMs()).isEqualTo(10.0);
    assertThat(formed.get(1).networkEnvelopeMs()).isEqualTo(5.0);
    assertThat(j.waiting()).isEqualTo(1);
    j.flush();
    assertThat(formed).hasSize(3);
    assertThat(formed.get(2).joined()).isFalse();
    assertThat(formed.get(2).networkEnvelopeMs()).isNaN();
  }

  @Test
  void recordsOfOtherTrafficAreIgnoredAndWaitingRecordsAreBounded() {
    Joiner j = new Joiner(PREFIX, 3, p -> {});
    j.record(record("ffffffffffffffff0000000000000001", 1));
    for (int i = 0; i < 10; i++) {
      j.record(record(PREFIX + String.format("%016x", i), 1));
    }
    assertThat(j.foreign()).isEqualTo(1);
    assertThat(j.overflow()).isEqualTo(7);
  }

  @Test
  void aNegativeEnvelopeIsKeptNotClipped() {
    Pair p =
        new Pair(
            client(PREFIX + "0000000000000009", 10), record(PREFIX + "0000000000000009", 12.5));
    assertThat(p.networkEnvelopeMs()).isEqualTo(-2.5);
  }

  @Test
  void recordsOfEveryApiJoinOnTheTraceIdAlone() {
    List<Pair> formed = new ArrayList<>();
    Joiner j = new Joiner(PREFIX, 100, formed::add);
    String[][] apis = {
      {"/v1/chat/completions", "chat"},
      {"/v1/completions", null},
      {"/v1/responses", "responses"},
      {"/v1/embeddings", "embeddings"}
    };
    for (int i = 0; i < apis.length; i++) {
      String id = PREFIX + String.format("%016x", i + 1);
      ServerRecord base = record(id, 10);
      boolean embeddings = "embeddings".equals(apis[i][1]);
      ServerRecord r =
          new ServerRecord(
              id,
              base.model(),
              base.pool(),
              !embeddings,
              200,
              "success",
              10,
              embeddings ? null : base.serverTtftMs(),
              base.phasesMs(),
              base.unattributedMs(),
              null,
              7L,
              embeddings ? null : 8L,
              true,
              null,
              false,
              apis[i][0],
              apis[i][1]);
      if (i % 2 == 0) {
        j.record(r);
        j.client(client(id, 12));
      } else {
        j.client(client(id, 12));
        j.record(r);
      }
    }
    assertThat(formed).hasSize(4).allMatch(Pair::joined);
    assertThat(formed.stream().map(p -> p.server().route()))
        .containsExactly(
            "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings");
    assertThat(formed.get(3).networkEnvelopeMs()).isEqualTo(2.0);
    // No server TTFT: no TTFT envelope, not a made-up one.
    assertThat(formed.get(3).ttftEnvelopeMs()).isNaN();
  }
}
