package io.phasemeter.load.report;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;

/**
 * The live-window side of a {@link SignedHistogram}: values of either sign recorded into two
 * HdrHistogram {@link Recorder}s (magnitudes below zero, and values from zero up, in nanoseconds,
 * two significant digits, auto-resizing), taken out interval by interval with {@code
 * getIntervalHistogram(recycle)}. An interval reads exactly as a {@link SignedHistogram} fed the
 * same values would: same buckets, and the same exact extremes that bound every quantile.
 *
 * <p>Why a lock beside the Recorders: the exact minimum and maximum must change hands with the same
 * interval as the histograms, and a Recorder's phaser covers only its own histogram. So recording
 * and taking an interval share this instance's lock (uncontended: {@link LiveReport} already holds
 * its own around both); the Recorders do the swap and recycle the histograms.
 */
final class SignedRecorder {
  private final Recorder positive = new Recorder(SignedHistogram.SIGNIFICANT_DIGITS);
  private final Recorder negative = new Recorder(SignedHistogram.SIGNIFICANT_DIGITS);
  private double minMs = Double.NaN;
  private double maxMs = Double.NaN;
  private Histogram positiveRecycled;
  private Histogram negativeRecycled;

  /** Records one value in milliseconds; NaN and infinities are ignored. */
  synchronized void recordMs(double ms) {
    if (!Double.isFinite(ms)) {
      return;
    }
    long nanos = SignedHistogram.nanos(ms);
    if (nanos < 0) {
      negative.recordValue(-nanos);
    } else {
      positive.recordValue(nanos);
    }
    minMs = Double.isNaN(minMs) ? ms : Math.min(minMs, ms);
    maxMs = Double.isNaN(maxMs) ? ms : Math.max(maxMs, ms);
  }

  /**
   * What was recorded since the last call, and a fresh interval from now. The histograms of the
   * previous interval are recycled: a returned histogram is valid until the next call.
   */
  synchronized SignedHistogram interval() {
    positiveRecycled = positive.getIntervalHistogram(positiveRecycled);
    negativeRecycled = negative.getIntervalHistogram(negativeRecycled);
    SignedHistogram h = new SignedHistogram(positiveRecycled, negativeRecycled, minMs, maxMs);
    minMs = Double.NaN;
    maxMs = Double.NaN;
    return h;
  }
}
