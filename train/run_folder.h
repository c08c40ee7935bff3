// A run folder is the user's data (Note [run folders] in run_folder.cpp): one run per folder, whose
// checkpoints carry its id; a fresh run never starts over another run's files unless asked to, and
// then moves them aside; pruning and --resume touch only the folder's own run.
//
//   claim_fresh_run_folder(dir, overwrite, out);        // before a fresh run writes anything
//   fs::path from = resume_checkpoint(dir);            // --resume without a path
//   prune_run_checkpoints(dir, keep, run.run_id);       // after each checkpoint
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace tf::train {

// A fresh run's id: 16 hex digits from the system's entropy source and the clock.
std::string new_run_id();

// What a run folder holds from earlier runs.
struct RunFolderContents {
  std::vector<std::filesystem::path> checkpoints;  // ckpt_*.h5, oldest first
  std::vector<std::filesystem::path> other_files;  // metrics.jsonl, recipe*.yaml
  bool empty() const { return checkpoints.empty() && other_files.empty(); }
  std::string describe() const;  // "3 checkpoints (up to ckpt_00001200.h5), metrics.jsonl, recipe.yaml"
};
RunFolderContents run_folder_contents(const std::filesystem::path& dir);

// Before a fresh run: a folder that holds an earlier run's files is refused (InputError naming the
// folder, what it holds, --resume and --overwrite), unless `overwrite`, which moves those files into
// dir/previous-<UTC time>/ and says so on `out`. Nothing is ever deleted.
void claim_fresh_run_folder(const std::filesystem::path& dir, bool overwrite, std::ostream& out);

// "dir/previous-20261203-201500" (with "-2", "-3" when taken): a new folder for files moved aside.
std::filesystem::path make_previous_folder(const std::filesystem::path& dir);

// --resume without a path: the newest checkpoint of the folder's run. InputError when the folder has
// none, or holds checkpoints of more than one run (then the user names one).
std::filesystem::path resume_checkpoint(const std::filesystem::path& dir);

// The checkpoint a command line names (sample, eval, info): a file, or a run folder for its run's
// newest checkpoint. A missing file is an InputError that lists the checkpoints its folder does hold.
// `option`: the option that names it ("--init-from"), empty for a command's argument; a folder of
// several runs is refused with an example of naming one checkpoint there.
std::filesystem::path checkpoint_argument(const std::string& argument, const std::string& option = "");

// Removes the oldest checkpoints of run `run_id` beyond the newest `keep`; checkpoints of other runs,
// and files that cannot be read, are never touched.
void prune_run_checkpoints(const std::filesystem::path& dir, int64_t keep, const std::string& run_id);

// The recipe file of a run folder: a fresh run writes recipe.yaml; a resume keeps it and, when the
// resumed recipe differs from the run's latest recipe file (accepted changes such as train.steps),
// writes recipe.resume-<step>.yaml beside it. Returns the file that holds `yaml`.
std::filesystem::path write_run_recipe(const std::filesystem::path& dir, const std::string& yaml, bool resumed,
                                       int64_t step);

}  // namespace tf::train
