package io.phasemeter.proxy.config;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.deser.std.StdScalarDeserializer;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import com.fasterxml.jackson.databind.exc.ValueInstantiationException;
import com.fasterxml.jackson.databind.module.SimpleModule;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.phasemeter.core.Durations;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Reads proxy.yaml: built-in defaults, then the file, then {@code PHASEMETER_<PATH>} environment
 * variables (e.g. {@code PHASEMETER_LISTEN_PORT=9090}, {@code PHASEMETER_POOLS_0_SLOTS=8}). Any
 * problem becomes a {@link ConfigException} whose message is one line naming file and key.
 */
public final class ConfigLoader {
  /** The prefix of environment overrides. */
  public static final String ENV_PREFIX = "PHASEMETER_";

  private static final String DEFAULTS = "/phasemeter-proxy-defaults.yaml";
  private static final ObjectMapper YAML =
      new ObjectMapper(new YAMLFactory())
          .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
          .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
          .enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES)
          .registerModule(new SimpleModule().addDeserializer(Duration.class, new DurationDeser()));

  private ConfigLoader() {}

  /** The built-in defaults alone (what {@code config/proxy.yaml} also describes). */
  public static ProxyConfig defaults() {
    return bind(defaultTree(), "built-in defaults");
  }

  /** Loads {@code file} with overrides from the process environment. */
  public static ProxyConfig load(Path file) {
    return load(file, System.getenv());
  }

  /** Loads {@code file} (null = defaults only) with overrides taken from {@code env}. */
  public static ProxyConfig load(Path file, Map<String, String> env) {
    String source = file == null ? "built-in defaults" : file.toString();
    ObjectNode tree = defaultTree();
    if (file != null) {
      JsonNode user;
      try {
        user = YAML.readTree(Files.readString(file));
      } catch (NoSuchFileException e) {
        throw new ConfigException(source + ": file not found");
      } catch (JsonProcessingException e) {
        throw new ConfigException(
            source
                + ": not valid YAML at line "
                + e.getLocation().getLineNr()
                + ": "
                + oneLine(e.getOriginalMessage()));
      } catch (IOException e) {
        throw new ConfigException(source + ": cannot read (" + e.getMessage() + ")");
      }
      if (user != null && !user.isMissingNode() && !user.isNull()) {
        if (!user.isObject()) {
          throw new ConfigException(source + ": the top level must be a mapping of keys");
        }
        merge(tree, (ObjectNode) user, tree.deepCopy());
      }
    }
    applyEnv(tree, env);
    return bind(tree, source);
  }

  /** Parses configuration text (tests use it). */
  public static ProxyConfig parse(String yaml, String sourceName) {
    try {
      Path tmp = Files.createTempFile("phasemeter", ".yaml");
      try {
        Files.writeString(tmp, yaml);
        ProxyConfig c = load(tmp, Map.of());
        return c;
      } catch (ConfigException e) {
        throw new ConfigException(e.getMessage().replace(tmp.toString(), sourceName));
      } finally {
        Files.deleteIfExists(tmp);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static ObjectNode defaultTree() {
    try (InputStream in = ConfigLoader.class.getResourceAsStream(DEFAULTS)) {
      return (ObjectNode) YAML.readTree(in);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Deep-merges {@code user} onto {@code base}. Arrays replace, except that every element of {@code
   * pools} is itself merged onto the default pool so a pool may omit queue and timeouts.
   */
  private static void merge(ObjectNode base, ObjectNode user, ObjectNode defaults) {
    Iterator<Map.Entry<String, JsonNode>> it = user.fields();
    while (it.hasNext()) {
      Map.Entry<String, JsonNode> e = it.next();
      String key = e.getKey();
      JsonNode value = e.getValue();
      JsonNode current = base.get(key);
      if (key.equals("pools") && value.isArray() && defaults.get("pools") != null) {
        ObjectNode template = (ObjectNode) defaults.get("pools").get(0);
        ArrayNode pools = JsonNodeFactory.instance.arrayNode();
        for (JsonNode p : value) {
          if (p.isObject()) {
            ObjectNode merged = template.deepCopy();
            merge(merged, (ObjectNode) p, template);
            pools.add(merged);
          } else {
            pools.add(p);
          }
        }
        base.set(key, pools);
      } else if (current != null && current.isObject() && value.isObject()) {
        JsonNode sub = defaults.get(key);
        merge(
            (ObjectNode) current,
            (ObjectNode) value,
            sub != null && sub.isObject()
                ? (ObjectNode) sub
                : JsonNodeFactory.instance.objectNode());
      } else {
        base.set(key, value);
      }
    }
  }

  private static void applyEnv(ObjectNode tree, Map<String, String> env) {
    Map<String, String> sorted = new TreeMap<>(env);
    for (Map.Entry<String, String> e : sorted.entrySet()) {
      String name = e.getKey();
      if (!name.startsWith(ENV_PREFIX) || name.length() == ENV_PREFIX.length()) {
        continue;
      }
      List<String> tokens =
          new ArrayList<>(
              Arrays.asList(
                  name.substring(ENV_PREFIX.length()).toLowerCase(Locale.ROOT).split("_")));
      setPath(tree, tokens, e.getValue(), name);
    }
  }

  /** Walks the tree, matching the longest run of tokens that names an existing key. */
  private static void setPath(JsonNode node, List<String> tokens, String raw, String envName) {
    if (node.isArray()) {
      ArrayNode arr = (ArrayNode) node;
      int idx;
      try {
        idx = Integer.parseInt(tokens.get(0));
      } catch (NumberFormatException ex) {
        throw new ConfigException(envName + ": expected a list index at '" + tokens.get(0) + "'");
      }
      if (idx < 0 || idx >= arr.size()) {
        throw new ConfigException(envName + ": index " + idx + " is out of range");
      }
      if (tokens.size() == 1) {
        arr.set(idx, scalar(arr.get(idx), raw, envName));
      } else {
        setPath(arr.get(idx), tokens.subList(1, tokens.size()), raw, envName);
      }
      return;
    }
    if (!node.isObject()) {
      throw new ConfigException(envName + ": does not name a configuration key");
    }
    ObjectNode obj = (ObjectNode) node;
    for (int n = tokens.size(); n >= 1; n--) {
      String key = String.join("_", tokens.subList(0, n));
      if (obj.has(key)) {
        if (n == tokens.size()) {
          JsonNode current = obj.get(key);
          if (current.isArray()) {
            ArrayNode list = JsonNodeFactory.instance.arrayNode();
            for (String part : raw.split(",")) {
              if (!part.isBlank()) {
                list.add(part.trim());
              }
            }
            obj.set(key, list);
          } else {
            obj.set(key, scalar(current, raw, envName));
          }
        } else {
          setPath(obj.get(key), tokens.subList(n, tokens.size()), raw, envName);
        }
        return;
      }
    }
    throw new ConfigException(envName + ": does not name a configuration key");
  }

  private static JsonNode scalar(JsonNode current, String raw, String envName) {
    if (current != null && current.isTextual()) {
      // A text key takes the variable verbatim: YAML would turn a token 0123 into 83.
      return JsonNodeFactory.instance.textNode(raw);
    }
    try {
      JsonNode n = YAML.readTree(raw.isEmpty() ? "\"\"" : raw);
      return n == null || n.isMissingNode() ? JsonNodeFactory.instance.nullNode() : n;
    } catch (JsonProcessingException e) {
      return JsonNodeFactory.instance.textNode(raw);
    }
  }

  /** SnakeYAML's message spans lines (context, snippet, caret); keep its unindented lines. */
  private static String oneLine(String message) {
    StringBuilder sb = new StringBuilder();
    for (String line : message.split("\\R")) {
      if (!line.isBlank() && !Character.isWhitespace(line.charAt(0))) {
        sb.append(sb.length() == 0 ? "" : "; ").append(line.trim());
      }
    }
    return sb.length() == 0 ? message.replaceAll("\\s+", " ").trim() : sb.toString();
  }

  private static ProxyConfig bind(JsonNode tree, String source) {
    try {
      return YAML.treeToValue(tree, ProxyConfig.class);
    } catch (UnrecognizedPropertyException e) {
      throw new ConfigException(
          source + ": unknown key '" + path(e) + "' (known: " + e.getKnownPropertyIds() + ")");
    } catch (ValueInstantiationException e) {
      Throwable cause = e.getCause() != null ? e.getCause() : e;
      String at = path(e);
      String msg = cause.getMessage();
      // "admin: admin.host: …" says the key twice: a message that names its full key goes alone;
      // one that names the key's last part ("connections.max: …" under pools[0].connections, or
      // "transport: …") is completed to the full key once.
      String last = at.substring(at.lastIndexOf('.') + 1);
      if (msg != null && msg.startsWith(at + ".")) {
        at = "";
      } else if (msg != null && !last.isEmpty() && msg.startsWith(last + ".")) {
        msg = at + msg.substring(last.length());
        at = "";
      } else if (msg != null && !last.isEmpty() && msg.startsWith(last + ": ")) {
        msg = msg.substring(last.length() + 2);
      }
      throw new ConfigException(source + ": " + (at.isEmpty() ? "" : at + ": ") + msg);
    } catch (JsonMappingException e) {
      throw new ConfigException(source + ": " + path(e) + ": " + e.getOriginalMessage());
    } catch (JsonProcessingException e) {
      throw new ConfigException(source + ": " + e.getOriginalMessage());
    }
  }

  private static String path(JsonMappingException e) {
    StringBuilder sb = new StringBuilder();
    for (JsonMappingException.Reference r : e.getPath()) {
      if (r.getFieldName() != null) {
        if (sb.length() > 0) {
          sb.append('.');
        }
        sb.append(r.getFieldName());
      } else if (r.getIndex() >= 0) {
        sb.append('[').append(r.getIndex()).append(']');
      }
    }
    return sb.toString();
  }

  private static final class DurationDeser extends StdScalarDeserializer<Duration> {
    private static final long serialVersionUID = 1L;

    DurationDeser() {
      super(Duration.class);
    }

    @Override
    public Duration deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
      String text = p.getValueAsString();
      try {
        return Durations.parse(text);
      } catch (IllegalArgumentException e) {
        throw JsonMappingException.from(p, e.getMessage());
      }
    }
  }
}
