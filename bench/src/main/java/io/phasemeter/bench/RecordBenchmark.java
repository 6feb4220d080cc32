package io.phasemeter.bench;

import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.phasemeter.proxy.pipeline.RequestContext;
import io.phasemeter.proxy.telemetry.RequestRecord;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One request's record: taken when it ends, rendered as JSON when /admin/records or the feed reads
 * it.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 3, time = 2)
@Fork(1)
public class RecordBenchmark {
  private SdkTracerProvider tracing;
  private RequestContext ctx;

  @Setup
  public void setUp() {
    tracing = SdkTracerProvider.builder().build();
    ctx = RecordFixture.finished(tracing.get("bench"));
  }

  @TearDown
  public void tearDown() {
    tracing.close();
  }

  /** What every request pays when it ends: the record's numbers, kept. */
  @Benchmark
  public RequestRecord take() {
    return RequestRecord.of(ctx, true);
  }

  /** What a reader pays (GET /admin/records/{id}, a feed subscriber): the JSON line. */
  @Benchmark
  public String render() {
    return RequestRecord.of(ctx, true).json();
  }
}
