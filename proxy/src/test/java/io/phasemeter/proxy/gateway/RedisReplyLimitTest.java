package io.phasemeter.proxy.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The RESP stream read ahead of the Redis client's parser: what passes, what is refused. */
class RedisReplyLimitTest {

  /** The script's answer, HELLO's (RESP3), CLUSTER SLOTS' and a few more that must pass. */
  private static final String[] GOOD = {
    "*6\r\n:1\r\n:0\r\n:59\r\n:1000000\r\n:-1\r\n:-1\r\n",
    "%3\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n$7\r\nmodules\r\n*0\r\n",
    "*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n$3\r\nabc\r\n%1\r\n"
        + "$8\r\nhostname\r\n$0\r\n\r\n",
    "$40\r\n" + "a".repeat(40) + "\r\n",
    "+PONG\r\n",
    "+\r\n",
    "-NOSCRIPT No matching script. Please use EVAL.\r\n",
    "$-1\r\n",
    "*-1\r\n",
    "_\r\n",
    "#t\r\n",
    ",3.25\r\n",
    "(12345678901234567890\r\n",
    "~2\r\n:1\r\n:2\r\n",
    "$0\r\n\r\n",
  };

  private static ByteBuf bytes(String s) {
    return Unpooled.copiedBuffer(s, StandardCharsets.ISO_8859_1);
  }

  /** Writes {@code parts} in: the refusal they caused, or null. */
  private static Throwable feed(EmbeddedChannel ch, ByteBuf... parts) {
    try {
      ch.writeInbound((Object[]) parts);
      ch.checkException();
      return null;
    } catch (RedisReplyLimit.Refused e) {
      return e;
    }
  }

  /** What came out of the limit, as one string. */
  private static String read(EmbeddedChannel ch) {
    StringBuilder sb = new StringBuilder();
    ByteBuf b;
    while ((b = ch.readInbound()) != null) {
      sb.append(b.toString(StandardCharsets.ISO_8859_1));
      b.release();
    }
    return sb.toString();
  }

  @Test
  void wellFormedRepliesPassUnchangedHoweverTheyAreSplit() {
    String all = String.join("", GOOD);
    for (int cut = 0; cut <= all.length(); cut++) {
      EmbeddedChannel ch = new EmbeddedChannel(new RedisReplyLimit());
      assertThat(feed(ch, bytes(all.substring(0, cut)), bytes(all.substring(cut)))).isNull();
      assertThat(read(ch)).as("cut at %d", cut).isEqualTo(all);
      assertThat(ch.isOpen()).isTrue();
    }
  }

  @Test
  void aReplyUpToTheLimitPassesAndOneByteMoreIsRefusedAtItsHeader() {
    int payload = RedisReplyLimit.MAX_REPLY_BYTES - "$262137\r\n\r\n".length();
    String header = "$" + payload + "\r\n";
    assertThat(header.length() + payload + 2).isEqualTo(RedisReplyLimit.MAX_REPLY_BYTES);
    EmbeddedChannel ok = new EmbeddedChannel(new RedisReplyLimit());
    assertThat(feed(ok, bytes(header), bytes("x".repeat(payload) + "\r\n"))).isNull();
    assertThat(read(ok)).hasSize(RedisReplyLimit.MAX_REPLY_BYTES);

    EmbeddedChannel tooLarge = new EmbeddedChannel(new RedisReplyLimit());
    assertThat(feed(tooLarge, bytes("$" + (payload + 1) + "\r\n")))
        .isInstanceOf(RedisReplyLimit.Refused.class)
        .hasMessageContaining("a bulk string of " + (payload + 1) + " bytes");
  }

  @Test
  void aRefusalPassesTheRepliesBeforeItAndDropsEverythingAfter() {
    EmbeddedChannel ch = new EmbeddedChannel(new RedisReplyLimit());
    ByteBuf tail = bytes("+OK\r\n");
    assertThat(feed(ch, bytes(GOOD[0] + "$524288000\r\nxxxx")))
        .isInstanceOf(RedisReplyLimit.Refused.class);
    assertThat(feed(ch, tail)).isNull();
    assertThat(read(ch)).isEqualTo(GOOD[0]);
    assertThat(tail.refCnt()).as("dropped and released").isZero();
  }

  @Test
  void whatTheClientWouldHoldWithoutEndOrCannotParseIsRefused() {
    String[][] bad = {
      {"*2147483647\r\n", "an array of 2147483647 elements"},
      {"%87382\r\n", "an array of 87382 elements"},
      {"*1\r\n".repeat(RedisReplyLimit.MAX_DEPTH + 1) + ":1\r\n", "nested deeper than 8"},
      {"+" + "x".repeat(RedisReplyLimit.MAX_REPLY_BYTES), "larger than 262144 bytes"},
      {":1\nxxxx", "a \\n without its \\r"},
      {"+OK\rx", "a \\r without its \\n"},
      {"$3\r\nabcd\r\n", "longer than its length"},
      {"$-2\r\n", "a negative length"},
      {"$\r\n", "a malformed length"},
      {"*+1\r\n", "a malformed number"},
      {":99999999999999999999\r\n", "a number out of range"},
      {":1x\r\n", "a malformed number"},
      {"#x\r\n", "a malformed boolean"},
      {"_x\r\n", "a malformed null"},
      {",\r\n", "an empty value"},
      {"|1\r\n+a\r\n+b\r\n", "type byte '|'"},
      {">2\r\n+message\r\n+x\r\n", "type byte '>'"},
      {"!21\r\nSYNTAX invalid syntax\r\n", "type byte '!'"},
      {"\r\n", "type byte 13"},
      {"x", "type byte 'x'"},
    };
    for (String[] b : bad) {
      EmbeddedChannel ch = new EmbeddedChannel(new RedisReplyLimit());
      assertThat(feed(ch, bytes(b[0])))
          .as(b[1])
          .isInstanceOf(RedisReplyLimit.Refused.class)
          .hasMessageContaining(b[1]);
      assertThat(read(ch)).as(b[0]).isEmpty();
    }
  }
}
