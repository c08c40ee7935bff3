// `tapeformer report RUN_DIR [--out FILE]`: the run's report.html (inspect/report.h): recipe, curves,
// last evaluation, sample, attention and head table, in one self-contained file.
#include <cstdio>
#include <filesystem>

#include "inspect/report.h"
#include "tools/commands.h"
#include "train/output_path.h"

namespace tf::tools {

void add_report_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("report", "Write a run's report.html: recipe, curves, evaluation, sample, attention");
  static std::string run_dir, out;
  cmd->add_option("run", run_dir, "Run folder (its newest checkpoint and metrics.jsonl)")->required();
  cmd->add_option("--out", out, "The HTML file to write (default: report.html in the run folder)");
  cmd->callback([&exit_code] {
    // Before the checkpoint is loaded, the sample drawn and the attention captured. The default lies in
    // the run folder: when that is missing, looking for its checkpoint names it.
    if (!out.empty() || std::filesystem::is_directory(run_dir))
      train::check_output_file("report --out", inspect::report_file(run_dir, out));
    std::printf("%s\n", inspect::write_run_report(run_dir, out).c_str());
    exit_code = 0;
  });
}

}  // namespace tf::tools
