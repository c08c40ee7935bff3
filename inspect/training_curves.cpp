// Training curves; see training_curves.h.
#include "inspect/training_curves.h"

#include <cmath>

#include "framework/error.h"
#include "inspect/plot.h"
#include "train/metrics_log.h"

namespace tf::inspect {

namespace {

// One curve of every run: `key` against the step, for the runs that logged it.
std::vector<Series> curves(const std::vector<std::vector<train::MetricsRecord>>& runs,
                           const std::vector<std::string>& names, const std::string& key, const std::string& what,
                           bool markers, bool faint) {
  std::vector<Series> out;
  for (size_t r = 0; r < runs.size(); ++r) {
    Series s{names[r] + (what.empty() ? "" : " " + what), {}, {}, static_cast<int>(r), markers, faint};
    for (const train::MetricsRecord& m : runs[r]) {
      const double y = m.number(key);
      if (!std::isfinite(y)) continue;
      s.x.push_back(m.number("step"));
      s.y.push_back(y);
    }
    if (!s.x.empty()) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

PictureSize write_training_curves(const std::filesystem::path& file, const std::vector<std::filesystem::path>& run_dirs) {
  std::vector<std::vector<train::MetricsRecord>> runs;
  std::vector<std::string> names;
  for (const std::filesystem::path& folder : run_dirs) {
    runs.push_back(train::read_metrics_log(folder / "metrics.jsonl"));
    TF_CHECK_INPUT(!runs.back().empty(), (folder / "metrics.jsonl").string(), ": no records yet (the run has not logged a step)");
    const std::string name = std::filesystem::weakly_canonical(folder).filename().string();
    names.push_back(name.empty() ? folder.string() : name);
  }
  std::vector<Panel> panels;
  Panel loss{"loss", "nats per token", curves(runs, names, "train_loss", "training", false, true)};
  for (Series& s : curves(runs, names, "val_loss", "validation", true, false)) loss.series.push_back(std::move(s));
  panels.push_back(std::move(loss));
  if (auto bits = curves(runs, names, "val_bits_per_char", "", true, false); !bits.empty())
    panels.push_back({"validation bits per character", "", std::move(bits)});
  if (auto accuracy = curves(runs, names, "val_mlm_accuracy", "", true, false); !accuracy.empty())
    panels.push_back({"validation masked-token accuracy", "", std::move(accuracy)});
  panels.push_back({"learning rate", "", curves(runs, names, "lr", "", false, false)});
  std::string title = "training curves:";
  for (const std::string& n : names) title += " " + n;
  return write_line_chart(file, title, "step", panels);
}

}  // namespace tf::inspect
