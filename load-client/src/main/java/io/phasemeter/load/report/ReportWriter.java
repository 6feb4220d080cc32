package io.phasemeter.load.report;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** Writes a finished run's outputs (docs/design.md §7) into one directory. */
public final class ReportWriter {
  /** The machine-readable verdict. */
  public static final String SUMMARY = "summary.json";

  /** One row per request. */
  public static final String PAIRS = "pairs.csv";

  /** HdrHistogram interval log, one tag per phase, one interval per step, microseconds. */
  public static final String PHASE_LOG = "phases.hlog";

  /** The page a person reads. */
  public static final String HTML = "report.html";

  /** Every file {@link #write} produces. */
  public static final List<String> FILES = List.of(SUMMARY, PAIRS, PHASE_LOG, HTML);

  private ReportWriter() {}

  /**
   * Writes summary.json, pairs.csv, phases.hlog and report.html into {@code outDir}, creating it
   * when needed and replacing files of the same names.
   */
  public static void write(Path outDir, ReportInput in) throws IOException {
    Files.createDirectories(outDir);
    ReportModel model = new ReportModel(in);
    SummaryJson.write(outDir.resolve(SUMMARY), model);
    PairsCsv.write(
        outDir.resolve(PAIRS), in.pairs(), in.notApplicable(), in.goodput(), in.runStartNanos());
    PhaseLog.write(outDir.resolve(PHASE_LOG), model);
    HtmlReport.write(outDir.resolve(HTML), model);
  }
}
