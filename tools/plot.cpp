// `tapeformer plot RUN_DIR [RUN_DIR...] [--out FILE]`: a run's training curves as a PNG (training and
// validation loss, the validation figure (bits/char or masked-token accuracy) and the learning rate
// against steps), several runs overlaid in distinct colours.
#include <cstdio>
#include <filesystem>

#include "inspect/training_curves.h"
#include "tools/commands.h"
#include "train/output_path.h"

namespace tf::tools {

void add_plot_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("plot", "Draw a run's training curves (loss, validation figure, learning rate) as a PNG");
  static std::vector<std::string> run_dirs;
  static std::string out;
  cmd->add_option("runs", run_dirs, "Run folders (each with its metrics.jsonl); several are overlaid")->required();
  cmd->add_option("--out", out, "The PNG to write (default: curves.png in the first run folder)");
  cmd->callback([&exit_code] {
    const std::vector<std::filesystem::path> runs(run_dirs.begin(), run_dirs.end());
    const std::filesystem::path file = out.empty() ? runs[0] / "curves.png" : std::filesystem::path(out);
    // Before the logs are read. The default lies in the first run folder: when that is missing, reading
    // its log names it.
    if (!out.empty() || std::filesystem::is_directory(runs[0])) train::check_output_file("plot --out", file);
    const inspect::PictureSize size = inspect::write_training_curves(file, runs);
    std::printf("%s (%d x %d)\n", file.c_str(), size.width, size.height);
    exit_code = 0;
  });
}

}  // namespace tf::tools
