// Each command of the `tapeformer` program adds its CLI11 subcommand here; main.cpp calls them all.
// A command's callback sets `exit_code`; errors are thrown (tf::InputError -> 2, other -> 1).
#pragma once
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "train/checkpoint.h"

namespace tf::tools {

// Every numeric flag has a range, like the recipe's keys, and says it: "--tokens: must be an integer in
// [0, 1000000], got 1000000000000". The whole text must parse (no "12abc", no "-1" for a count, no
// wrap-around past the type's limit). (CLI11's own range validators print DBL_MAX written out in full.)
// eval's and sample's --set: the recipe keys they may change on a trained model
// (train::check_inference_changes refuses the rest).
inline constexpr const char* kInferenceSetHelp =
    "Change a key of the checkpoint's recipe for this run (repeatable): the context (model.max_seq_len, "
    "data.seq_len), RoPE scaling (model.rope_scaling=yarn, model.rope_scaling_factor, "
    "model.rope_original_context, model.yarn_alpha, model.yarn_beta), model.attention_window, train.batch_size";

inline CLI::Validator integer_in(int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        int64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        const bool ok = ec == std::errc() && end == text.data() + text.size() && value >= lo && value <= hi;
        return ok ? "" : "must be an integer in " + range + ", got " + text;
      },
      "INTEGER in " + range);
}

// A number in [lo, hi], or (lo, hi] when lo_open.
inline CLI::Validator number_in(double lo, double hi, bool lo_open = false) {
  std::ostringstream range;
  range << (lo_open ? "(" : "[") << lo << ", " << hi << "]";
  return CLI::Validator(
      [lo, hi, lo_open, text_range = range.str()](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        const bool parsed = !text.empty() && end == text.c_str() + text.size() && std::isfinite(value);
        const bool ok = parsed && (lo_open ? value > lo : value >= lo) && value <= hi;
        return ok ? "" : "must be a number in " + text_range + ", got " + text;
      },
      "NUMBER in " + range.str());
}

// A seed: any integer in [0, 2^64 - 1], digits only.
inline CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        const bool ok = ec == std::errc() && end == text.data() + text.size() && !text.empty() && text[0] != '-';
        return ok ? "" : "must be an integer in [0, 18446744073709551615], got " + text;
      },
      "INTEGER in [0, 2^64 - 1]");
}

// A JSON string literal: quotes, backslashes and control bytes escaped; UTF-8 passes through.
inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\u%04x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// What eval and heads share: a checkpoint (or a run folder), --text, --set and --json; then the
// checkpoint loaded (its recipe changed by --set) and the text read: the file or folder --text names,
// or else the recipe's validation split, with its ids under the checkpoint's tokenizer (a note on
// stderr counts characters outside the vocabulary, read as <unk>).
struct CheckpointTextArgs {
  std::string checkpoint, text_path;
  std::vector<std::string> overrides;
  bool json = false;
};
// text_use: what the command does with the text, for --text's help ("evaluate on").
void add_checkpoint_text_options(CLI::App& cmd, CheckpointTextArgs& args, const std::string& text_use);
struct CheckpointText {
  std::string file;       // the checkpoint file (a run folder's newest)
  train::LoadedRun loaded;
  std::string text;       // UTF-8: the --text file's (empty for the validation split, read from its shard)
  data::Tokens ids;
  int64_t characters = 0;  // code points of the text the ids encode, for bits per character
  std::string text_name;  // the --text path, or "validation split"
};
CheckpointText load_checkpoint_text(const CheckpointTextArgs& args);
// heads and prune gate softmax heads (Michel et al. 2019); throws InputError naming the checkpoint
// when a layer's mixer has no such heads (differential attention, Mamba).
void require_gated_heads(const CheckpointText& input, const char* command);

void add_gradcheck_command(CLI::App& app, int& exit_code);
void add_train_command(CLI::App& app, int& exit_code);
void add_sample_command(CLI::App& app, int& exit_code);
void add_eval_command(CLI::App& app, int& exit_code);
void add_fill_command(CLI::App& app, int& exit_code);
void add_info_command(CLI::App& app, int& exit_code);
void add_inspect_command(CLI::App& app, int& exit_code);
void add_plot_command(CLI::App& app, int& exit_code);
void add_report_command(CLI::App& app, int& exit_code);
void add_heads_command(CLI::App& app, int& exit_code);
void add_prune_command(CLI::App& app, int& exit_code);
void add_prepare_command(CLI::App& app, int& exit_code);
void add_export_command(CLI::App& app, int& exit_code);

}  // namespace tf::tools
