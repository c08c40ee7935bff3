// `tapeformer plot RUN_DIR [RUN_DIR...] [--out FILE]`: a run's training curves as a PNG (training and
// validation loss, the validation figure (bits/char or masked-token accuracy) and the learning rate
// against steps), several runs overlaid in distinct colours.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "inspect/plot.h"
#include "tools/commands.h"
#include "train/metrics_log.h"

namespace tf::tools {

namespace {

// One curve of every run: `key` against the step, for the runs that logged it.
std::vector<inspect::Series> curves(const std::vector<std::vector<train::MetricsRecord>>& runs,
                                    const std::vector<std::string>& names, const std::string& key,
                                    const std::string& what, bool markers, bool faint) {
  std::vector<inspect::Series> out;
  for (size_t r = 0; r < runs.size(); ++r) {
    inspect::Series s{names[r] + (what.empty() ? "" : " " + what), {}, {}, static_cast<int>(r), markers, faint};
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

void add_plot_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("plot", "Draw a run's training curves (loss, validation figure, learning rate) as a PNG");
  static std::vector<std::string> run_dirs;
  static std::string out;
  cmd->add_option("runs", run_dirs, "Run folders (each with its metrics.jsonl); several are overlaid")->required();
  cmd->add_option("--out", out, "The PNG to write (default: curves.png in the first run folder)");
  cmd->callback([&exit_code] {
    std::vector<std::vector<train::MetricsRecord>> runs;
    std::vector<std::string> names;
    for (const std::string& dir : run_dirs) {
      const std::filesystem::path folder(dir);
      runs.push_back(train::read_metrics_log(folder / "metrics.jsonl"));
      TF_CHECK_INPUT(!runs.back().empty(), (folder / "metrics.jsonl").string(), ": no records yet (the run has not logged a step)");
      const std::string name = std::filesystem::weakly_canonical(folder).filename().string();
      names.push_back(name.empty() ? dir : name);
    }
    std::vector<inspect::Panel> panels;
    inspect::Panel loss{"loss", "nats per token", curves(runs, names, "train_loss", "training", false, true)};
    for (inspect::Series& s : curves(runs, names, "val_loss", "validation", true, false)) loss.series.push_back(std::move(s));
    panels.push_back(std::move(loss));
    if (auto bits = curves(runs, names, "val_bits_per_char", "", true, false); !bits.empty())
      panels.push_back({"validation bits per character", "", std::move(bits)});
    if (auto accuracy = curves(runs, names, "val_mlm_accuracy", "", true, false); !accuracy.empty())
      panels.push_back({"validation masked-token accuracy", "", std::move(accuracy)});
    panels.push_back({"learning rate", "", curves(runs, names, "lr", "", false, false)});
    const std::filesystem::path file = out.empty() ? std::filesystem::path(run_dirs[0]) / "curves.png" : std::filesystem::path(out);
    std::string title = "training curves:";
    for (const std::string& n : names) title += " " + n;
    const inspect::PictureSize size = inspect::write_line_chart(file, title, "step", panels);
    std::printf("%s (%d x %d)\n", file.c_str(), size.width, size.height);
    exit_code = 0;
  });
}

}  // namespace tf::tools
