// `tapeformer fill CKPT --text "the c[MASK]t sat"`: a BERT's most probable tokens for each [MASK], with
// their probabilities and the text each one fills in (Hugging Face's fill-mask pipeline, on the CPU).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "inspect/attention_maps.h"
#include "tools/commands.h"
#include "train/evaluate.h"
#include "train/fill_mask.h"
#include "train/run_folder.h"

namespace tf::tools {
namespace {

std::string token_text(const data::Tokenizer& tokenizer, int32_t id) {
  return tokenizer.decode(std::span<const int32_t>(&id, 1));
}

// Columns on a terminal: a UTF-8 character (U+2423 for a space, say) is one, whatever its bytes.
size_t columns(const std::string& s) {
  size_t n = 0;
  for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// {"checkpoint": ..., "step": ..., "text": ..., "tokens": ..., "masks": [{"position": 4, "candidates":
// [{"score": ..., "token": 12, "token_str": "a", "sequence": "the cat sat"}, ...]}, ...]}: the candidates'
// keys are the pipeline's; token_str and sequence hold bytes that are no UTF-8 character as \xNN.
void print_json(const std::string& file, const train::Run& run, const std::string& raw_text,
                const train::MaskedText& text, const std::vector<train::MaskPrediction>& predictions) {
  std::printf("{\"checkpoint\": %s, \"step\": %lld, \"text\": %s, \"tokens\": %zu, \"masks\": [", json_string(file).c_str(),
              static_cast<long long>(run.step), json_string(inspect::utf8_or_escaped(raw_text)).c_str(),
              text.ids.size() - 2);
  for (size_t m = 0; m < predictions.size(); ++m) {
    std::printf("%s{\"position\": %lld, \"candidates\": [", m ? ", " : "", static_cast<long long>(predictions[m].position));
    for (size_t c = 0; c < predictions[m].candidates.size(); ++c) {
      const train::FillCandidate& candidate = predictions[m].candidates[c];
      const std::string token = token_text(*run.tokenizer, candidate.id);
      std::printf("%s{\"score\": %s, \"token\": %d, \"token_str\": %s, \"sequence\": %s}", c ? ", " : "",
                  train::json_number(candidate.probability).c_str(), candidate.id,
                  json_string(inspect::utf8_or_escaped(token)).c_str(),
                  json_string(inspect::utf8_or_escaped(train::filled_text(text, m, token))).c_str());
    }
    std::printf("]}");
  }
  std::printf("]}\n");
}

void print_table(const std::string& file, const train::Run& run, const std::string& raw_text,
                 const train::MaskedText& text, const std::vector<train::MaskPrediction>& predictions) {
  const size_t masks = predictions.size();
  std::printf("checkpoint   %s (step %lld)\ntext         %s (%zu tokens; %zu [MASK]%s)\n", file.c_str(),
              static_cast<long long>(run.step), inspect::visible_line(raw_text).c_str(), text.ids.size() - 2, masks,
              masks > 1 ? "s, predicted in one pass: each with the others still masked" : "");
  for (size_t m = 0; m < masks; ++m) {
    std::vector<std::pair<std::string, std::string>> rows;  // (token, sequence) as shown
    size_t width = 5;                                       // "token"
    for (const train::FillCandidate& candidate : predictions[m].candidates) {
      const std::string token = token_text(*run.tokenizer, candidate.id);
      rows.emplace_back(inspect::visible_token(token), inspect::visible_line(train::filled_text(text, m, token)));
      width = std::max(width, columns(rows.back().first));
    }
    std::printf("\n[MASK] %zu of %zu, at token %lld\n  rank   score     id  token%s  sequence\n", m + 1, masks,
                static_cast<long long>(predictions[m].position), std::string(width - 5, ' ').c_str());
    for (size_t c = 0; c < rows.size(); ++c)
      std::printf("  %4zu  %6.4f  %5d  %s%s  %s\n", c + 1, predictions[m].candidates[c].probability,
                  predictions[m].candidates[c].id, rows[c].first.c_str(),
                  std::string(width - columns(rows[c].first), ' ').c_str(), rows[c].second.c_str());
  }
}

}  // namespace

void add_fill_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "fill", "Predict each [MASK] of a text with a BERT checkpoint: the most probable tokens and their probabilities");
  static std::string checkpoint, text;
  static int64_t top_k = 5;
  static bool json = false;
  cmd->add_option("checkpoint", checkpoint, "Checkpoint file (.h5), or a run folder for its newest checkpoint")->required();
  cmd->add_option("--text", text,
                  "Text with [MASK] in place of each missing token (one [MASK] is one token: one character for a "
                  "character tokenizer)")
      ->required();
  cmd->add_option("--top-k", top_k, "Candidates shown for each [MASK] (at most the vocabulary)")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 30));
  cmd->add_flag("--json", json, "Print one JSON object with every probability at full precision (for other tools)");
  cmd->callback([&exit_code] {
    const std::string file = train::checkpoint_argument(checkpoint).string();
    const train::LoadedRun loaded = train::load_checkpoint(file);
    const train::Run& run = loaded.run;
    TF_CHECK_INPUT(run.recipe.model.arch == layers::Architecture::bert, "fill needs a masked-LM (BERT) model; ",
                   checkpoint, " is a GPT model; use `tapeformer sample`");
    const train::MaskedText masked = train::read_masked_text(*run.tokenizer, text);
    if (masked.unknown > 0)  // as `sample --prompt` does: read as <unk>, and said
      std::cerr << "note: " << masked.unknown << " characters of the text are outside the checkpoint's vocabulary and "
                << "were read as <unk>\n";
    const std::vector<train::MaskPrediction> predictions = train::fill_masks(*run.model, masked, top_k);
    if (json) print_json(file, run, text, masked, predictions);
    else print_table(file, run, text, masked, predictions);
    exit_code = 0;
  });
}

}  // namespace tf::tools
