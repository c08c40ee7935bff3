// Line charts with cairo; see plot.h.
#include "inspect/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "framework/error.h"

namespace tf::inspect {

namespace {

// Distinct colours for up to eight runs (then they repeat).
constexpr double kPalette[8][3] = {{0.12, 0.47, 0.71}, {0.84, 0.15, 0.16}, {0.17, 0.63, 0.17}, {1.00, 0.50, 0.05},
                                   {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}};

void set_colour(cairo_t* cr, int index, double alpha = 1.0) {
  const double* c = kPalette[index % 8];
  cairo_set_source_rgba(cr, c[0], c[1], c[2], alpha);
}

std::string tick_label(double v, double step) {
  char text[32];
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  if (v == 0)
    return "0";
  if (step < 1e-3 || step >= 1e6)  // every tick of an axis in one form
    std::snprintf(text, sizeof text, "%.1e", v);
  else
    std::snprintf(text, sizeof text, "%.*f", decimals, v);
  return text;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  // An empty or one-value range widened so that it has a length.
  void settle() {
    if (!(lo <= hi)) lo = 0, hi = 1;
    if (lo == hi) lo -= 0.5 * std::max(1.0, std::abs(lo)), hi += 0.5 * std::max(1.0, std::abs(hi));
  }
};

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int count) {
  TF_CHECK(hi > lo && count > 0, "nice_ticks: empty range [", lo, ", ", hi, "]");
  const double raw = (hi - lo) / count, power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

PictureSize write_line_chart(const std::filesystem::path& file, const std::string& title, const std::string& x_label,
                             const std::vector<Panel>& panels) {
  TF_CHECK(!panels.empty(), "write_line_chart: no panels");
  const double width = 900, panel_height = 300, left = 80, right = 24, top = 36, gap = 56, bottom = 48;
  const int height = static_cast<int>(top + panels.size() * (panel_height + gap) - gap + bottom);
  const Canvas canvas(static_cast<int>(width), height, title);
  cairo_t* cr = canvas.cr.get();

  Range xs;  // shared by every panel
  for (const Panel& p : panels)
    for (const Series& s : p.series)
      for (double x : s.x) xs.add(x);
  xs.settle();
  const double plot_width = width - left - right;
  auto px = [&](double x) { return left + (x - xs.lo) / (xs.hi - xs.lo) * plot_width; };
  const std::vector<double> x_ticks = nice_ticks(xs.lo, xs.hi, 8);

  for (size_t k = 0; k < panels.size(); ++k) {
    const Panel& panel = panels[k];
    const double y0 = top + k * (panel_height + gap) + 20, plot_height = panel_height - 20;
    Range ys;
    for (const Series& s : panel.series)
      for (double y : s.y) ys.add(y);
    ys.settle();
    const double pad = 0.04 * (ys.hi - ys.lo);
    ys.lo -= pad;
    ys.hi += pad;
    auto py = [&](double y) { return y0 + (ys.hi - y) / (ys.hi - ys.lo) * plot_height; };

    cairo_set_font_size(cr, 12);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, left, y0 - 8);
    cairo_show_text(cr, (panel.title + (panel.y_label.empty() ? "" : " (" + panel.y_label + ")")).c_str());
    // Grid and tick labels.
    cairo_set_font_size(cr, 10);
    cairo_set_line_width(cr, 1);
    const std::vector<double> y_ticks = nice_ticks(ys.lo, ys.hi, 5);
    const double y_step = y_ticks.size() > 1 ? y_ticks[1] - y_ticks[0] : 1;
    for (double t : y_ticks) {
      cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
      cairo_move_to(cr, left, std::round(py(t)) + 0.5);
      cairo_line_to(cr, left + plot_width, std::round(py(t)) + 0.5);
      cairo_stroke(cr);
      const std::string label = tick_label(t, y_step);
      cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
      cairo_move_to(cr, left - 6 - text_width(cr, label), py(t) + 4);
      cairo_show_text(cr, label.c_str());
    }
    const double x_step = x_ticks.size() > 1 ? x_ticks[1] - x_ticks[0] : 1;
    for (double t : x_ticks) {
      cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
      cairo_move_to(cr, std::round(px(t)) + 0.5, y0);
      cairo_line_to(cr, std::round(px(t)) + 0.5, y0 + plot_height);
      cairo_stroke(cr);
      const std::string label = tick_label(t, x_step);
      cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
      cairo_move_to(cr, px(t) - text_width(cr, label) / 2, y0 + plot_height + 14);
      cairo_show_text(cr, label.c_str());
    }
    cairo_set_source_rgb(cr, 0.4, 0.4, 0.4);
    cairo_rectangle(cr, left + 0.5, y0 + 0.5, plot_width, plot_height);
    cairo_stroke(cr);

    // The series, clipped to the plot area.
    cairo_save(cr);
    cairo_rectangle(cr, left, y0, plot_width, plot_height);
    cairo_clip(cr);
    for (const Series& s : panel.series) {
      set_colour(cr, s.colour, s.faint ? 0.35 : 1.0);
      cairo_set_line_width(cr, s.faint ? 1.0 : 2.0);
      bool drawing = false;
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (!std::isfinite(s.y[i])) continue;
        drawing ? cairo_line_to(cr, px(s.x[i]), py(s.y[i])) : cairo_move_to(cr, px(s.x[i]), py(s.y[i]));
        drawing = true;
      }
      cairo_stroke(cr);
      if (s.markers)
        for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
          if (!std::isfinite(s.y[i])) continue;
          cairo_arc(cr, px(s.x[i]), py(s.y[i]), 3, 0, 2 * M_PI);
          cairo_fill(cr);
        }
    }
    cairo_restore(cr);
    // Legend, top right inside the plot.
    cairo_set_font_size(cr, 11);
    double ly = y0 + 16;
    for (const Series& s : panel.series) {
      const double lx = left + plot_width - 12 - text_width(cr, s.label);
      set_colour(cr, s.colour, s.faint ? 0.35 : 1.0);
      cairo_set_line_width(cr, s.faint ? 1.0 : 2.0);
      cairo_move_to(cr, lx - 28, ly - 4);
      cairo_line_to(cr, lx - 6, ly - 4);
      cairo_stroke(cr);
      cairo_set_source_rgb(cr, 0, 0, 0);
      cairo_move_to(cr, lx, ly);
      cairo_show_text(cr, s.label.c_str());
      ly += 15;
    }
  }
  cairo_set_font_size(cr, 12);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_move_to(cr, left + plot_width / 2 - 20, height - 10);
  cairo_show_text(cr, x_label.c_str());
  return save_png(canvas.surface.get(), file);
}

}  // namespace tf::inspect
