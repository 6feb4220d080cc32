package io.phasemeter.bench;

import io.phasemeter.proxy.upstream.SseEvent;
import io.phasemeter.proxy.upstream.SseParser;
import io.phasemeter.proxy.upstream.StreamChunk;
import io.vertx.core.buffer.Buffer;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * The streaming relay's per-chunk work, one operation = one network chunk (one SSE event), so
 * {@code gc.alloc.rate.norm} reads as bytes allocated per chunk. {@code sseParse}: the parser
 * alone; {@code inspect}: classifying a content chunk's JSON (its UTF-8 bytes, as the parser hands
 * them over); {@code relay}: what GeneratePhase does per chunk before the write (parse, then
 * inspect each event).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 3, time = 2)
@Fork(1)
public class RelayBenchmark {
  private static final int CHUNKS = VllmStream.TOKENS + 4;

  private Buffer[] chunks;
  private Buffer content;
  private Blackhole hole;
  private Consumer<SseEvent> toHole;
  private Consumer<SseEvent> inspectToHole;

  @Setup
  public void setUp(Blackhole bh) {
    chunks = VllmStream.chunks();
    List<String> events = VllmStream.events();
    content = Buffer.buffer(events.get(1));
    if (chunks.length != CHUNKS) {
      throw new IllegalStateException("stream has " + chunks.length + " chunks");
    }
    hole = bh;
    toHole = hole::consume;
    inspectToHole = e -> hole.consume(StreamChunk.inspect(e));
  }

  @Benchmark
  @OperationsPerInvocation(CHUNKS)
  public void sseParse() {
    SseParser parser = new SseParser(1 << 20);
    for (Buffer c : chunks) {
      parser.feed(c, toHole);
    }
  }

  @Benchmark
  public StreamChunk inspect() {
    return StreamChunk.inspect(content);
  }

  @Benchmark
  @OperationsPerInvocation(CHUNKS)
  public void relay() {
    SseParser parser = new SseParser(1 << 20);
    for (Buffer c : chunks) {
      parser.feed(c, inspectToHole);
    }
  }
}
