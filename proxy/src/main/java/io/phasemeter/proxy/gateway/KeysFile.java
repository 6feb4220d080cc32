package io.phasemeter.proxy.gateway;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.phasemeter.proxy.config.ConfigException;
import io.phasemeter.proxy.config.YamlFiles;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * The keys file (docs/design.md §9):
 *
 * <pre>{@code
 * keys:
 *   - {name: team-a, sha256: <hex>, rpm: 600, tpm: 200000, priority: high,
 *      allow_priority_header: false, admin: false, slo_override: true}
 * ...
 * }</pre>
 *
 * <p>{@code rpm} and {@code tpm} default to 0 (unlimited), {@code priority} to {@code normal},
 * {@code allow_priority_header} and {@code admin} to false and {@code slo_override} to true; {@code
 * name} and {@code sha256} are required. A field written with no value ({@code rpm:} alone) is an
 * error, not its default. Unknown keys, duplicate names and duplicate hashes are errors. Every
 * problem becomes a {@link ConfigException} of one line naming the file and the key path, e.g.
 * {@code keys.yaml: keys[2].sha256: must be 64 hex characters}. {@code keys: []} is valid and
 * refuses every client.
 *
 * <p>The file ends with YAML's document end line, {@code ...}, and a newline. Cut at the end of any
 * line, a block-style file is still valid YAML, and would read as fewer keys or as a key whose
 * limits are missing, so unlimited: a file without that last line is taken for half-written and
 * refused. The file is meant to be written by rename (write {@code keys.yaml.tmp}, then {@code mv}
 * it over {@code keys.yaml}), so that a reader never sees part of it.
 *
 * @param keys the configured keys, in file order
 */
public record KeysFile(List<ApiKey> keys) {

