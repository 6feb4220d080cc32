package io.phasemeter.load.report;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;

/**
 * phases.hlog: an HdrHistogram interval log, one tagged histogram per phase and step, values in
 * microseconds, so runs from several machines can be merged with HdrHistogram's own tools (e.g.
 * {@code HistogramLogProcessor -tag queue}). HdrHistogram holds no negative values, so each signed
 * phase is logged as two tags: {@code NAME} for values ≥ 0 and {@code NAME_negative} for the
 * magnitudes of values below zero. ITL is only known for the whole run and is one interval.
 */
final class PhaseLog {
  static final String NEGATIVE_SUFFIX = "_negative";

  private PhaseLog() {}

  static void write(Path file, ReportModel m) throws IOException {
    try (OutputStream os = Files.newOutputStream(file);
        PrintStream ps = new PrintStream(os, false, StandardCharsets.UTF_8)) {
      HistogramLogWriter w = new HistogramLogWriter(ps);
      w.outputComment("Phasemeter load client: per-phase latency, one interval per load step");
      w.outputComment("Values in microseconds; tags are docs/design.md §7 phase names");
      w.outputComment(
          "NAME holds values >= 0; NAME" + NEGATIVE_SUFFIX + " the magnitudes of values < 0");
      w.outputComment("(a negative envelope is a boundary, unit or join error; never clipped)");
      w.outputComment("Timestamps: seconds since the run start, on the client's monotonic clock");
      w.outputComment("itl: one interval over the whole run (gaps are not kept per step)");
      w.outputLogFormatVersion();
      w.outputLegend();
      for (ReportModel.Step step : m.steps) {
        long start = step.info().startNanos() - m.in.runStartNanos();
        long end =
            Math.max(step.info().endNanos(), step.info().startNanos()) - m.in.runStartNanos();
        for (String name : PhaseStats.NAMES) {
          if (!name.equals("itl")) {
            interval(w, step.stats(), name, start, end);
          }
        }
      }
      interval(w, m.stats, "itl", 0, m.in.runEndNanos() - m.in.runStartNanos());
    }
  }

  private static void interval(
      HistogramLogWriter w, PhaseStats stats, String name, long startNanos, long endNanos) {
    for (boolean negatives : new boolean[] {false, true}) {
      Histogram h = stats.microsHistogram(name, negatives);
      if (h.getTotalCount() == 0) {
        continue;
      }
      h.setTag(negatives ? name + NEGATIVE_SUFFIX : name);
      h.setStartTimeStamp(startNanos / 1_000_000);
      h.setEndTimeStamp(endNanos / 1_000_000);
      w.outputIntervalHistogram(h);
    }
  }
}
