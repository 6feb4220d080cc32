package io.phasemeter.proxy.config;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;

/** Reading the YAML files the proxy is given, with the one-line errors every one of them uses. */
public final class YamlFiles {
  private YamlFiles() {}

  /**
   * The file's text (UTF-8).
   *
   * @throws ConfigException "FILE: file not found" or "FILE: cannot read (…)"
   */
  public static String readText(Path file) {
    try {
      return Files.readString(file);
    } catch (NoSuchFileException e) {
      throw new ConfigException(file + ": file not found");
    } catch (IOException e) {
      throw new ConfigException(file + ": cannot read (" + e.getMessage() + ")");
    }
  }

  /**
   * Parses {@code yaml} with {@code mapper}; null for an empty document.
   *
   * @throws ConfigException "SOURCE: not valid YAML at line N: …" on one line
   */
  public static JsonNode readTree(ObjectMapper mapper, String yaml, String sourceName) {
    try {
      return mapper.readTree(yaml);
    } catch (JsonProcessingException e) {
      throw new ConfigException(
          sourceName
              + ": not valid YAML at line "
              + e.getLocation().getLineNr()
              + ": "
              + e.getOriginalMessage().replaceAll("\\s+", " "));
    }
  }
}
