package io.phasemeter.load.report;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.DoubleFunction;

/**
 * A small inline-SVG chart: one plot area, linear or logarithmic axes with grid lines, and
 * primitives in data coordinates. Output is XML-well-formed so the page stays parseable. The run
 * report and the campaign report draw every chart with it; {@link Html#CHART_CSS} styles it.
 */
public final class Svg {

  /** One axis: its domain, scale and how its tick labels read. */
  public static final class Axis {
    final double min;
    final double max;
    final boolean log;
    final String title;
    final DoubleFunction<String> format;

    public Axis(double min, double max, boolean log, String title, DoubleFunction<String> format) {
      if (log) {
        min = Math.pow(10, Math.floor(Math.log10(min)));
        max = Math.pow(10, Math.ceil(Math.log10(Math.max(max, min * 10))));
      } else if (!(max > min)) {
        max = min + 1;
      }
      this.min = min;
      this.max = max;
      this.log = log;
      this.title = title;
      this.format = format;
    }

    /** A linear axis whose ends are rounded out to tick steps. */
    public static Axis linear(double min, double max, String title, DoubleFunction<String> format) {
      if (!(max > min)) {
        max = min + 1;
      }
      double step = niceStep((max - min) / 5);
      return new Axis(
          Math.floor(min / step) * step, Math.ceil(max / step) * step, false, title, format);
    }

    /** A seconds axis from 0 to exactly {@code end}: a run does not end on a round number. */
    public static Axis time(double end, String title) {
      return new Axis(0, end, false, title, Html::trim);
    }

    /** 0 … 1 of the axis length for {@code v}, clamped to the domain. */
    double fraction(double v) {
      double f;
      if (log) {
        v = Math.max(v, min);
        f = (Math.log10(v) - Math.log10(min)) / (Math.log10(max) - Math.log10(min));
      } else {
        f = (v - min) / (max - min);
      }
      return Math.max(0, Math.min(1, f));
    }

    List<Double> ticks() {
      List<Double> t = new ArrayList<>();
      if (log) {
        int decades = (int) Math.round(Math.log10(max / min));
        double[] mult = decades <= 2 ? new double[] {1, 2, 5} : new double[] {1};
        int every = Math.max(1, (int) Math.ceil(decades / 8.0));
        for (int d = 0; d <= decades; d += every) {
          for (double k : mult) {
            double v = min * Math.pow(10, d) * k;
            if (v <= max * 1.0001) {
              t.add(v);
            }
          }
        }
      } else {
        double step = niceStep((max - min) / 5);
        for (double v = Math.ceil(min / step - 1e-9) * step; v <= max + step * 1e-6; v += step) {
          t.add(Math.abs(v) < step * 1e-9 ? 0 : v);
        }
      }
      return t;
    }
  }

  static double niceStep(double raw) {
    if (!(raw > 0)) {
      return 1;
    }
    double p = Math.pow(10, Math.floor(Math.log10(raw)));
    double f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }

  private static final int LEFT = 64;
  private static final int RIGHT = 28;
  private static final int TOP = 12;
  private static final int BOTTOM = 44;

  private final StringBuilder sb = new StringBuilder(8192);
  private final int width;
  private final int height;
  private final Axis x;
  private final Axis y;

  public Svg(int width, int height, Axis x, Axis y, String ariaLabel) {
    this.width = width;
    this.height = height;
    this.x = x;
    this.y = y;
    sb.append(
        String.format(
            Locale.ROOT,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\""
                + " height=\"%d\" role=\"img\" aria-label=\"%s\" class=\"chart\">",
            width,
            height,
            width,
            height,
            Html.esc(ariaLabel)));
    axes();
  }

  public double px(double v) {
    return LEFT + x.fraction(v) * (width - LEFT - RIGHT);
  }

  public double py(double v) {
    return height - BOTTOM - y.fraction(v) * (height - TOP - BOTTOM);
  }

