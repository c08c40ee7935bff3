// `tapeformer eval CKPT [--text FILE]`: loss, perplexity, bits/char or masked-token accuracy.
#include <cmath>
#include <cstdio>
#include <optional>

#include "tools/commands.h"
#include "train/evaluate.h"
#include "train/trainer.h"

namespace tf::tools {

void add_eval_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a checkpoint on the validation split or a text");
  static CheckpointTextArgs args;
  static int64_t batches = 0;
  static std::optional<double> mask_prob;
  add_checkpoint_text_options(*cmd, args, "evaluate on");
  cmd->add_option("--batches", batches, "Evaluate at most this many batches; 0: the whole text")
      ->check(integer_in(0, int64_t{1} << 40));
  cmd->add_option("--mask-prob", mask_prob,
                  "BERT: the share of positions masked for evaluation (default: the recipe's data.mask_prob); "
                  "to compare runs trained at different rates on one task")
      ->check(CLI::Range(1e-9, 1.0));
  cmd->callback([&exit_code] {
    CheckpointText input = load_checkpoint_text(args);
    const std::string& file = input.file;
    const train::Run& run = input.loaded.run;
    const std::string& text = input.text;
    data::Tokens& ids = input.ids;
    // The character unigram baseline: of the --text file, or of the validation shard's text.
    const auto unigram = [&] { return text.empty() ? train::unigram_bits_per_char(*run.tokenizer, ids)
                                                   : train::unigram_bits_per_char(text); };
    const auto& r = run.recipe;
    const auto text_tokens = static_cast<size_t>(ids.size());
    if (!args.json)
      std::printf("checkpoint   %s (step %lld)\ntext         %s (%zu tokens)\n", file.c_str(),
                  static_cast<long long>(run.step), input.text_name.c_str(),
                  text_tokens);
    // {"checkpoint": ..., "step": ..., "text_tokens": ..., "tokens": ..., "loss": ..., ...}: every number
    // in the shortest form that reads back exactly (train::json_number).
    auto print_json = [&](const train::EvalResult& e, const std::vector<std::pair<const char*, double>>& extras) {
      std::printf("{\"checkpoint\": \"%s\", \"step\": %lld, \"text\": \"%s\", \"text_tokens\": %zu, \"tokens\": %lld, "
                  "\"loss\": %s, \"perplexity\": %s, \"bits_per_char\": %s, \"mlm_accuracy\": %s",
                  file.c_str(), static_cast<long long>(run.step),
                  input.text_name.c_str(), text_tokens,
                  static_cast<long long>(e.tokens), train::json_number(e.loss).c_str(),
                  train::json_number(e.perplexity).c_str(), train::json_number(e.bits_per_char).c_str(),
                  train::json_number(e.mlm_accuracy).c_str());
      for (const auto& [key, value] : extras) std::printf(", \"%s\": %s", key, train::json_number(value).c_str());
      std::printf("}\n");
    };
    TF_CHECK_INPUT(!mask_prob || r.model.arch == layers::Architecture::bert, "--mask-prob: ", file,
                   " is a GPT, which masks nothing; drop the option");
    if (r.model.arch == layers::Architecture::bert) {
      auto batcher = train::masked_eval_batcher(run, std::move(ids), mask_prob);
      const train::EvalResult e = train::evaluate_masked(*run.model, batcher, batches);
      const train::MaskedBaselines base = train::masked_baselines(batcher, batches);
      if (args.json) {
        print_json(e, {{"baseline_accuracy", base.most_frequent_accuracy}, {"unigram_loss", base.unigram_loss},
                       {"own_token_accuracy", base.own_token_accuracy}, {"own_token_loss", base.own_token_loss}});
        exit_code = 0;
        return;
      }
      std::printf("loss         %.4f nats per masked token\nperplexity   %.2f\naccuracy     %.4f on %lld masked tokens\n"
                  "baselines    accuracy %.4f, loss %.4f: always the most frequent masked token, the targets' unigram "
                  "distribution\n"
                  "             accuracy %.4f, loss %.4f: from the position's own input token alone ([MASK], or the "
                  "token kept or swapped in)\n",
                  e.loss, e.perplexity, e.mlm_accuracy, static_cast<long long>(e.tokens), base.most_frequent_accuracy,
                  base.unigram_loss, base.own_token_accuracy, base.own_token_loss);
    } else {
      TF_CHECK_INPUT(ids.size() > 1, "the text is too short to evaluate (", ids.size(), " tokens)");
      auto batcher = train::causal_eval_batcher(run, std::move(ids));
      const train::EvalResult e = train::evaluate_causal(*run.model, batcher, batches, input.characters);
      if (args.json) {
        print_json(e, {{"unigram_bits_per_char", unigram()}});
        exit_code = 0;
        return;
      }
      std::printf("loss         %.4f nats per token (%lld tokens)\nperplexity   %.2f\n", e.loss,
                  static_cast<long long>(e.tokens), e.perplexity);
      if (std::isfinite(e.bits_per_char))
        std::printf("bits/char    %.4f (character unigram entropy of the text: %.4f)\n", e.bits_per_char,
                    unigram());
    }
    exit_code = 0;
  });
}

}  // namespace tf::tools
