// `tapeformer heads CKPT [--text FILE] [--batches N] [--json]`: each attention head's importance
// (Michel et al. 2019) and the loss with that head alone masked, most important first.
#include <cstdio>

#include "tools/commands.h"
#include "train/evaluate.h"
#include "inspect/head_importance.h"

namespace tf::tools {
namespace {

// {"checkpoint": ..., "loss": ..., "heads": [{"layer": 0, "head": 1, "importance": ..., ...}, ...]}
void print_json(const std::string& file, const train::Run& run, const std::string& text, size_t text_tokens,
                const inspect::HeadImportance& r) {
  std::printf("{\"checkpoint\": \"%s\", \"step\": %lld, \"text\": \"%s\", \"text_tokens\": %zu, \"batches\": %lld, "
              "\"sequences\": %lld, \"tokens\": %lld, \"loss\": %s, \"heads\": [",
              file.c_str(), static_cast<long long>(run.step), text.c_str(), text_tokens,
              static_cast<long long>(r.batches), static_cast<long long>(r.sequences), static_cast<long long>(r.tokens),
              train::json_number(r.loss).c_str());
  for (size_t i = 0; i < r.heads.size(); ++i) {
    const inspect::HeadScore& s = r.heads[i];
    std::printf("%s{\"layer\": %lld, \"head\": %lld, \"importance\": %s, \"raw_importance\": %s, \"masked_loss\": %s, "
                "\"loss_delta\": %s}",
                i == 0 ? "" : ", ", static_cast<long long>(s.layer), static_cast<long long>(s.head),
                train::json_number(s.importance).c_str(), train::json_number(s.raw_importance).c_str(),
                train::json_number(s.masked_loss).c_str(), train::json_number(s.masked_loss - r.loss).c_str());
  }
  std::printf("]}\n");
}

void print_table(const inspect::HeadImportance& r, bool bert) {
  std::printf("loss         %.4f nats per %s with every head (%lld tokens)\n\n", r.loss,
              bert ? "masked token" : "token", static_cast<long long>(r.tokens));
  std::printf("rank  layer  head  importance  raw importance  loss masked     delta\n");
  for (size_t i = 0; i < r.heads.size(); ++i) {
    const inspect::HeadScore& s = r.heads[i];
    std::printf("%4zu  %5lld  %4lld  %10.4f  %14.4e  %11.4f  %+8.5f\n", i + 1, static_cast<long long>(s.layer),
                static_cast<long long>(s.head), s.importance, s.raw_importance, s.masked_loss, s.masked_loss - r.loss);
  }
}

}  // namespace

void add_heads_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "heads",
      "Rank the attention heads by importance (Michel et al. 2019: the mean |dL/dxi| of a gate xi on each head's "
      "output, per sequence, divided by the l2 norm over its layer), with the loss when each head alone is masked");
  static CheckpointTextArgs args;
  static int64_t batches = -1;
  add_checkpoint_text_options(*cmd, args, "measure on");
  cmd->add_option("--batches", batches,
                  "Read at most this many batches, as `tapeformer eval --batches` (default: the recipe's eval.batches); "
                  "0: the whole text. Each head masked is one more pass")
      ->check(integer_in(0, int64_t{1} << 40));
  cmd->callback([&exit_code] {
    CheckpointText input = load_checkpoint_text(args);
    require_gated_heads(input, "heads");
    const train::Run& run = input.loaded.run;
    const auto text_tokens = static_cast<size_t>(input.ids.size());
    TF_CHECK_INPUT(text_tokens > 1, "the text is too short to measure head importance on (", text_tokens, " tokens)");
    const int64_t max_batches = batches >= 0 ? batches : run.recipe.eval.batches;
    const bool bert = run.recipe.model.arch == layers::Architecture::bert;
    const inspect::HeadImportance r = [&] {
      if (bert) {
        auto batcher = train::masked_eval_batcher(run, std::move(input.ids));
        return inspect::head_importance(*run.model, batcher, max_batches);
      }
      auto batcher = train::causal_eval_batcher(run, std::move(input.ids));
      return inspect::head_importance(*run.model, batcher, max_batches);
    }();
    if (args.json) {
      print_json(input.file, run, input.text_name, text_tokens, r);
    } else {
      std::printf("checkpoint   %s (step %lld)\ntext         %s (%zu tokens; %lld batches, %lld sequences)\n",
                  input.file.c_str(), static_cast<long long>(run.step), input.text_name.c_str(), text_tokens,
                  static_cast<long long>(r.batches), static_cast<long long>(r.sequences));
      print_table(r, bert);
    }
    exit_code = 0;
  });
}

}  // namespace tf::tools
