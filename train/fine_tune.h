// Fine-tuning (train --init-from CKPT): a new run from a checkpoint's weights and tokenizer. Its
// recipe takes the model from the checkpoint, key by key, unless it writes the key itself (then
// check_fine_tune_changes in resume_changes.h says whether that key may differ); and the run says how
// much of its training text the checkpoint's vocabulary cannot read.
//
//   Recipe r = load_fine_tune_recipe("tune.yaml", {"train.steps=200"}, "runs/gpt_brown_char");
//   TrainOptions o;
//   o.init_from = "runs/gpt_brown_char";
//   train(r, o);   // calls warn_unknown_text once the text is tokenized
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "train/recipe.h"

namespace tf::train {

// The checkpoint's stored recipe as the base of a fine-tuning recipe: its model section and its
// tokenizer keys (the run reads text with the checkpoint's tokenizer whatever the recipe says).
RecipeBase fine_tune_base(const std::filesystem::path& checkpoint);

// load_recipe over fine_tune_base(checkpoint_argument(init_from)): init_from is a checkpoint or a run
// folder (its newest checkpoint).
Recipe load_fine_tune_recipe(const std::string& path, const std::vector<std::string>& overrides,
                             const std::string& init_from);

// Above this share of unknown tokens in the training text, warn_unknown_text warns.
inline constexpr double kUnknownTextWarning = 0.05;

// The training text `ids` under the checkpoint's `tokenizer`: when more than kUnknownTextWarning of
// them are the unknown token (characters outside a char vocabulary; byte-level BPE has none), writes
// a warning naming the share to `out`. Returns the share.
double warn_unknown_text(const data::Tokenizer& tokenizer, std::span<const int32_t> ids,
                         const std::filesystem::path& checkpoint, std::ostream& out);
// The same from the counts (a token shard's header holds its unknown ids).
double warn_unknown_text(const data::Tokenizer& tokenizer, int64_t unknown, int64_t ids,
                         const std::filesystem::path& checkpoint, std::ostream& out);

}  // namespace tf::train
