package io.phasemeter.load.workload.replay;

import java.util.ArrayList;
import java.util.List;

/** One CSV line's fields (RFC 4180: a quoted field may hold commas, its quotes doubled). */
final class Csv {
  private Csv() {}

  static List<String> split(String line) {
    List<String> fields = new ArrayList<>();
    StringBuilder f = new StringBuilder();
    boolean quoted = false;
    for (int i = 0; i < line.length(); i++) {
      char c = line.charAt(i);
      if (quoted) {
        if (c == '"' && i + 1 < line.length() && line.charAt(i + 1) == '"') {
          f.append('"');
          i++;
        } else if (c == '"') {
          quoted = false;
        } else {
          f.append(c);
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        fields.add(f.toString());
        f.setLength(0);
      } else {
        f.append(c);
      }
    }
    fields.add(f.toString());
    return fields;
  }
}
