// `tapeformer prune CKPT --heads FRACTION --out NEW.h5` removes the least important attention heads
// (Michel et al. 2019; inspect/prune.h, Note [pruning]) and writes a smaller checkpoint with its recipe
// beside it (NEW.yaml). `tapeformer prune CKPT --sweep` prints the validation loss of every pruned size
// instead, the paper's Figure 3, and with --plot draws it.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "inspect/plot.h"
#include "inspect/prune.h"
#include "tools/commands.h"
#include "train/output_path.h"
#include "train/evaluate.h"

namespace tf::tools {
namespace {

namespace fs = std::filesystem;

struct PruneArgs {
  CheckpointTextArgs input;
  double fraction = -1;
  std::string out, plot;
  bool sweep = false;
  int64_t batches = -1;
  std::string by = "importance";
};

// The run's evaluation on the text (tapeformer eval's figures), and its seconds.
struct Measured {
  train::EvalResult eval;
  double seconds = 0;
};

Measured measure(const train::Run& run, const CheckpointText& input, int64_t max_batches) {
  const auto start = std::chrono::steady_clock::now();
  Measured m;
  data::Tokens ids = input.ids;
  if (run.recipe.model.arch == layers::Architecture::bert) {
    auto batcher = train::masked_eval_batcher(run, std::move(ids));
    m.eval = train::evaluate_masked(*run.model, batcher, max_batches);
  } else {
    auto batcher = train::causal_eval_batcher(run, std::move(ids));
    m.eval = train::evaluate_causal(*run.model, batcher, max_batches, input.characters);
  }
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

// The heads' scores, ranked by the criterion --by names (inspect::rank_by).
inspect::HeadImportance importance(const train::Run& run, const CheckpointText& input, int64_t max_batches,
                                   inspect::PruneBy by) {
  data::Tokens ids = input.ids;
  const bool masked = by == inspect::PruneBy::masked_loss;
  inspect::HeadImportance scores = [&] {
    if (run.recipe.model.arch == layers::Architecture::bert) {
      auto batcher = train::masked_eval_batcher(run, std::move(ids));
      return inspect::head_importance(*run.model, batcher, max_batches, masked);
    }
    auto batcher = train::causal_eval_batcher(run, std::move(ids));
    return inspect::head_importance(*run.model, batcher, max_batches, masked);
  }();
  inspect::rank_by(scores, by);
  return scores;
}

std::string heads_list(const inspect::PrunePlan& plan) {
  std::string s = "[";
  for (size_t l = 0; l < plan.kept.size(); ++l) s += (l ? ", " : "") + std::to_string(plan.kept[l].size());
  return s + "]";
}

// The pruned model's figure next to the loss: bits/char for a GPT on characters, else accuracy.
std::string figure(const train::EvalResult& e, bool bert) {
  char buf[64];
  if (bert) std::snprintf(buf, sizeof buf, "accuracy %.4f", e.mlm_accuracy);
  else std::snprintf(buf, sizeof buf, "%.4f bits/char", e.bits_per_char);
  return buf;
}

void run_sweep(const PruneArgs& a, const CheckpointText& input, int64_t max_batches) {
  const train::Run& base = input.loaded.run;
  const layers::ModelConfig& config = base.recipe.model;
  const bool bert = config.arch == layers::Architecture::bert;
  const inspect::HeadImportance scores = importance(base, input, max_batches, inspect::parse_prune_by(a.by));
  const int64_t step = config.group_size(), most = inspect::max_removable_heads(config);
  std::printf("checkpoint   %s (step %lld)\ntext         %s; ranking (--by %s) and losses on the same %lld batches\n\n",
              input.file.c_str(), static_cast<long long>(base.step), input.text_name.c_str(), a.by.c_str(),
              static_cast<long long>(scores.batches));
  std::printf("removed  fraction  heads per layer          loss    change  %-20s  eval s\n", bert ? "figure" : "figure");
  double full_loss = 0;
  int64_t within_one_percent = 0;
  bool rose = false;
  inspect::Series loss_curve{"validation loss", {}, {}, 0, true};
  for (int64_t removed = 0; removed <= most; removed += step) {
    train::LoadedRun copy = train::load_checkpoint(input.file, a.input.overrides);
    const inspect::PrunePlan plan = inspect::plan_pruning(config, scores, removed);
    const train::Run pruned = inspect::prune_run(std::move(copy.run), plan);
    const Measured m = measure(pruned, input, max_batches);
    if (removed == 0) full_loss = m.eval.loss;
    const double change = m.eval.loss / full_loss - 1;
    if (!rose && change <= 0.01) within_one_percent = removed;
    else rose = true;
    const double fraction = static_cast<double>(removed) / static_cast<double>(plan.heads_before);
    std::printf("%7lld  %8.3f  %-22s  %7.4f  %+7.2f%%  %-20s  %6.2f\n", static_cast<long long>(removed), fraction,
                heads_list(plan).c_str(), m.eval.loss, 100 * change, figure(m.eval, bert).c_str(), m.seconds);
    std::fflush(stdout);
    loss_curve.x.push_back(fraction);
    loss_curve.y.push_back(m.eval.loss);
  }
  std::printf("\n%lld of %lld heads can go before the loss rises by more than 1%% (removed in order of --by %s, "
              "smallest first)\n",
              static_cast<long long>(within_one_percent), static_cast<long long>(config.total_heads()), a.by.c_str());
  if (!a.plot.empty()) {
    inspect::Panel panel{"validation loss after pruning", bert ? "nats per masked token" : "nats per token",
                         {loss_curve}};
    inspect::write_line_chart(a.plot, "head pruning: " + fs::path(input.file).filename().string(),
                              "fraction of heads removed", {panel});
    std::printf("plot: %s\n", a.plot.c_str());
  }
}

// The pruned checkpoint's recipe, written beside it: pruned.h5 -> pruned.yaml.
fs::path recipe_beside(const fs::path& out) { return fs::path(out).replace_extension(".yaml"); }

// The command line and the files it would write, checked before the checkpoint is loaded and the
// heads are measured.
void check_request(const PruneArgs& a) {
  TF_CHECK_INPUT(a.sweep || a.plot.empty(), "prune: --plot draws a --sweep; add --sweep");
  TF_CHECK_INPUT(!a.sweep || (a.out.empty() && a.fraction < 0),
                 "prune: --sweep writes no checkpoint; drop --heads and --out (or drop --sweep)");
  if (a.sweep) {
    if (!a.plot.empty()) train::check_output_file("prune --plot", a.plot);
    return;
  }
  TF_CHECK_INPUT(!a.out.empty(), "prune: give --out NEW.h5 for the pruned checkpoint (or --sweep)");
  TF_CHECK_INPUT(a.fraction >= 0, "prune: give --heads FRACTION, the share of heads to remove (or --sweep)");
  const fs::path out(a.out), recipe_out = recipe_beside(out);
  TF_CHECK_INPUT(out.extension() == ".h5", "prune: --out '", a.out, "' must name an .h5 file");
  TF_CHECK_INPUT(!fs::exists(out) && !fs::exists(recipe_out), "prune: ", fs::exists(out) ? out.string() : recipe_out.string(),
                 " exists; choose another --out (nothing is overwritten)");
  train::check_output_file("prune --out", out);
}

void prune_once(const PruneArgs& a, CheckpointText& input, int64_t max_batches) {
  const fs::path out(a.out), recipe_out = recipe_beside(out);
  train::Run& run = input.loaded.run;
  const layers::ModelConfig config = run.recipe.model;
  const bool bert = config.arch == layers::Architecture::bert;
  const int64_t to_remove = inspect::heads_in_fraction(config, a.fraction);
  const inspect::HeadImportance scores = importance(run, input, max_batches, inspect::parse_prune_by(a.by));
  const inspect::PrunePlan plan = inspect::plan_pruning(config, scores, to_remove);
  const Measured before = measure(run, input, max_batches);
  const int64_t params_before = layers::count_parameters(run.params);
  train::Run pruned = inspect::prune_run(std::move(run), plan);
  pruned.recipe.checkpoint.dir = (out.parent_path() / out.stem()).string();  // where a resumed run writes
  const Measured after = measure(pruned, input, max_batches);
  const std::string again = "; nothing was written (free space or fix the folder, then run prune again)";
  try {
    if (input.loaded.weights_only) train::save_weights(pruned, out);  // no state to carry over
    else train::save_checkpoint(pruned, input.loaded.batches, out);
  } catch (const InputError& e) {
    throw InputError(concat("prune: ", e.what(), again));
  }
  std::ofstream recipe_file(recipe_out);
  recipe_file << "# " << out.string() << ": " << input.file << " with " << plan.removed << " of " << plan.heads_before
              << " heads removed (tapeformer prune)\n"
              << pruned.recipe.to_yaml() << "\n";
  recipe_file.close();
  if (!recipe_file) {  // a checkpoint without its recipe is not kept
    std::error_code ec;
    fs::remove(recipe_out, ec);
    fs::remove(out, ec);
    throw InputError(concat("prune: cannot write the recipe '", recipe_out.string(), "' beside the checkpoint", again));
  }
  std::printf("removed      %lld of %lld heads (--heads %.3f, --by %s); heads per layer %s\n",
              static_cast<long long>(plan.removed), static_cast<long long>(plan.heads_before), a.fraction, a.by.c_str(),
              heads_list(plan).c_str());
  std::printf("parameters   %lld -> %lld\n", static_cast<long long>(params_before),
              static_cast<long long>(layers::count_parameters(pruned.params)));
  std::printf("loss         %.4f -> %.4f (%+.2f%%); %s -> %s; %lld batches of %s\n", before.eval.loss, after.eval.loss,
              100 * (after.eval.loss / before.eval.loss - 1), figure(before.eval, bert).c_str(),
              figure(after.eval, bert).c_str(), static_cast<long long>(after.eval.batches), input.text_name.c_str());
  std::printf("eval time    %.2f s -> %.2f s\n", before.seconds, after.seconds);
  std::printf("wrote        %s and its recipe %s\ncontinue     tapeformer train %s --resume %s\n", out.string().c_str(),
              recipe_out.string().c_str(), recipe_out.string().c_str(), out.string().c_str());
}

}  // namespace

void add_prune_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "prune",
      "Remove the least important attention heads (Michel et al. 2019) for good: a smaller checkpoint that loads, "
      "evaluates, samples and resumes like any other; or --sweep the loss over every pruned size");
  static PruneArgs args;
  add_checkpoint_text_options(*cmd, args.input, "measure importance and loss on");
  cmd->remove_option(cmd->get_option("--json"));  // the table is the output
  cmd->add_option("--heads", args.fraction,
                  "Share of all attention heads to remove, e.g. 0.25 (rounded to whole key/value groups); every "
                  "layer keeps at least one")
      ->check(number_in(0, 1));
  cmd->add_option("--out", args.out, "The pruned checkpoint (.h5, not overwritten); its recipe is written beside it as .yaml");
  cmd->add_flag("--sweep", args.sweep, "Print the loss after removing 0, 1, 2, ... heads in order of importance");
  cmd->add_option("--plot", args.plot, "With --sweep: draw the loss against the fraction removed (PNG)");
  cmd->add_option("--by", args.by,
                  "Order of removal: importance (Michel et al.'s, normalised per layer; default), raw (the importance "
                  "before normalising, comparable across layers) or masked (the loss with the head alone masked)")
      ->check(CLI::IsMember({"importance", "raw", "masked"}));
  cmd->add_option("--batches", args.batches,
                  "Read at most this many batches (default: the recipe's eval.batches); 0: the whole text")
      ->check(integer_in(0, int64_t{1} << 40));
  cmd->callback([&exit_code] {
    check_request(args);
    CheckpointText input = load_checkpoint_text(args.input);
    require_gated_heads(input, "prune");
    TF_CHECK_INPUT(input.ids.size() > 1, "the text is too short to measure head importance on (", input.ids.size(),
                   " tokens)");
    const int64_t max_batches = args.batches >= 0 ? args.batches : input.loaded.run.recipe.eval.batches;
    if (args.sweep) run_sweep(args, input, max_batches);
    else prune_once(args, input, max_batches);
    exit_code = 0;
  });
}

}  // namespace tf::tools
