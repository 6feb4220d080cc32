package io.phasemeter.proxy.gateway;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.HexFormat;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code phasemeter hash-key}: prints the SHA-256 of a key read from standard input, the value the
 * keys file's {@code sha256} expects; or, with {@code --new}, makes a fresh key and prints it with
 * its hash.
 */
@Command(
    name = "phasemeter hash-key",
    mixinStandardHelpOptions = true,
    description = {
      "Prints the lower-case hex SHA-256 of the key read from standard input (one trailing"
          + " newline is ignored), for the 'sha256' of an entry in the keys file.",
      "With --new, makes a fresh random key (32 bytes, base64url, prefixed 'pm-') and prints the"
          + " key and its hash; hand the key to the client and put only the hash in the file."
    },
    footer = {
      "",
      "Examples:",
      "  printf %%s \"$KEY\" | phasemeter hash-key",
      "  phasemeter hash-key --new",
      "",
      "Exit codes: 0 printed, 2 bad usage or an empty or malformed key."
    },
    exitCodeOnInvalidInput = 2)
public final class HashKeyMain implements Callable<Integer> {

  @Option(names = "--new", description = "make a fresh key instead of reading one")
  boolean fresh;

  private final PrintWriter stdout;
  private final PrintWriter stderr;
  private final InputStream stdin;
  private final SecureRandom random;

  HashKeyMain(PrintWriter stdout, PrintWriter stderr, InputStream stdin, SecureRandom random) {
    this.stdout = stdout;
    this.stderr = stderr;
    this.stdin = stdin;
    this.random = random;
  }

  public static void main(String[] args) {
    PrintWriter out = new PrintWriter(System.out, true, StandardCharsets.UTF_8);
    PrintWriter err = new PrintWriter(System.err, true, StandardCharsets.UTF_8);
    int code = commandLine(out, err, System.in).execute(args);
    out.flush();
    if (code != 0) {
      System.exit(code);
    }
  }

  /** The command line, reading {@code in} and writing to the given streams (tests use it). */
  public static CommandLine commandLine(PrintWriter out, PrintWriter err, InputStream in) {
    CommandLine cl = new CommandLine(new HashKeyMain(out, err, in, new SecureRandom()));
    cl.setOut(out);
    cl.setErr(err);
    return cl;
  }

  /** The lower-case hex SHA-256 of {@code key}'s UTF-8 bytes, as the keys file stores it. */
  public static String hash(String key) {
    return HexFormat.of().formatHex(KeyStore.sha256(key.getBytes(StandardCharsets.UTF_8)));
  }

  @Override
  public Integer call() {
    if (fresh) {
      byte[] bytes = new byte[32];
      random.nextBytes(bytes);
      String key = "pm-" + Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
      String hash = hash(key);
      stdout.println("key:    " + key);
      stdout.println("sha256: " + hash);
      stdout.flush();
      stderr.println(
          "add to the keys file: - {name: NAME, sha256: \""
              + hash
              + "\", rpm: 600, tpm: 200000, priority: normal}"
              + " (above its final '...' line; write the file by rename)");
      stderr.flush();
      return 0;
    }
    String key;
    try {
      key = readKey();
    } catch (IOException e) {
      stderr.println("phasemeter hash-key: cannot read standard input (" + e.getMessage() + ")");
      return 2;
    }
    if (key.isEmpty()) {
      stderr.println("phasemeter hash-key: no key on standard input");
      return 2;
    }
    // A key with blanks or control characters would not survive an HTTP header intact, so its
    // hash would never match what the proxy sees.
    for (int i = 0; i < key.length(); i++) {
      char c = key.charAt(i);
      if (Character.isWhitespace(c) || Character.isISOControl(c)) {
        stderr.println(
            "phasemeter hash-key: the key contains a blank, a line break or a control character"
                + " (at position "
                + i
                + "); read one key on one line");
        return 2;
      }
    }
    stdout.println(hash(key));
    stdout.flush();
    return 0;
  }

  /** Standard input as UTF-8, without one trailing line break ({@code \n} or {@code \r\n}). */
  private String readKey() throws IOException {
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    stdin.transferTo(buf);
    String s = buf.toString(StandardCharsets.UTF_8);
    if (s.endsWith("\n")) {
      s = s.substring(0, s.length() - 1);
      if (s.endsWith("\r")) {
        s = s.substring(0, s.length() - 1);
      }
    }
    return s;
  }
}
