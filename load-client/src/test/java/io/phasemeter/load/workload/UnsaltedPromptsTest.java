package io.phasemeter.load.workload;

import static org.assertj.core.api.Assertions.assertThat;

import io.phasemeter.load.workload.replay.Replay;
import io.phasemeter.load.workload.replay.SharedPrefix;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --prompt-salt none} sends exactly the prompts of before salts existed: each generator's
 * bodies, byte for byte, against their SHA-256 taken from the code before salts (commit aa95c61),
 * warm-up requests ({@code seq < 0}) included. One change on purpose: the warm-up of {@code
 * --prefix-tokens}, which sent the run's own prefixes and now sends prefixes of its own ({@link
 * PromptSaltTest}).
 */
class UnsaltedPromptsTest {
  private static final Mix MIX = Mix.parse("1k:8=0.5,200:4=0.3,40:3=0.2");
  private static final Mix PREFIXED = Mix.parse("200:4=0.5,300:8=0.5");

  @TempDir Path dir;

  /** The SHA-256 of requests {@code from} … {@code to}'s bodies, each followed by a newline. */
  static String digest(Workload w, long from, long to) throws Exception {
    MessageDigest sha = MessageDigest.getInstance("SHA-256");
    for (long seq = from; seq <= to; seq++) {
      sha.update(w.request(seq).body().getBytes());
      sha.update((byte) '\n');
    }
    return HexFormat.of().formatHex(sha.digest());
  }

  @Test
  void theSyntheticWorkloadsBodiesAreTodays() throws Exception {
    assertThat(digest(Workload.completions("m", MIX, true, 7).withSalt(PromptSalt.NONE), -5, 40))
        .isEqualTo("5e38468eeb714739987012626e69b5c33390919817b48700e43d2bae4ab40bfc");
    assertThat(digest(Workload.completions("m", MIX, false, 1), -5, 40))
        .isEqualTo("66ae7c7987f4780521a4646ca559cea62ed501eb99f729c664b7ef2711bd5009");
    assertThat(digest(Workload.embeddings("m", MIX, 7).withSalt(PromptSalt.NONE), -5, 40))
        .isEqualTo("988857087283e3a7642315e989e07bca93c1fdf0db801664dc3450c163e51d71");
    assertThat(digest(Workload.chat("m", 64, true, 7).withSalt(PromptSalt.NONE), -5, 40))
        .isEqualTo("3fbff2b7d4e81f7383ab32fddb03143744b4d350392e46e2d2a98a6255878940");
    assertThat(digest(Workload.responses("m", 64, false, 7).withSalt(PromptSalt.NONE), -5, 40))
        .isEqualTo("aa05b26e6f15de79bc4e22b85ba19f5d9f517fc46f765055c1e28f27e424a24b");
  }

  @Test
  void sharedPrefixesBodiesAreTodays() throws Exception {
    SharedPrefix sp = new SharedPrefix(100, 3);
    assertThat(digest(sp.workload("m", Api.COMPLETIONS, PREFIXED, true, 7, PromptSalt.NONE), 0, 40))
        .isEqualTo("e0e8ef48017341e346af7a5cebdf6eac67c79ebd3ef45f6214382060a0cf12e6");
    assertThat(digest(sp.workload("m", Api.EMBEDDINGS, PREFIXED, false, 7, PromptSalt.NONE), 0, 40))
        .isEqualTo("784b9d5d6e9d09b5e585fd02f744f5a482d87482a84097e9ed9d21bf60df97f1");
    // The warm-up's prefixes are no longer the run's: its bodies changed, on purpose.
    assertThat(
            digest(sp.workload("m", Api.COMPLETIONS, PREFIXED, true, 7, PromptSalt.NONE), -5, -1))
        .isNotEqualTo("491b087992f0ab6b176c66d6617d037eb1b11ea04bb4ff1c003eacd985bd8895");
  }

  @Test
  void aReplayedTracesBodiesAreTodays() throws Exception {
    Path trace = dir.resolve("t.jsonl");
    Files.writeString(trace, PromptSaltTest.TRACE);
    Map<Replay.Prefixes, String> expected =
        Map.of(
            Replay.Prefixes.SHARED,
            "94ae71566be1e2d596b0fb5cdf22e73ec38947fbe74067bb8b1512b43a3763e0",
            Replay.Prefixes.DISTINCT,
            "64bc55f20a9b153e45143224cc30c44d58b5e58c56914ba03d3f31e26aebcfcb");
    for (Replay.Prefixes p : Replay.Prefixes.values()) {
      Workload w =
          new Replay(trace, Replay.Format.JSONL, 1.0, 0, p)
              .load()
              .workload("m", true, 7, PromptSalt.NONE);
      assertThat(digest(w, -6, 6)).as(p.key()).isEqualTo(expected.get(p));
    }
  }

  @Test
  void sessionsTurnsAreTodays() throws Exception {
    assertThat(conversations(Api.COMPLETIONS))
        .isEqualTo("d73b6691391660cf9c0c646dacd7f5d40e0e771c30f55a078a53a4a425bdf9e9");
    // Chat turns are numbered by session and turn since the review (no two sessions send the same
    // prompt): their bodies changed on purpose; the digest is the numbering's.
    assertThat(conversations(Api.CHAT))
        .isEqualTo("4f918ff4726593bcade2507ac766f8c606645381ec2e50b01f02a711cc140e93");
  }

  /** The SHA-256 of three sessions' four turns each, every answer 5 tokens. */
  private static String conversations(Api api) throws Exception {
    Conversation.Shape shape =
        new Conversation.Shape(
            "m",
            api,
            api == Api.COMPLETIONS ? Mix.parse("40:3=0.5,20:7=0.5") : null,
            16,
            true,
            7,
            Map.of(),
            new SessionSpec(2, 4, Duration.ZERO, 100_000),
            PromptSalt.NONE);
    MessageDigest sha = MessageDigest.getInstance("SHA-256");
    for (int s = 1; s <= 3; s++) {
      Conversation c = new Conversation(shape, "r-s" + s, s);
      while (!c.finished()) {
        sha.update(c.next().body().getBytes());
        c.answered(5, "answer " + s);
      }
    }
    return HexFormat.of().formatHex(sha.digest());
  }
}
