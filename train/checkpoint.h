// Run checkpoints in HDF5: everything needed to continue a run bit for bit (docs/checkpoint.md).
//
//   save_checkpoint(run, batches.state(), "runs/demo/ckpt_000500.h5");   // atomic
//   LoadedRun loaded = load_checkpoint("runs/demo/ckpt_000500.h5");     // recipe from the file
//
// Files are written to "<name>.partial", flushed to disk and renamed, so a crash at any moment
// leaves the previous checkpoint intact (framework/io/hdf5_io.h).
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/batcher.h"
#include "train/run.h"

namespace tf::train {

inline constexpr int64_t kCheckpointFormat = 1;

// A file system that refuses the file is an InputError "cannot save checkpoint '<file>': <reason>".
void save_checkpoint(const Run& run, const data::BatcherState& batches, const std::filesystem::path& file);
// The trainer's: a refusal also says which checkpoint of the run folder is kept, and that `train
// --resume` continues from it.
void save_run_checkpoint(const Run& run, const data::BatcherState& batches, const std::filesystem::path& file);

struct LoadedRun {
  Run run;
  data::BatcherState batches;  // where the training batches continue
  bool weights_only = false;   // a weights file: no optimizer, dropout or data-order state was loaded
};
// A weights file (Note [weights files] in checkpoint.cpp; `tapeformer export --format weights`): the
// checkpoint without optimizer, dropout and data-order state. Every reader of a model takes it; a
// resume (load_checkpoint_into) refuses it.
void save_weights(const Run& run, const std::filesystem::path& file);
bool is_weights_file(const std::filesystem::path& file);
// InputError when `file` is a weights file, naming --init-from as the way to train from it (resume
// checks this before it compares recipes).
void check_resumable(const std::filesystem::path& file);

// Rebuilds the run from the checkpoint's own recipe (and tokenizer), then loads its state.
// `overrides` ("model.rope_scaling=yarn", eval's and sample's --set) change that recipe first; only
// keys that leave the weights' meaning alone are accepted (check_inference_changes).
LoadedRun load_checkpoint(const std::filesystem::path& file, const std::vector<std::string>& overrides = {});
// Loads the checkpoint's state into a run built from a recipe (resume): the recipe's model must
// match the checkpoint's parameter names, shapes and dtypes; every difference is listed.
data::BatcherState load_checkpoint_into(Run& run, const std::filesystem::path& file);

// Copies only the checkpoint's parameters into run.params (fine-tuning): names, shapes and dtypes
// must match, every difference listed (InputError); the optimizer, step and run id are untouched.
void load_weights(Run& run, const std::filesystem::path& file);

// The recipe text and tokenizer stored in a checkpoint, without building anything.
std::string checkpoint_recipe(const std::filesystem::path& file);
std::string checkpoint_tokenizer(const std::filesystem::path& file);

// The id of the run that wrote the checkpoint ("" for checkpoints from before run ids), read without
// loading anything else (train/run_folder.h).
std::string checkpoint_run_id(const std::filesystem::path& file);
// The optimizer steps a checkpoint's run had completed, read without loading anything else.
int64_t checkpoint_step(const std::filesystem::path& file);

// runs/x/ckpt_000500.h5 naming, the finished checkpoints of a folder as (step, path) oldest first,
// and the newest one. Pruning and choosing what to resume: train/run_folder.h.
std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int64_t step);
std::vector<std::pair<int64_t, std::filesystem::path>> list_checkpoints(const std::filesystem::path& dir);
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);

}  // namespace tf::train
