// Line charts as PNG (cairo): panels stacked vertically that share the x axis, each with its own y
// axis, ticks at round numbers, and a legend. `tapeformer plot` draws a run's training curves with it.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "inspect/heatmap.h"

namespace tf::inspect {

struct Series {
  std::string label;
  std::vector<double> x, y;  // points with a non-finite y are skipped
  int colour = 0;            // index into the palette: one colour per run
  bool markers = false;      // a dot at each point (sparse series, such as evaluations)
  bool faint = false;        // a thin, light line (noisy series, such as per-step training loss)
};

struct Panel {
  std::string title, y_label;
  std::vector<Series> series;
};

// Tick values at round numbers (1, 2 or 5 times a power of ten) covering [lo, hi], about `count`.
std::vector<double> nice_ticks(double lo, double hi, int count);

PictureSize write_line_chart(const std::filesystem::path& file, const std::string& title, const std::string& x_label,
                             const std::vector<Panel>& panels);

}  // namespace tf::inspect
