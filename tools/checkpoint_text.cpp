// The arguments and input eval and heads share: a checkpoint and a text (tools/commands.h).
#include <cstdio>

#include "data/text.h"
#include "tools/commands.h"
#include "train/evaluate.h"
#include "train/run_folder.h"

namespace tf::tools {

void add_checkpoint_text_options(CLI::App& cmd, CheckpointTextArgs& args, const std::string& text_use) {
  cmd.add_option("checkpoint", args.checkpoint, "Checkpoint file (.h5), or a run folder for its newest checkpoint")
      ->required();
  cmd.add_option("--text", args.text_path,
                 "UTF-8 text file or folder to " + text_use + " (default: the recipe's validation split)");
  cmd.add_option("--set", args.overrides, kInferenceSetHelp);
  cmd.add_flag("--json", args.json, "Print one JSON object with every figure at full precision (for other tools)");
}

CheckpointText load_checkpoint_text(const CheckpointTextArgs& args) {
  CheckpointText out;
  out.file = train::checkpoint_argument(args.checkpoint).string();
  out.loaded = train::load_checkpoint(out.file, args.overrides);
  const train::Run& run = out.loaded.run;
  if (!args.text_path.empty()) {
    out.text = data::read_text(args.text_path);
    std::vector<int32_t> ids = train::tokenize(run, out.text);
    if (const int64_t unknown = run.tokenizer->count_unknown(ids))
      std::fprintf(stderr, "note: %lld characters of the text are outside the checkpoint's vocabulary and were read as <unk>\n",
                   static_cast<long long>(unknown));
    out.ids = std::move(ids);
    // Ids written as numbers (a corpus tokenized elsewhere) stand for no known text: no characters.
    out.characters = run.tokenizer->kind() == "ids" ? 0 : train::count_code_points(out.text);
  } else {
    // The validation shard of the recipe's corpus, mapped (prepared first when missing).
    try {
      const data::PreparedCorpus corpus =
          train::prepare_recipe_corpus(run.recipe.data, run.recipe.model.arch, run.tokenizer.get(), true, nullptr);
      out.ids = corpus.val.tokens;
      out.characters = static_cast<int64_t>(corpus.val.info.characters);
    } catch (const InputError& e) {  // the data keys it names are the checkpoint's, not this command's
      throw InputError(concat(e.what(), "; the validation split of ", out.file,
                              "'s recipe is not here: give a text with --text FILE"));
    }
  }
  out.text_name = args.text_path.empty() ? "validation split" : args.text_path;
  return out;
}

void require_gated_heads(const CheckpointText& input, const char* command) {
  const layers::ModelConfig& m = input.loaded.run.recipe.model;
  for (int64_t l = 0; l < m.n_layers; ++l) {
    TF_CHECK_INPUT(m.mixer(l) != layers::MixerKind::differential, command, ": ", input.file, " has differential "
                   "attention in layer ", l, " (model.mixer); head importance and pruning gate softmax heads, which "
                   "a differential layer pairs into one");
    TF_CHECK_INPUT(m.mixer(l) != layers::MixerKind::mamba, command, ": ", input.file, " has a Mamba layer, ", l,
                   " (model.mixer); head importance and pruning gate attention heads, which it has none of");
  }
}

}  // namespace tf::tools
