package io.phasemeter.load;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * config/load-client.jvm, the argument file ./phasemeter load and bench/run give the load client's
 * JVM: a JVM starts with it, and it sets what the client's timing relies on.
 */
class LoadClientJvmOptionsTest {
  private static final Path FILE = Path.of("..", "config", "load-client.jvm");

  private static String java() {
    return ProcessHandle.current().info().command().orElse("java");
  }

  @Test
  void aJvmStartsWithTheFileAndGetsItsHeapAndCollectorSettings() throws Exception {
    assertThat(FILE).exists();
    Process p =
        new ProcessBuilder(java(), "@" + FILE, "-XX:+PrintFlagsFinal", "-version")
            .redirectErrorStream(true)
            .start();
    String flags = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(flags).isZero();
    assertThat(flags)
        .containsPattern("MaxHeapSize\\s+= 4294967296 ")
        .containsPattern("InitialHeapSize\\s+= 1073741824 ")
        .containsPattern("NewSize\\s+= 805306368 ")
        .containsPattern("ExplicitGCInvokesConcurrent\\s+= true ")
        .containsPattern("AlwaysPreTouch\\s+= true ")
        .containsPattern("UseG1GC\\s+= true ");
  }

  @Test
  void withoutTheFileTheClientLeavesTheCollectorAlone() throws IOException {
    // This test JVM runs without -XX:+ExplicitGCInvokesConcurrent: System.gc() would be a full
    // collection, so the client must not call it before its clock.
    assertThat(Files.readString(FILE)).contains("-XX:+ExplicitGCInvokesConcurrent");
    assertThat(io.phasemeter.load.schedule.WarmUp.youngCollectionOnRequest()).isFalse();
  }
}
