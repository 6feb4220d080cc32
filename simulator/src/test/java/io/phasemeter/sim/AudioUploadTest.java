package io.phasemeter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.json.JsonObject;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Audio uploads are counted and hashed as they arrive: the answer's headers say exactly what came,
 * for bodies far above the 64 MiB the JSON routes take.
 */
class AudioUploadTest extends SimTestBase {
  private static final String BOUNDARY = "----phasemeter-test-boundary";

  /** What a client sent and what the simulator said it received. */
  record Upload(int status, String body, String bytes, String sha256) {}

  /**
   * Sends a multipart upload of {@code fileBytes} pseudo-random bytes in {@code chunk}-sized
   * writes, chunked transfer encoding, never holding the body in memory; returns the answer and the
   * body's SHA-256 as sent.
   */
  private Upload upload(Simulator sim, String path, long fileBytes, int chunk, String[] sentSha)
      throws Exception {
    MessageDigest sha = MessageDigest.getInstance("SHA-256");
    Buffer head =
        Buffer.buffer(
            ("--"
                    + BOUNDARY
                    + "\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nsim-llama\r\n--"
                    + BOUNDARY
                    + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
                    + "Content-Type: audio/wav\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII));
    Buffer tail =
        Buffer.buffer(("\r\n--" + BOUNDARY + "--\r\n").getBytes(StandardCharsets.US_ASCII));
    Promise<Upload> done = Promise.promise();
    vertx
        .getOrCreateContext()
        .runOnContext(
            v ->
                client
                    .request(
                        new RequestOptions()
                            .setMethod(HttpMethod.POST)
                            .setHost("127.0.0.1")
                            .setPort(sim.port())
                            .setURI(path)
                            .putHeader("content-type", "multipart/form-data; boundary=" + BOUNDARY))
                    .onFailure(done::tryFail)
                    .onSuccess(
                        req -> {
                          req.setChunked(true);
                          req.response()
                              .compose(
                                  resp ->
                                      resp.body()
                                          .map(
                                              b ->
                                                  new Upload(
                                                      resp.statusCode(),
                                                      b.toString(),
                                                      resp.getHeader(AudioUpload.RECEIVED_BYTES),
                                                      resp.getHeader(AudioUpload.RECEIVED_SHA256))))
                              .onComplete(done);
                          sha.update(head.getBytes());
                          req.write(head)
                              .compose(x -> writeFile(req, sha, 0, fileBytes, chunk))
                              .compose(
                                  x -> {
                                    sha.update(tail.getBytes());
                                    sentSha[0] = HexFormat.of().formatHex(sha.digest());
                                    return req.end(tail);
                                  })
                              .onFailure(done::tryFail);
                        }));
    return done.future().await(60, TimeUnit.SECONDS);
  }

  /**
   * Writes the file's bytes from {@code offset} to {@code end} one chunk at a time, each after the
   * previous one was taken; byte {@code i} of the file depends on {@code i} alone.
   */
  private Future<Void> writeFile(
      HttpClientRequest req, MessageDigest sha, long offset, long end, int chunk) {
    if (offset == end) {
      return Future.succeededFuture();
    }
    byte[] bytes = new byte[(int) Math.min(chunk, end - offset)];
    for (int i = 0; i < bytes.length; i++) {
      bytes[i] = (byte) TokenPlan.mix(offset + i);
    }
    sha.update(bytes);
    return req.write(Buffer.buffer(bytes))
        .compose(v -> writeFile(req, sha, offset + bytes.length, end, chunk));
  }

  private static long multipartOverhead() {
    return ("--"
            + BOUNDARY
            + "\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nsim-llama\r\n--"
            + BOUNDARY
            + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
            + "Content-Type: audio/wav\r\n\r\n"
            + "\r\n--"
            + BOUNDARY
            + "--\r\n")
        .length();
  }

  @Test
  void transcriptionCountsAndHashesAMultiMegabyteBody() throws Exception {
    Simulator sim = startSimulator(FAST);
    String[] sent = new String[1];
    long file = 8L * 1024 * 1024 + 123;

    Upload up = upload(sim, "/v1/audio/transcriptions", file, 64 * 1024, sent);

    assertThat(up.status()).isEqualTo(200);
    assertThat(Long.parseLong(up.bytes())).isEqualTo(file + multipartOverhead());
    assertThat(up.sha256()).isEqualTo(sent[0]);
    JsonObject json = new JsonObject(up.body());
    assertThat(json.getString("text")).isNotBlank();
    assertThat(json.getJsonObject("usage"))
        .isEqualTo(
            new JsonObject()
                .put("type", "duration")
                .put(
                    "seconds",
                    (file + multipartOverhead() + AudioUpload.BYTES_PER_SECOND - 1)
                        / AudioUpload.BYTES_PER_SECOND));
  }

  @Test
  void translationTakesMoreThanAHundredMegabytes() throws Exception {
    Simulator sim = startSimulator(FAST);
    String[] sent = new String[1];
    long file = 100L * 1024 * 1024 + 1;

    Upload up = upload(sim, "/v1/audio/translations", file, 1024 * 1024, sent);

    assertThat(up.status()).isEqualTo(200);
    assertThat(Long.parseLong(up.bytes())).isEqualTo(file + multipartOverhead());
    assertThat(up.sha256()).isEqualTo(sent[0]);
    assertThat(new JsonObject(up.body()).fieldNames()).containsExactly("text");
  }

  @Test
  void theSameBodyGetsTheSameText() throws Exception {
    Simulator sim = startSimulator(FAST);
    String[] sent = new String[1];
    Upload a = upload(sim, "/v1/audio/transcriptions", 1000, 1000, sent);
    Upload b = upload(sim, "/v1/audio/transcriptions", 1000, 100, sent);
    assertThat(a.sha256()).isEqualTo(b.sha256());
    assertThat(a.body()).isEqualTo(b.body());
  }
}
