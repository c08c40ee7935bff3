// Fine-tuning recipes and the unknown-text warning; see fine_tune.h.
#include "train/fine_tune.h"

#include <cstdio>
#include <ostream>

#include "train/checkpoint.h"
#include "train/run_folder.h"

namespace tf::train {

RecipeBase fine_tune_base(const std::filesystem::path& checkpoint) {
  return {checkpoint_recipe(checkpoint), checkpoint.string() + ":/recipe",
          {"model.", "data.tokenizer", "data.bpe_vocab_size", "data.bpe_sample_mb"}};
}

Recipe load_fine_tune_recipe(const std::string& path, const std::vector<std::string>& overrides,
                             const std::string& init_from) {
  return load_recipe(path, overrides, fine_tune_base(checkpoint_argument(init_from, "--init-from")));
}

double warn_unknown_text(const data::Tokenizer& tokenizer, std::span<const int32_t> ids,
                         const std::filesystem::path& checkpoint, std::ostream& out) {
  return warn_unknown_text(tokenizer, tokenizer.count_unknown(ids), static_cast<int64_t>(ids.size()), checkpoint, out);
}

double warn_unknown_text(const data::Tokenizer& tokenizer, int64_t unknown, int64_t ids,
                         const std::filesystem::path& checkpoint, std::ostream& out) {
  if (ids == 0) return 0;
  const double share = static_cast<double>(unknown) / static_cast<double>(ids);
  if (share <= kUnknownTextWarning) return share;
  // A char tokenizer's token is one character: say characters, which is what the user can look for.
  const std::string unit = tokenizer.kind() == "char" ? "characters" : "tokens";
  char percent[32];
  std::snprintf(percent, sizeof percent, "%.1f%%", 100 * share);
  out << "warning: " << percent << " of the training text (" << unknown << " of " << ids << " " << unit
      << ") is outside the vocabulary of " << checkpoint.string() << "'s " << tokenizer.kind()
      << " tokenizer: each such character reads as <unk>, which the model can neither tell apart nor learn to "
         "write; fine-tune on text in the checkpoint's alphabet, or train a new model on this text\n";
  return share;
}

}  // namespace tf::train