  private void axes() {
    double x0 = LEFT;
    double x1 = width - RIGHT;
    double y0 = height - BOTTOM;
    double y1 = TOP;
    sb.append("<g class=\"grid\">");
    for (double t : x.ticks()) {
      double p = px(t);
      line(p, y0, p, y1, "#e3e6ea", 1, null);
      text(p, y0 + 16, x.format.apply(t), "middle", "tick");
    }
    for (double t : y.ticks()) {
      double p = py(t);
      line(x0, p, x1, p, "#e3e6ea", 1, null);
      text(x0 - 6, p + 4, y.format.apply(t), "end", "tick");
    }
    sb.append("</g>");
    if (!y.log && y.min < 0 && y.max > 0) {
      line(x0, py(0), x1, py(0), "#555", 1, null);
    }
    if (!x.log && x.min < 0 && x.max > 0) {
      line(px(0), y0, px(0), y1, "#555", 1, null);
    }
    sb.append(
        String.format(
            Locale.ROOT,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\""
                + " stroke=\"#9aa3ad\"/>",
            x0,
            y1,
            x1 - x0,
            y0 - y1));
    text((x0 + x1) / 2, height - 6, x.title, "middle", "axis");
    sb.append(
        String.format(
            Locale.ROOT,
            "<text transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\""
                + " class=\"axis\">%s</text>",
            (y0 + y1) / 2,
            Html.esc(y.title)));
  }

  public void line(
      double x1, double y1, double x2, double y2, String color, double w, String dash) {
    sb.append(
        String.format(
            Locale.ROOT,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\""
                + " stroke-width=\"%.1f\"%s/>",
            x1,
            y1,
            x2,
            y2,
            color,
            w,
            dash == null ? "" : " stroke-dasharray=\"" + dash + "\""));
  }

  public void text(double px, double py, String s, String anchor, String cls) {
    sb.append(
        String.format(
            Locale.ROOT,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" class=\"%s\">%s</text>",
            px,
            py,
            anchor,
            cls,
            Html.esc(s)));
  }

  /** A line through data points; non-finite points break it into pieces. */
  public void polyline(
      double[] xs, double[] ys, String color, double w, String dash, String title) {
    StringBuilder pts = new StringBuilder();
    for (int i = 0; i <= xs.length; i++) {
      boolean ok = i < xs.length && Double.isFinite(xs[i]) && Double.isFinite(ys[i]);
      if (ok) {
        pts.append(String.format(Locale.ROOT, "%.1f,%.1f ", px(xs[i]), py(ys[i])));
      } else if (pts.length() > 0) {
        sb.append(
            String.format(
                Locale.ROOT,
                "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\""
                    + " stroke-linejoin=\"round\"%s><title>%s</title></polyline>",
                pts.toString().trim(),
                color,
                w,
                dash == null ? "" : " stroke-dasharray=\"" + dash + "\"",
                Html.esc(title)));
        pts.setLength(0);
      }
    }
  }

  /** A point marker with a tooltip. */
  public void dot(double xv, double yv, String color, String title) {
    if (!Double.isFinite(xv) || !Double.isFinite(yv)) {
      return;
    }
    sb.append(
        String.format(
            Locale.ROOT,
            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" stroke=\"#fff\""
                + " stroke-width=\"1\"><title>%s</title></circle>",
            px(xv),
            py(yv),
            color,
            Html.esc(title)));
  }

  /** A filled polygon through data points (px already mapped by the caller via data coords). */
  public void area(double[] xs, double[] lower, double[] upper, String color, String title) {
    StringBuilder pts = new StringBuilder();
    for (int i = 0; i < xs.length; i++) {
      pts.append(String.format(Locale.ROOT, "%.1f,%.1f ", px(xs[i]), py(upper[i])));
    }
    for (int i = xs.length - 1; i >= 0; i--) {
      pts.append(String.format(Locale.ROOT, "%.1f,%.1f ", px(xs[i]), py(lower[i])));
    }
    sb.append(
        String.format(
            Locale.ROOT,
            "<polygon points=\"%s\" fill=\"%s\" fill-opacity=\"0.85\" stroke=\"none\">"
                + "<title>%s</title></polygon>",
            pts.toString().trim(),
            color,
            Html.esc(title)));
  }

  /** A rectangle between two data corners. */
  public void box(double x0, double y0, double x1, double y1, String color, String title) {
    double a = px(x0);
    double b = px(x1);
    double c = py(y0);
    double d = py(y1);
    sb.append(
        String.format(
            Locale.ROOT,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                + "<title>%s</title></rect>",
            Math.min(a, b),
            Math.min(c, d),
            Math.max(0.5, Math.abs(b - a)),
            Math.abs(d - c),
            color,
            Html.esc(title)));
  }

  /** A note inside the plot area, top left. */
  public void note(String s) {
    text(LEFT + 8, TOP + 16, s, "start", "note");
  }

  @Override
  public String toString() {
    return sb + "</svg>";
  }
}
