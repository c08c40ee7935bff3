// Recipe changes at --resume; see resume_changes.h.
#include "train/resume_changes.h"

#include <ostream>

#include "framework/error.h"
#include "train/checkpoint.h"
#include "train/recipe_schema.h"

namespace tf::train {

namespace {

// Keys a run can continue with: they change what happens from here on, not what the checkpoint holds
// or how its state is to be read. Everything else (model.*, data.* but the cache and the data root, train.batch_size,
// train.grad_accum, train.seed, the optimizer's kind, betas, eps, weight decay, ...) would make the
// run something its checkpoint is not.
bool continuable(const std::string& key) {
  for (const char* prefix : {"schedule.", "eval.", "checkpoint.", "log.", "sample."})
    if (key.rfind(prefix, 0) == 0) return true;
  for (const char* exact : {"train.steps", "train.threads", "train.anomaly", "train.deterministic", "train.time_budget",
                            "train.sequence_parallel", "train.recompute", "train.thread_split",
                            "train.matmul_precision",
                            "optim.lr", "optim.muon_lr", "data.cache_dir", "data.root"})
    if (key == exact) return true;
  return false;
}

// Keys eval and sample may set on a trained model: how long a context it reads and how RoPE's angles
// are stretched to it, an attention window, the batch. None of them shapes or trains a weight (a
// learned position table sized by model.max_seq_len is caught when the weights are loaded).
bool inference_settable(const std::string& key) {
  for (const char* prefix : {"model.rope_scaling", "model.rope_original_context", "model.yarn_"})
    if (key.rfind(prefix, 0) == 0) return true;
  for (const char* exact : {"model.max_seq_len", "model.attention_window", "data.seq_len", "train.batch_size"})
    if (key == exact) return true;
  return false;
}

std::string listing(const std::vector<RecipeChange>& changes) {
  std::string s;
  for (const RecipeChange& c : changes) s += "\n  " + c.key + ": " + c.stored + " in the checkpoint, " + c.given + " now";
  return s;
}

}  // namespace

std::vector<RecipeChange> recipe_changes(const Recipe& stored, const Recipe& given) {
  std::vector<RecipeChange> out;
  for (const Field& f : recipe_fields()) {
    const std::string a = f.get(stored), b = f.get(given);
    if (a != b) out.push_back({f.key, a, b, continuable(f.key)});
  }
  return out;
}

void check_inference_changes(const std::filesystem::path& checkpoint, const Recipe& stored, const Recipe& given) {
  std::vector<RecipeChange> refused;
  for (RecipeChange& c : recipe_changes(stored, given))
    if (!inference_settable(c.key)) refused.push_back(std::move(c));
  TF_CHECK_INPUT(stored.model.max_seq_len == given.model.max_seq_len ||
                     stored.model.position != layers::PositionEncoding::learned,
                 "--set model.max_seq_len: the model in ", checkpoint.string(), " learned one position embedding for ",
                 "each of its ", stored.model.max_seq_len, " positions and has none beyond; a model with "
                 "model.position rope, alibi, sinusoidal or none can be read at other lengths");
  TF_CHECK_INPUT(refused.empty(), "--set: these keys describe how the model in ", checkpoint.string(),
                 " was built or trained and cannot change after training:", listing(refused),
                 "\neval and sample can set model.max_seq_len, model.attention_window, model.rope_scaling, "
                 "model.rope_scaling_factor, model.rope_original_context, model.yarn_alpha, model.yarn_beta, "
                 "data.seq_len and train.batch_size");
}

void check_fine_tune_changes(const std::filesystem::path& checkpoint, const Recipe& given) {
  const Recipe stored = parse_recipe(checkpoint_recipe(checkpoint), checkpoint.string() + ":/recipe");
  std::vector<RecipeChange> refused;
  for (RecipeChange& c : recipe_changes(stored, given)) {
    // The run reads its text with the checkpoint's tokenizer: other tokenizer keys would do nothing.
    const bool tokenizer = c.key == "data.tokenizer" || c.key == "data.bpe_vocab_size" || c.key == "data.bpe_sample_mb";
    const bool free = (c.key.rfind("model.", 0) != 0 && !tokenizer) || c.key == "model.dropout" ||
                      c.key == "model.attn_dropout" || (inference_settable(c.key) && c.key != "model.max_seq_len");
    if (!free) refused.push_back(std::move(c));
  }
  TF_CHECK_INPUT(refused.empty(), "--init-from: the recipe's model differs from the one in ", checkpoint.string(),
                 ", whose weights it would start from:", listing(refused),
                 "\nFine-tuning keeps the model (its dropout rates, RoPE scaling and attention window may change) "
                 "and its tokenizer; the model keys a recipe leaves out are the checkpoint's; the data, optimizer, "
                 "schedule and steps are the recipe's");
}

void check_resume_changes(const std::filesystem::path& checkpoint, const Recipe& given, bool accept,
                          std::ostream& out) {
  const Recipe stored = parse_recipe(checkpoint_recipe(checkpoint), checkpoint.string() + ":/recipe");
  std::vector<RecipeChange> refused, allowed;
  for (RecipeChange& c : recipe_changes(stored, given)) (c.continuable ? allowed : refused).push_back(std::move(c));
  const std::string own_recipe = (checkpoint.parent_path() / "recipe.yaml").string();
  TF_CHECK_INPUT(refused.empty(), "--resume: the recipe differs from the checkpoint's (", checkpoint.string(),
                 ") where a run cannot continue:", listing(refused), "\nResume with the run's own recipe (", own_recipe,
                 "), or start a new run (another checkpoint.dir, or --overwrite)");
  if (allowed.empty()) return;
  TF_CHECK_INPUT(accept, "--resume: the recipe changes the run (", checkpoint.string(), "):", listing(allowed),
                 "\nThe run can continue with these; say so with --accept-changes (the resumed recipe is kept beside "
                 "the first, as recipe.resume-<step>.yaml)");
  out << "continuing with changes (--accept-changes):" << listing(allowed) << "\n";
}

}  // namespace tf::train
