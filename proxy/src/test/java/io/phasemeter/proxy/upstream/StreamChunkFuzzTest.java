package io.phasemeter.proxy.upstream;

import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * {@link StreamChunk} under Jazzer, against the Jackson-based scan it replaced: whatever the bytes,
 * the byte scan reads them as Jackson read them decoded to a String (every field, MALFORMED
 * included), and never throws.
 *
 * <p>Plain {@code mvn test} replays the corpus in {@code
 * src/test/resources/io/phasemeter/proxy/upstream/StreamChunkFuzzTestInputs/}; with {@code
 * JAZZER_FUZZ=1} Jazzer fuzzes for {@code maxDuration} (the {@code fuzz} profile, README).
 */
class StreamChunkFuzzTest {

  @FuzzTest(maxDuration = "25s")
  void inspectReadsBytesAsJacksonReadsTheirText(byte[] payload) {
    StreamChunkDifferentialTest.assertSameReading(payload);
  }
}
