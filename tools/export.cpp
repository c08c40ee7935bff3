// `tapeformer export CKPT|RUN_DIR --format gguf|weights --out FILE`: a trained model in a form other
// tools run (GGUF for llama.cpp), or without its optimizer state (weights). docs/export.md.
#include <filesystem>
#include <iostream>

#include "export/gguf_model.h"
#include "tools/commands.h"
#include "train/checkpoint.h"
#include "train/output_path.h"
#include "train/run_folder.h"

namespace tf::tools {

namespace {

namespace fs = std::filesystem;

struct ExportArgs {
  std::string checkpoint, format, out, type = "f32", name;
  bool overwrite = false;
};

exporting::GgufType gguf_type(const std::string& type) {
  if (type == "f16") return exporting::GgufType::f16;
  if (type == "q8_0") return exporting::GgufType::q8_0;
  return exporting::GgufType::f32;
}

// The output may be replaced only when asked, and never be the checkpoint it comes from.
void check_output(const ExportArgs& a, const fs::path& source) {
  const fs::path out(a.out);
  train::check_output_file("export --out", out);
  std::error_code ec;
  TF_CHECK_INPUT(!fs::equivalent(out, source, ec), "export --out '", a.out, "' is the checkpoint being exported ('",
                 source.string(), "'); write the export to another file");
  TF_CHECK_INPUT(a.overwrite || !fs::exists(out, ec), "export --out '", a.out,
                 "' exists; it is kept (choose another file, or pass --overwrite to replace it)");
}

}  // namespace

void add_export_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("export", "Write a trained model as GGUF (llama.cpp) or as weights without optimizer state");
  static ExportArgs a;
  cmd->add_option("checkpoint", a.checkpoint, "Checkpoint file (.h5), or a run folder for its newest checkpoint")->required();
  cmd->add_option("--format", a.format,
                  "gguf: llama.cpp's file (a GPT of the llama or gpt2 block, docs/export.md); weights: a checkpoint "
                  "without optimizer, dropout and data-order state, for sample, eval, inspect, info and --init-from")
      ->required()
      ->check(CLI::IsMember({"gguf", "weights"}));
  cmd->add_option("--out", a.out, "The file to write (its folder must exist)")->required();
  cmd->add_option("--type", a.type,
                  "gguf: the matrices' type (norms and biases stay f32); q8_0 writes a matrix whose rows are not a "
                  "multiple of 32 values as f16 and says so")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  cmd->add_option("--name", a.name, "gguf: general.name (default: the run folder's name)");
  cmd->add_flag("--overwrite", a.overwrite, "Replace --out when it exists");
  cmd->callback([&exit_code] {
    const fs::path source = train::checkpoint_argument(a.checkpoint);
    check_output(a, source);
    TF_CHECK_INPUT(a.format == "gguf" || a.type == "f32", "export --type ", a.type, ": a weights file keeps float32 (",
                   "--type chooses a GGUF file's type)");
    const train::LoadedRun loaded = train::load_checkpoint(source);
    const train::Run& run = loaded.run;
    if (a.format == "weights") {
      train::save_weights(run, a.out);
    } else {
      const std::string name = !a.name.empty() ? a.name : source.parent_path().filename().string();
      std::vector<std::string> notes;
      const exporting::GgufFile file = exporting::gguf_of_model(run.model->config(), run.params, *run.tokenizer,
                                                                gguf_type(a.type), name, notes);
      file.write(a.out);
      for (const std::string& note : notes) std::cerr << "note: " << note << "\n";
    }
    std::error_code ec;
    std::cout << "exported " << source.string() << " (step " << run.step << ") as " << a.format
              << (a.format == "gguf" ? std::string(" (") +
                                           exporting::gguf_arch_name(exporting::gguf_arch(run.model->config())) +
                                           ", " + a.type + ")"
                                     : std::string())
              << ": " << a.out << " (" << fs::file_size(a.out, ec) / 1048576.0 << " MiB)\n";
    exit_code = 0;
  });
}

}  // namespace tf::tools
