// What a --resume changes about a run: the recipe given against the one stored in the checkpoint.
// Keys that cannot continue the run (the model, the data and tokenizer, the batch, the optimizer's
// kind and state-shaping hyperparameters) are refused with a key-by-key diff; keys that can (the step
// count, the schedule and learning rate, evaluation, checkpoints, logging, sampling, threads) are
// listed and need --accept-changes, so a run never silently stops being what its checkpoint says.
//
//   check_resume_changes(ckpt, recipe, options.accept_changes, out);   // throws InputError
//
// eval and sample may --set a few keys on a trained model (check_inference_changes).
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "train/recipe.h"

namespace tf::train {

struct RecipeChange {
  std::string key, stored, given;  // the key and its two values, as written in a resolved recipe
  bool continuable = false;        // the run can go on with it (e.g. train.steps)
};
// Every key whose value differs, in the schema's order.
std::vector<RecipeChange> recipe_changes(const Recipe& stored, const Recipe& given);

// Refuses (InputError) changes that cannot continue the run, and continuable ones unless `accept`;
// with `accept`, writes the continuable ones to `out`.
void check_resume_changes(const std::filesystem::path& checkpoint, const Recipe& given, bool accept,
                          std::ostream& out);

// train --init-from (fine-tuning): refuses a recipe whose model or tokenizer keys differ from the
// checkpoint's, key by key, but for its dropout rates and the keys eval may set (RoPE scaling, window).
// (load_fine_tune_recipe in fine_tune.h takes the keys a recipe does not write from the checkpoint.)
void check_fine_tune_changes(const std::filesystem::path& checkpoint, const Recipe& given);

// eval and sample with --set: refuses (InputError, key by key) every change but the few that leave
// the trained weights meaning what they meant: context length, RoPE scaling, attention window, batch.
void check_inference_changes(const std::filesystem::path& checkpoint, const Recipe& stored, const Recipe& given);

}  // namespace tf::train
