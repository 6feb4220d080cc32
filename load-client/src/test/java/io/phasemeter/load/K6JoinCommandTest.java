package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code phasemeter load join-k6} on k6 JSON output shaped as k6 0.48 writes it (the real k6 runs
 * it in the accuracy module's K6Test), against an admin listener that knows some of the records.
 */
class K6JoinCommandTest {
  private static final String A = "0123456789abcdef0000000000000001";
  private static final String B = "0123456789abcdef0000000000000002";
  private static final String C = "0123456789abcdef0000000000000003";

  @TempDir Path dir;
  private Vertx vertx;
  private HttpServer admin;
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  @BeforeEach
  void start() throws Exception {
    vertx = Vertx.vertx();
    Map<String, String> records =
        Map.of(
            A, "{\"trace_id\":\"" + A + "\",\"outcome\":\"success\",\"root_ms\":10.0}",
            B, "{\"trace_id\":\"" + B + "\",\"outcome\":\"success\",\"root_ms\":20.0}");
    admin =
        vertx
            .createHttpServer()
            .requestHandler(
                req -> {
                  String id = req.path().substring(req.path().lastIndexOf('/') + 1);
                  String rec = records.get(id);
                  if (rec == null) {
                    req.response().setStatusCode(404).end();
                  } else {
                    req.response().putHeader("content-type", "application/json").end(rec);
                  }
                })
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
  }

  @AfterEach
  void stop() throws Exception {
    vertx.close().await(10, TimeUnit.SECONDS);
  }

  private static String point(String metric, String traceId, double value) {
    return "{\"metric\":\""
        + metric
        + "\",\"type\":\"Point\",\"data\":{\"time\":\"2026-12-01T16:00:00Z\",\"value\":"
        + value
        + ",\"tags\":{\"status\":\"200\",\"name\":\"chat\"}"
        + (traceId == null ? "" : ",\"metadata\":{\"trace_id\":\"" + traceId + "\"}")
        + "}}";
  }

  private int run(Path file) {
    return LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(
            "join-k6",
            file.toString(),
            "--admin",
            "http://127.0.0.1:" + admin.actualPort(),
            "--out",
            dir.resolve("out").toString());
  }

  @Test
  void everyRequestJoinedGivesTheEnvelopesAndExitsZero() throws Exception {
    Path file = dir.resolve("run.json");
    Files.write(
        file,
        List.of(
            "{\"type\":\"Metric\",\"data\":{\"name\":\"http_req_duration\"},\"metric\":\"http_req_duration\"}",
            point("http_reqs", A, 1),
            point("http_req_duration", A, 12.5),
            point("http_req_duration", null, 3.0), // setup(): no trace id
            point("http_req_duration", B, 21.0)));
    assertThat(run(file)).as(out + "\n" + err).isZero();
    assertThat(out.toString())
        .contains("2 requests, 2 with a proxy record (join coverage 100.0%)")
        .contains("p50 1.00 ms, p95 2.50 ms");
    List<String> csv = Files.readAllLines(dir.resolve("out/k6-join.csv"));
    assertThat(csv).hasSize(3);
    assertThat(csv.get(1))
        .isEqualTo(A + ",200,12.500,true,success,10.000,2.500,127.0.0.1:" + admin.actualPort());
  }

  /**
   * Three replicas, as behind a Service: A's record is on the first, B's on a second, and a third
   * refuses connections (killed): every request joins, each attributed to its replica, the dead one
   * named unreachable.
   */
  @Test
  void recordsAreLookedUpOnEveryReplica() throws Exception {
    HttpServer second =
        vertx
            .createHttpServer()
            .requestHandler(
                req -> {
                  if (req.path().endsWith(C)) {
                    req.response()
                        .putHeader("content-type", "application/json")
                        .end(
                            "{\"trace_id\":\"" + C + "\",\"outcome\":\"success\",\"root_ms\":4.0}");
                  } else {
                    req.response().setStatusCode(404).end();
                  }
                })
            .listen(0, "127.0.0.1")
            .await(10, TimeUnit.SECONDS);
    int dead;
    try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
      dead = s.getLocalPort();
    }
    Path file = dir.resolve("run.json");
    Files.write(
        file,
        List.of(
            point("http_req_duration", A, 12.5),
            point("http_req_duration", C, 5.0),
            point("http_req_duration", B, 21.0)));
    int code =
        LoadMain.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
            .execute(
                "join-k6",
                file.toString(),
                "--admin",
                "http://127.0.0.1:" + dead,
                "--admin",
                "http://127.0.0.1:" + admin.actualPort(),
                "--admin",
                "http://127.0.0.1:" + second.actualPort(),
                "--out",
                dir.resolve("out").toString());
    assertThat(code).as(out + "\n" + err).isZero();
    assertThat(out.toString())
        .contains("3 requests, 3 with a proxy record (join coverage 100.0%)")
        .contains("replica 127.0.0.1:" + admin.actualPort() + ": 2 records (share 66.7%)")
        .contains("replica 127.0.0.1:" + second.actualPort() + ": 1 records (share 33.3%)")
        .contains("replica 127.0.0.1:" + dead + ": 0 records (share 0.0%), unreachable");
    List<String> csv = Files.readAllLines(dir.resolve("out/k6-join.csv"));
    assertThat(csv.get(2)).endsWith(",127.0.0.1:" + second.actualPort());
  }

  @Test
  void aRequestWithoutARecordIsListedAndExitsFour() throws Exception {
    Path file = dir.resolve("run.json");
    Files.write(
        file, List.of(point("http_req_duration", A, 12.5), point("http_req_duration", C, 5.0)));
    assertThat(run(file)).isEqualTo(4);
    assertThat(out.toString())
        .contains("2 requests, 1 with a proxy record (join coverage 50.0%)")
        .contains("no record for 1:")
        .contains("trace=" + C);
  }

  @Test
  void aFileThatIsNotK6OutputIsOneLineAndExitsTwo() throws Exception {
    Path notJson = dir.resolve("summary.txt");
    Files.writeString(notJson, "✓ checks.........: 100.00%\n");
    assertThat(run(notJson)).isEqualTo(2);
    assertThat(err.toString()).contains("is not JSON: is it k6's --out json output?");
    Path twice = dir.resolve("twice.json");
    Files.write(twice, List.of(point("http_req_duration", A, 1), point("http_req_duration", A, 2)));
    assertThat(run(twice)).isEqualTo(2);
    assertThat(err.toString()).contains("appears twice");
  }
}
