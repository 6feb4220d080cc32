package io.phasemeter.load;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

/** The build's version and the git commit it runs from, recorded with every result. */
public final class Version {
  private Version() {}

  public static String version() {
    try (InputStream in =
        Version.class.getResourceAsStream("/phasemeter-load-version.properties")) {
      Properties p = new Properties();
      if (in != null) {
        p.load(in);
      }
      return p.getProperty("version", "dev");
    } catch (Exception e) {
      return "dev";
    }
  }

  /** {@code git rev-parse HEAD} in the working directory, or "unknown" outside a checkout. */
  public static String gitCommit() {
    try {
      Process p = new ProcessBuilder("git", "rev-parse", "HEAD").redirectErrorStream(true).start();
      String s = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
      if (p.waitFor(5, TimeUnit.SECONDS) && p.exitValue() == 0 && s.matches("[0-9a-f]{40}")) {
        String dirty =
            new String(
                    new ProcessBuilder("git", "status", "--porcelain", "--untracked-files=no")
                        .start()
                        .getInputStream()
                        .readAllBytes(),
                    StandardCharsets.UTF_8)
                .trim();
        return dirty.isEmpty() ? s : s + "-dirty";
      }
    } catch (Exception e) {
      // Not a checkout, or no git: say so.
    }
    return "unknown";
  }
}
