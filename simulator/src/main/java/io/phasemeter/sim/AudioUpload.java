package io.phasemeter.sim;

import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.json.JsonObject;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * {@code POST /v1/audio/transcriptions} and {@code /v1/audio/translations}: reads the upload as it
 * arrives, keeping only a running byte count and a SHA-256 of the raw body, never the body itself,
 * so that a test can push tens of megabytes through a proxy and check what arrived: the answer
 * carries {@code x-sim-received-bytes} and {@code x-sim-received-sha256}. The multipart form is not
 * parsed; the text is a few words fixed by the body's digest. Bodies up to {@link #MAX_BYTES} are
 * taken; past that the simulator answers 413 and closes the connection.
 */
final class AudioUpload {
  static final String RECEIVED_BYTES = "x-sim-received-bytes";
  static final String RECEIVED_SHA256 = "x-sim-received-sha256";

  /** The largest body taken: well above OpenAI's 25 MB file limit and the proxy's tests. */
  static final long MAX_BYTES = 1L << 30;

  /** Bytes of audio per second assumed for {@code usage.seconds}: 16 kHz, 16-bit mono PCM. */
  static final long BYTES_PER_SECOND = 32_000;

  private final HttpServerRequest request;
  private final boolean transcription;
  private final long seed;
  private final MessageDigest sha256;
  private long received;
  private boolean refused;

  private AudioUpload(HttpServerRequest request, boolean transcription, long seed) {
    this.request = request;
    this.transcription = transcription;
    this.seed = seed;
    try {
      this.sha256 = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM has SHA-256", e);
    }
  }

  /** Starts reading {@code request}; the answer follows its last byte. */
  static void receive(HttpServerRequest request, boolean transcription, long seed) {
    new AudioUpload(request, transcription, seed).start();
  }

  private void start() {
    request.handler(
        chunk -> {
          if (refused) {
            return;
          }
          received += chunk.length();
          if (received > MAX_BYTES) {
            refused = true;
            ApiError error =
                new ApiError(
                    413,
                    "RequestEntityTooLarge",
                    "The upload is larger than " + MAX_BYTES + " bytes",
                    "file");
            request
                .response()
                .setStatusCode(413)
                .putHeader("content-type", "application/json")
                .putHeader("connection", "close")
                .end(error.body().encode())
                .onComplete(v -> request.connection().close());
            return;
          }
          sha256.update(chunk.getBytes());
        });
    request.endHandler(v -> answer());
    if ("100-continue".equalsIgnoreCase(request.getHeader("expect"))) {
      request.response().writeContinue();
    }
    request.resume();
  }

  private void answer() {
    if (refused || request.response().ended()) {
      return;
    }
    byte[] digest = sha256.digest();
    String hex = HexFormat.of().formatHex(digest);
    long digestSeed = 0;
    for (int i = 0; i < 8; i++) {
      digestSeed = (digestSeed << 8) | (digest[i] & 0xFF);
    }
    String text = TokenPlan.create(seed, digestSeed, 8, 8, true).fullText();
    text = Character.toUpperCase(text.charAt(0)) + text.substring(1) + ".";
    JsonObject body = new JsonObject().put("text", text);
    if (transcription) {
      long seconds = (received + BYTES_PER_SECOND - 1) / BYTES_PER_SECOND;
      body.put("usage", new JsonObject().put("type", "duration").put("seconds", seconds));
    }
    request
        .response()
        .setStatusCode(200)
        .putHeader("content-type", "application/json")
        .putHeader(RECEIVED_BYTES, Long.toString(received))
        .putHeader(RECEIVED_SHA256, hex)
        .end(body.encode());
  }
}
