package io.phasemeter.load.workload.replay;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * What a run's outputs (pairs.csv's {@code session}) say for a replayed row's session instead of
 * its id, which is the user's data and may name a user: the first 16 hex digits of SHA-256 of the
 * run's salt (its trace-id prefix), a NUL and the id. The same session has one label in a run and
 * another in the next; the {@code x-session-id} header sent keeps the id itself (docs/design.md §7,
 * "Replaying a trace"). Thread-safe: a label is computed once per session, on first use (two
 * threads may both compute it; they compute the same).
 */
public final class SessionLabels {
  private final Trace trace;
  private final byte[] salt;
  private final String[] labels;

  SessionLabels(Trace trace, String salt) {
    this.trace = trace;
    this.salt = (salt + '\0').getBytes(StandardCharsets.UTF_8);
    this.labels = new String[trace.sessions()];
  }

  /** Row {@code row}'s session label, or null outside any session (or past the rows). */
  public String label(int row) {
    if (row < 0 || row >= trace.rows()) {
      return null;
    }
    int s = trace.session(row);
    if (s < 0) {
      return null;
    }
    String l = labels[s];
    if (l == null) {
      l = hash(trace.sessionId(row));
      labels[s] = l;
    }
    return l;
  }

  private String hash(String id) {
    MessageDigest sha;
    try {
      sha = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
    sha.update(salt);
    byte[] d = sha.digest(id.getBytes(StandardCharsets.US_ASCII));
    return HexFormat.of().formatHex(d, 0, 8);
  }
}