  private static final ObjectMapper YAML =
      new ObjectMapper(new YAMLFactory()).enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION);
  private static final List<String> FIELDS =
      List.of(
          "name",
          "sha256",
          "rpm",
          "tpm",
          "priority",
          "allow_priority_header",
          "admin",
          "slo_override");

  /** The line a complete keys file ends with: YAML's document end marker. */
  public static final String END = "...";

  public KeysFile {
    keys = List.copyOf(keys);
    Map<String, Integer> names = new HashMap<>();
    Map<String, Integer> hashes = new HashMap<>();
    for (int i = 0; i < keys.size(); i++) {
      ApiKey k = keys.get(i);
      Integer same = names.putIfAbsent(k.name(), i);
      if (same != null) {
        throw new IllegalArgumentException(
            "keys[" + i + "].name: '" + k.name() + "' is already used by keys[" + same + "]");
      }
      same = hashes.putIfAbsent(k.sha256(), i);
      if (same != null) {
        throw new IllegalArgumentException(
            "keys[" + i + "].sha256: the same key hash as keys[" + same + "]; use one entry");
      }
    }
  }

  /**
   * Reads and validates {@code file}. This does blocking file IO.
   *
   * @throws ConfigException naming the file and the key on any problem
   */
  public static KeysFile load(Path file) {
    return parse(YamlFiles.readText(file), file.toString());
  }

  /**
   * Parses keys-file YAML; {@code sourceName} names it in error messages.
   *
   * @throws ConfigException naming the source and the key on any problem
   */
  public static KeysFile parse(String yaml, String sourceName) {
    // An empty file is refused rather than read as "no keys": a file caught half-written by a
    // reload must not lock every client out.
    if (yaml.isBlank()) {
      throw new ConfigException(sourceName + ": empty; " + EXPECTED);
    }
    // Checked before the YAML: a prefix of a file cut at a line's end parses, and one cut
    // mid-line says nothing more useful than this.
    if (!endsComplete(yaml)) {
      throw new ConfigException(
          sourceName
              + ": does not end with the line '"
              + END
              + "' and a newline, so it looks half-written; write the file elsewhere and rename"
              + " it into place (e.g. write keys.yaml.tmp, then mv)");
    }
    JsonNode root = YamlFiles.readTree(YAML, yaml, sourceName);
    if (root == null || root.isMissingNode() || root.isNull()) {
      throw new ConfigException(sourceName + ": empty; " + EXPECTED);
    }
    if (!root.isObject()) {
      throw new ConfigException(sourceName + ": the top level must be a mapping with 'keys'");
    }
    Iterator<String> top = root.fieldNames();
    while (top.hasNext()) {
      String key = top.next();
      if (!key.equals("keys")) {
        throw new ConfigException(sourceName + ": " + key + ": unknown key (known: keys)");
      }
    }
    JsonNode list = root.get("keys");
    if (list == null || !list.isArray()) {
      throw new ConfigException(
          sourceName + ": keys: expected a list of keys (keys: [] refuses every client)");
    }
    List<ApiKey> out = new ArrayList<>();
    for (int i = 0; i < list.size(); i++) {
      out.add(key(list.get(i), sourceName + ": keys[" + i + "]"));
    }
    try {
      return new KeysFile(out);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(sourceName + ": " + e.getMessage());
    }
  }

  /** True when no key is configured, so every client is refused. */
  public boolean refusesEveryone() {
    return keys.isEmpty();
  }

  private static final String EXPECTED =
      "expected 'keys:' with a list, then a last line '"
          + END
          + "' (keys: [] refuses every client)";

  /**
   * Whether the text's last line that is not blank is {@link #END}, and a newline ends the text.
   */
  private static boolean endsComplete(String yaml) {
    if (!yaml.endsWith("\n")) {
      return false;
    }
    String body = yaml.stripTrailing();
    String last = body.substring(body.lastIndexOf('\n') + 1);
    return last.equals(END);
  }

  private static ApiKey key(JsonNode node, String at) {
    if (node == null || !node.isObject()) {
      throw new ConfigException(at + ": expected a mapping (name, sha256, rpm, tpm, priority…)");
    }
    Iterator<String> fields = node.fieldNames();
    while (fields.hasNext()) {
      String field = fields.next();
      if (!FIELDS.contains(field)) {
        throw new ConfigException(
            at + "." + field + ": unknown key (known: " + String.join(", ", FIELDS) + ")");
      }
      // "rpm:" with nothing after it is what a file cut after the colon reads as: never the
      // default (for rpm and tpm, unlimited).
      if (node.get(field).isNull()) {
        throw new ConfigException(at + "." + field + ": has no value" + hint(field));
      }
    }
    String name = text(node, "name", at);
    String sha256 = text(node, "sha256", at);
    long rpm = count(node, "rpm", at);
    long tpm = count(node, "tpm", at);
    Priority priority = Priority.NORMAL;
    JsonNode p = node.get("priority");
    if (p != null) {
      if (!p.isTextual()) {
        throw new ConfigException(at + ".priority: expected high, normal or low");
      }
      try {
        priority = Priority.parse(p.asText());
      } catch (IllegalArgumentException e) {
        throw new ConfigException(at + ".priority: " + e.getMessage());
      }
    }
    boolean allowHeader = false;
    JsonNode h = node.get("allow_priority_header");
    if (h != null) {
      if (!h.isBoolean()) {
        throw new ConfigException(at + ".allow_priority_header: expected true or false");
      }
      allowHeader = h.booleanValue();
    }
    boolean admin = false;
    JsonNode a = node.get("admin");
    if (a != null) {
      if (!a.isBoolean()) {
        throw new ConfigException(at + ".admin: expected true or false");
      }
      admin = a.booleanValue();
    }
    boolean sloOverride = true;
    JsonNode o = node.get("slo_override");
    if (o != null) {
      if (!o.isBoolean()) {
        throw new ConfigException(at + ".slo_override: expected true or false");
      }
      sloOverride = o.booleanValue();
    }
    try {
      return new ApiKey(name, sha256, rpm, tpm, priority, allowHeader, admin, sloOverride);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(at + "." + e.getMessage());
    }
  }

  private static String hint(String field) {
    return switch (field) {
      case "rpm", "tpm" -> " (write 0 for unlimited)";
      case "priority" -> " (write high, normal or low)";
      case "allow_priority_header", "admin", "slo_override" -> " (write true or false)";
      default -> "";
    };
  }

  private static String text(JsonNode node, String field, String at) {
    JsonNode v = node.get(field);
    if (v == null) {
      throw new ConfigException(at + "." + field + ": missing");
    }
    // Only a string is accepted: YAML would read an all-digit hash as a number and lose digits.
    if (!v.isTextual()) {
      throw new ConfigException(at + "." + field + ": expected a string (quote it)");
    }
    return v.asText();
  }

  private static long count(JsonNode node, String field, String at) {
    JsonNode v = node.get(field);
    if (v == null) {
      return 0;
    }
    if (!v.isIntegralNumber() || !v.canConvertToLong()) {
      throw new ConfigException(
          at + "." + field + ": expected a whole number (0 = unlimited), got '" + v.asText() + "'");
    }
    return v.longValue();
  }

  // A keys file holds only hashes, but a listing of them has no use in a log line.
  @Override
  public String toString() {
    return "KeysFile[" + keys.size() + " keys]";
  }
}
