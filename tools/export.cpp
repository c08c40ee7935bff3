// `tapeformer export CKPT|RUN_DIR --format gguf|safetensors|weights --out PATH`: a trained model in a
// form other tools run (GGUF for llama.cpp, a Hugging Face folder), or without its optimizer state
// (weights). docs/export.md.
#include <filesystem>
#include <iostream>

#include "export/gguf_model.h"
#include "export/hf_model.h"
#include "framework/io/atomic_file.h"
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

// The output may be replaced only when asked, and never be the checkpoint it comes from. safetensors
// writes a folder (created when missing): its model.safetensors is what must not be there already.
void check_output(const ExportArgs& a, const fs::path& source) {
  const fs::path out(a.out);
  std::error_code ec;
  if (a.format == "safetensors") {
    train::check_output_folder("export --out", out);
    TF_CHECK_INPUT(a.overwrite || !fs::exists(out / "model.safetensors", ec), "export --out '", a.out,
                   "' already holds a model.safetensors; it is kept (choose another folder, or pass --overwrite to "
                   "replace it)");
    return;
  }
  train::check_output_file("export --out", out);
  TF_CHECK_INPUT(!fs::equivalent(out, source, ec), "export --out '", a.out, "' is the checkpoint being exported ('",
                 source.string(), "'); write the export to another file");
  TF_CHECK_INPUT(a.overwrite || !fs::exists(out, ec), "export --out '", a.out,
                 "' exists; it is kept (choose another file, or pass --overwrite to replace it)");
}

// model.safetensors, config.json and tokenizer.txt (tapeformer's tokenizer: the ids' meaning) in `dir`.
// Returns the model class written ("LlamaForCausalLM").
std::string write_hf_folder(const train::Run& run, const std::string& type, const fs::path& dir) {
  const exporting::HfModel hf = exporting::hf_model(
      run.model->config(), run.params,
      type == "f16" ? exporting::SafetensorsType::f16 : exporting::SafetensorsType::f32);
  fs::create_directories(dir);
  hf.weights.write(dir / "model.safetensors");
  write_file_atomically(dir / "config.json", hf.config_json);
  write_file_atomically(dir / "tokenizer.txt", run.tokenizer->to_string());
  return hf.architecture;
}

}  // namespace

void add_export_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a trained model as GGUF (llama.cpp), as a Hugging Face folder (safetensors), or as weights "
                "without optimizer state");
  static ExportArgs a;
  cmd->add_option("checkpoint", a.checkpoint, "Checkpoint file (.h5), or a run folder for its newest checkpoint")->required();
  cmd->add_option("--format", a.format,
                  "gguf: llama.cpp's file (a GPT of the llama or gpt2 block, docs/export.md); safetensors: a folder "
                  "of model.safetensors, config.json (LlamaForCausalLM or GPT2LMHeadModel) and tokenizer.txt; "
                  "weights: a checkpoint without optimizer, dropout and data-order state, for sample, eval, "
                  "inspect, info and --init-from")
      ->required()
      ->check(CLI::IsMember({"gguf", "safetensors", "weights"}));
  cmd->add_option("--out", a.out, "The file to write (its folder must exist); for safetensors, the folder to write into")
      ->required();
  cmd->add_option("--type", a.type,
                  "gguf and safetensors: the matrices' type (norms and biases stay f32); q8_0 (gguf only) writes a "
                  "matrix whose rows are not a multiple of 32 values as f16 and says so")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  cmd->add_option("--name", a.name, "gguf: general.name (default: the run folder's name)");
  cmd->add_flag("--overwrite", a.overwrite, "Replace --out when it exists");
  cmd->callback([&exit_code] {
    const fs::path source = train::checkpoint_argument(a.checkpoint);
    check_output(a, source);
    TF_CHECK_INPUT(a.format != "weights" || a.type == "f32", "export --type ", a.type, ": a weights file keeps float32 (",
                   "--type chooses a GGUF or safetensors file's type)");
    TF_CHECK_INPUT(a.format != "safetensors" || a.type != "q8_0",
                   "export --type q8_0: safetensors holds f32 or f16 here (q8_0 is GGUF's)");
    const train::LoadedRun loaded = train::load_checkpoint(source);
    const train::Run& run = loaded.run;
    std::string kind;  // what the file holds, for the message: "llama, f16", "BertForMaskedLM, f32"
    if (a.format == "weights") {
      train::save_weights(run, a.out);
    } else if (a.format == "safetensors") {
      kind = write_hf_folder(run, a.type, a.out) + ", " + a.type;
    } else {
      kind = std::string(exporting::gguf_arch_name(exporting::gguf_arch(run.model->config()))) + ", " + a.type;
      const std::string name = !a.name.empty() ? a.name : source.parent_path().filename().string();
      std::vector<std::string> notes;
      exporting::GgufFile file = exporting::gguf_of_model(run.model->config(), run.params, *run.tokenizer,
                                                          gguf_type(a.type), name, notes);
      // What `train --init-from model.gguf` builds the model from (llama.cpp ignores keys it does not know).
      file.set("tapeformer.recipe", run.recipe.to_yaml());
      file.set("tapeformer.tokenizer", run.tokenizer->to_string());
      file.write(a.out);
      for (const std::string& note : notes) std::cerr << "note: " << note << "\n";
    }
    std::error_code ec;
    const bool folder = a.format == "safetensors";
    std::cout << "exported " << source.string() << " (step " << run.step << ") as " << a.format
              << (kind.empty() ? "" : " (" + kind + ")") << ": " << a.out
              << (folder ? "/model.safetensors, config.json, tokenizer.txt" : "") << " ("
              << fs::file_size(folder ? fs::path(a.out) / "model.safetensors" : fs::path(a.out), ec) / 1048576.0
              << " MiB)\n";
    exit_code = 0;
  });
}

}  // namespace tf::tools
