// A run's history past a step (Note [resuming from an earlier step] in run_history.cpp): what a
// resume from an earlier checkpoint would overwrite or duplicate, and the two ways to keep it: move
// it into previous-<time>/ (--resume CKPT --overwrite), or continue in a new folder (--branch DIR).
//
//   LaterHistory later = later_history(dir, run_id, 200);      // ckpt_00000400.h5, records 201..400
//   if (!later.checkpoints.empty()) refuse_or_choose(...);
//   set_aside_later_history(dir, later, out);                    // nothing is deleted
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace tf::train {

struct LaterHistory {
  int64_t step = 0;                                 // the step the run resumes from
  std::vector<std::filesystem::path> checkpoints;   // the run's ckpt_*.h5 past `step`, oldest first
  std::vector<std::filesystem::path> recipes;       // recipe.resume-<k>.yaml with k > step
  std::vector<std::string> records;                 // metrics.jsonl lines of the run past `step`
  int64_t first_record_step = 0, last_record_step = 0;
  std::string cut_line;     // a last line without its newline (a process killed mid-write): no record
  std::string kept_metrics; // metrics.jsonl without `records` and `cut_line`
  bool empty() const { return checkpoints.empty() && recipes.empty() && records.empty() && cut_line.empty(); }
  // "ckpt_00000300.h5, ckpt_00000400.h5 and 200 metrics records (steps 201-400)"
  std::string describe() const;
};

// Before any work of a resume from `checkpoint` into `dir`: the run's history there past the
// checkpoint's step. Refused (InputError naming the later checkpoints and the choices) when it holds
// checkpoints, unless `overwrite` (they will be moved aside) or `branching` (dir is not written).
LaterHistory check_resume_folder(const std::filesystem::path& dir, const std::filesystem::path& checkpoint,
                                 bool overwrite, bool branching);

// What `dir` holds of run `run_id` past `step`. Records and checkpoints of other runs are not part of it.
LaterHistory later_history(const std::filesystem::path& dir, const std::string& run_id, int64_t step);

// Moves the later checkpoints and recipe files into dir/previous-<UTC time>/, writes the later records
// there as metrics.jsonl, then replaces dir/metrics.jsonl by the kept lines (atomically); says so on
// `out`. A crash at any moment leaves every record in one of the two files, or both. A history of
// only a cut-off last line is mended in place. Returns the folder (empty when none was made).
std::filesystem::path set_aside_later_history(const std::filesystem::path& dir, const LaterHistory& later,
                                              std::ostream& out);

// --branch: a new run folder that starts with the run's history up to the resume step (its metrics
// records of steps <= step, copied from `from`), so plots of the branch show the whole curve. The
// branch folder must hold no run (claim_fresh_run_folder).
void start_branch(const std::filesystem::path& from, const std::filesystem::path& branch, const std::string& run_id,
                  int64_t step);

// The files a run creates or appends to in its folder before its first checkpoint. When the run fails
// before that checkpoint (the object is destroyed during an exception), the files it created are
// removed and those it appended to are cut back to their earlier length: the folder is as it was, so
// a failed start never blocks or changes the next run. Destroy it after closing the files.
class FilesBeforeFirstCheckpoint {
 public:
  FilesBeforeFirstCheckpoint();
  ~FilesBeforeFirstCheckpoint();
  void will_create(const std::filesystem::path& path);  // noted only if it does not exist yet
  void will_append(const std::filesystem::path& path);  // created, or its length now
  void checkpoint_written() { done_ = true; }
  FilesBeforeFirstCheckpoint(const FilesBeforeFirstCheckpoint&) = delete;
  FilesBeforeFirstCheckpoint& operator=(const FilesBeforeFirstCheckpoint&) = delete;

 private:
  std::vector<std::filesystem::path> created_;  // in creation order
  std::vector<std::pair<std::filesystem::path, uintmax_t>> appended_;  // and their earlier lengths
  int exceptions_;
  bool done_ = false;
};

}  // namespace tf::train
