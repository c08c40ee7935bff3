// `tapeformer eval CKPT [--text FILE]`: loss, perplexity, bits/char or masked-token accuracy.
#include <cmath>
#include <cstdio>

#include "data/text.h"
#include "tools/commands.h"
#include "train/checkpoint.h"
#include "train/run_folder.h"
#include "train/evaluate.h"
#include "train/threads.h"
#include "train/trainer.h"

namespace tf::tools {

void add_eval_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a checkpoint on the validation split or a text");
  static std::string checkpoint, text_path;
  static int64_t batches = 0;
  cmd->add_option("checkpoint", checkpoint, "Checkpoint file (.h5), or a run folder for its newest checkpoint")->required();
  cmd->add_option("--text", text_path, "UTF-8 text file or folder to evaluate on (default: the recipe's validation split)");
  cmd->add_option("--batches", batches, "Evaluate at most this many batches; 0: the whole text")
      ->check(integer_in(0, int64_t{1} << 40));
  static std::vector<std::string> overrides;
  cmd->add_option("--set", overrides, kInferenceSetHelp);
  static bool json = false;
  cmd->add_flag("--json", json, "Print one JSON object with every figure at full precision (for other tools)");
  cmd->callback([&exit_code] {
    train::configure_threads(0);
    const std::string file = train::checkpoint_argument(checkpoint).string();
    train::LoadedRun loaded = train::load_checkpoint(file, overrides);
    const train::Run& run = loaded.run;
    const std::string text = text_path.empty() ? train::load_corpus(run.recipe.data).val : data::read_text(text_path);
    std::vector<int32_t> ids = train::tokenize(run, text);
    if (const int64_t unknown = run.tokenizer->count_unknown(ids))
      std::fprintf(stderr, "note: %lld characters of the text are outside the checkpoint's vocabulary and were read as <unk>\n",
                   static_cast<long long>(unknown));
    const auto& r = run.recipe;
    const size_t text_tokens = ids.size();
    if (!json)
      std::printf("checkpoint   %s (step %lld)\ntext         %s (%zu tokens)\n", file.c_str(),
                  static_cast<long long>(run.step), text_path.empty() ? "validation split" : text_path.c_str(),
                  text_tokens);
    // {"checkpoint": ..., "step": ..., "text_tokens": ..., "tokens": ..., "loss": ..., ...}: every number
    // in the shortest form that reads back exactly (train::json_number).
    auto print_json = [&](const train::EvalResult& e, const char* extra_key, double extra) {
      std::printf("{\"checkpoint\": \"%s\", \"step\": %lld, \"text\": \"%s\", \"text_tokens\": %zu, \"tokens\": %lld, "
                  "\"loss\": %s, \"perplexity\": %s, \"bits_per_char\": %s, \"mlm_accuracy\": %s, \"%s\": %s}\n",
                  file.c_str(), static_cast<long long>(run.step),
                  text_path.empty() ? "validation split" : text_path.c_str(), text_tokens,
                  static_cast<long long>(e.tokens), train::json_number(e.loss).c_str(),
                  train::json_number(e.perplexity).c_str(), train::json_number(e.bits_per_char).c_str(),
                  train::json_number(e.mlm_accuracy).c_str(), extra_key, train::json_number(extra).c_str());
    };
    if (r.model.arch == layers::Architecture::bert) {
      auto batcher = data::MaskedLmBatcher::sequential(std::move(ids), r.train.batch_size, r.data.seq_len,
                                                       static_cast<uint64_t>(r.train.seed) + 1,
                                                       data::MaskedLmTokens::from(*run.tokenizer), r.data.mask_prob);
      const train::EvalResult e = train::evaluate_masked(*run.model, batcher, batches);
      const double baseline = train::baseline_most_frequent_accuracy(batcher, batches);
      if (json) {
        print_json(e, "baseline_accuracy", baseline);
        exit_code = 0;
        return;
      }
      std::printf("loss         %.4f nats per masked token\nperplexity   %.2f\naccuracy     %.4f on %lld masked tokens\n"
                  "baseline     %.4f (always the most frequent masked token)\n",
                  e.loss, e.perplexity, e.mlm_accuracy, static_cast<long long>(e.tokens), baseline);
    } else {
      TF_CHECK_INPUT(static_cast<int64_t>(ids.size()) > 1, "the text is too short to evaluate (", ids.size(), " tokens)");
      auto batcher = data::CausalBatcher::sequential(std::move(ids), r.train.batch_size, r.data.seq_len);
      const train::EvalResult e = train::evaluate_causal(*run.model, batcher, batches, train::count_code_points(text));
      if (json) {
        print_json(e, "unigram_bits_per_char", train::unigram_bits_per_char(text));
        exit_code = 0;
        return;
      }
      std::printf("loss         %.4f nats per token (%lld tokens)\nperplexity   %.2f\n", e.loss,
                  static_cast<long long>(e.tokens), e.perplexity);
      if (std::isfinite(e.bits_per_char))
        std::printf("bits/char    %.4f (character unigram entropy of the text: %.4f)\n", e.bits_per_char,
                    train::unigram_bits_per_char(text));
    }
    exit_code = 0;
  });
}

}  // namespace tf::tools
