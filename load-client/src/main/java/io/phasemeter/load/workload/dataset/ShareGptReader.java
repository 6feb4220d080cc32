package io.phasemeter.load.workload.dataset;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.DigestInputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Set;

/**
 * Reads a ShareGPT JSON file as a stream (Jackson's {@link JsonParser}, never the whole tree:
 * ShareGPT_V3 is ~670 MB): one entry at a time, and of each entry only the strings it needs. The
 * prompt is the first human turn answered by a gpt turn (the next one), the output length the gpt
 * turn's, estimated as {@code ceil(chars / 4)}; the rest of the conversation is skipped unread.
 * Every string passes through a {@link LongStringCutter}, so none longer than {@link
 * Limits#maxValueBytes()} is held.
 *
 * <p>The file's SHA-256 is taken on the same pass, and over the rest of the file when a limit stops
 * the reading.
 */
final class ShareGptReader {
  /** The stream under the parser is the reader's to close: the digest reads on after it. */
  private static final JsonFactory JSON =
      JsonFactory.builder().disable(StreamReadFeature.AUTO_CLOSE_SOURCE).build();

  private static final Set<String> HUMAN = Set.of("human", "user");
  private static final Set<String> GPT = Set.of("gpt", "assistant", "chatgpt");

  private final Path file;
  private final LongStringCutter cutter;
  private final JsonParser p;
  private final DatasetEntries.Builder entries;

  private ShareGptReader(
      Path file, LongStringCutter cutter, JsonParser p, DatasetEntries.Builder entries) {
    this.file = file;
    this.cutter = cutter;
    this.p = p;
    this.entries = entries;
  }

  static DatasetEntries read(Path file, Limits limits, DatasetEntries.Builder entries) {
    MessageDigest sha = sha256();
    try (InputStream raw = Files.newInputStream(file);
        DigestInputStream digest =
            new DigestInputStream(new BufferedInputStream(raw, 1 << 16), sha)) {
      LongStringCutter cutter = new LongStringCutter(digest, limits.maxValueBytes());
      try (JsonParser p = JSON.createParser(cutter)) {
        new ShareGptReader(file, cutter, p, entries).entries();
      } catch (JsonProcessingException e) {
        // Jackson's message may quote the file's text: only where, never what.
        throw error(file, e.getLocation(), "not valid JSON");
      }
      // The digest covers the whole file, also when a limit stopped the parser.
      digest.transferTo(OutputStream.nullOutputStream());
    } catch (IOException e) {
      throw new IllegalArgumentException(
          "--dataset " + file + ": cannot read it (" + e.getClass().getSimpleName() + ")");
    }
    return entries.build(HexFormat.of().formatHex(sha.digest()));
  }

  /** The top-level array, entry by entry, until its end or a limit. */
  private void entries() throws IOException {
    JsonToken t = p.nextToken();
    if (t == null) {
      throw new IllegalArgumentException("--dataset " + file + ": the file is empty");
    }
    if (t != JsonToken.START_ARRAY) {
      throw error(
          p.currentTokenLocation(),
          "not a ShareGPT file: the top level is not a JSON array of entries");
    }
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      if (t == null) {
        throw error(p.currentLocation(), "the file ends inside the array of entries");
      }
      entries.read();
      if (!entry(t)) {
        return; // a limit: the rest is not read
      }
    }
    if (p.nextToken() != null) {
      throw error(p.currentTokenLocation(), "more after the array of entries");
    }
  }

  /**
   * One entry, whose first token is {@code t}: kept, or skipped and counted.
   *
   * @return false when a limit stopped the reading
   */
  private boolean entry(JsonToken t) throws IOException {
    if (t != JsonToken.START_OBJECT) {
      p.skipChildren();
      entries.skip(Skip.MALFORMED);
      return true;
    }
    Turns turns = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken v = p.nextToken();
      if ("conversations".equals(name) && turns == null && v == JsonToken.START_ARRAY) {
        turns = conversation();
      } else {
        p.skipChildren();
      }
    }
    if (turns == null || turns.malformed) {
      entries.skip(Skip.MALFORMED);
      return true;
    }
    if (turns.prompt == null) {
      entries.skip(Skip.NO_PAIR);
      return true;
    }
    if (turns.cut) {
      entries.skip(Skip.VALUE_TOO_LONG);
      return true;
    }
    int override = entries.outputOverride();
    int promptTokens = DatasetEntries.estimateTokens(turns.prompt);
    int output = override > 0 ? override : DatasetEntries.estimateTokens(turns.completion);
    Skip why = Skip.lengths(promptTokens, output, override > 0);
    if (why != null) {
      entries.skip(why);
      return true;
    }
    return entries.add(turns.prompt, promptTokens, output);
  }

  /** What a conversation gave: the pair, if any, or why not. */
  private static final class Turns {
    String prompt;
    String completion;
    boolean cut;
    boolean malformed;
  }

  /** The {@code conversations} array, whose {@code START_ARRAY} was just read. */
  private Turns conversation() throws IOException {
    Turns turns = new Turns();
    String human = null;
    boolean humanCut = false;
    boolean afterHuman = false;
    JsonToken t;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      if (turns.prompt != null || turns.malformed) {
        p.skipChildren(); // the rest is not needed
        continue;
      }
      if (t != JsonToken.START_OBJECT) {
        p.skipChildren();
        turns.malformed = true;
        continue;
      }
      String role = null;
      String text = null;
      boolean cut = false;
      boolean hasValue = false;
      boolean bad = false;
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken v = p.nextToken();
        if ("from".equals(name) && v == JsonToken.VALUE_STRING) {
          role = p.getText();
        } else if ("value".equals(name) && v == JsonToken.VALUE_STRING) {
          hasValue = true;
          // Read only what is needed; a value before its role is read all the same.
          boolean needed =
              role == null
                  || HUMAN.contains(role)
                  || (afterHuman && GPT.contains(role) && entries.outputOverride() == 0);
          if (needed) {
            text = p.getText();
            cut = cutter.wasCut(p.currentLocation().getByteOffset());
          }
        } else if ("from".equals(name) || "value".equals(name)) {
          bad = true;
          p.skipChildren();
        } else {
          p.skipChildren();
        }
      }
      if (bad || role == null || !hasValue) {
        turns.malformed = true;
      } else if (HUMAN.contains(role)) {
        human = text;
        humanCut = cut;
        afterHuman = true;
      } else if (afterHuman && GPT.contains(role)) {
        turns.prompt = human;
        turns.completion = text;
        turns.cut = humanCut || cut;
      } else {
        afterHuman = false;
      }
    }
    return turns;
  }

  private IllegalArgumentException error(JsonLocation at, String what) {
    return error(file, at, what);
  }

  private static IllegalArgumentException error(Path file, JsonLocation at, String what) {
    int line = at == null ? -1 : at.getLineNr();
    return new IllegalArgumentException(
        "--dataset " + file + (line > 0 ? ":" + line : "") + ": " + what);
  }

  static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("the JVM has no SHA-256", e);
    }
  }
}
