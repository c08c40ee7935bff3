// Run folders; see run_folder.h.
//
// Note [run folders]
// ~~~~~~~~~~~~~~~~~~
// A run folder (checkpoint.dir) holds one run: its checkpoints, metrics.jsonl and recipe.yaml. Before
// run ids, a fresh run into a folder of another run appended to its metrics, had its own newest
// checkpoint pruned at once (pruning kept the highest step numbers, the old run's), and a later
// --resume continued the old run. So:
//  - a fresh run refuses a folder with files of an earlier run, or with --overwrite moves them into
//    previous-<time>/ first (never deleting);
//  - every checkpoint records its run's id (a fresh run draws one; a resume keeps it), pruning
//    removes only the current run's oldest checkpoints, and --resume refuses to guess between runs;
//  - pruning runs after the new checkpoint is complete (written to .partial, synced, renamed), and
//    removes files one at a time, oldest first: a kill at any moment leaves the newest checkpoint and
//    possibly some older ones, never fewer than `keep` of the run's and never another run's.
// Checkpoints from before run ids have the empty id: they form one run together.
#include "train/run_folder.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

#include "framework/error.h"
#include "train/checkpoint.h"

namespace tf::train {

namespace fs = std::filesystem;

std::string new_run_id() {
  std::random_device entropy;
  const uint64_t clock = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  const uint64_t id = (static_cast<uint64_t>(entropy()) << 32 ^ entropy()) ^ (clock * 0x9E3779B97F4A7C15ull);
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(id));
  return text;
}

RunFolderContents run_folder_contents(const fs::path& dir) {
  RunFolderContents c;
  for (const auto& [step, file] : list_checkpoints(dir)) c.checkpoints.push_back(file);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return c;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool recipe = name.rfind("recipe", 0) == 0 && name.ends_with(".yaml");
    const bool derived = name == "report.html" || name == "curves.png";  // tapeformer report, plot
    if (name == "metrics.jsonl" || recipe || derived) c.other_files.push_back(entry.path());
  }
  std::sort(c.other_files.begin(), c.other_files.end());
  return c;
}

std::string RunFolderContents::describe() const {
  std::string s;
  if (!checkpoints.empty())
    s = std::to_string(checkpoints.size()) + (checkpoints.size() == 1 ? " checkpoint" : " checkpoints") +
        " (newest " + checkpoints.back().filename().string() + ")";
  for (const fs::path& f : other_files) s += (s.empty() ? "" : ", ") + f.filename().string();
  return s;
}

namespace {

std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", &tm);
  return text;
}

}  // namespace

fs::path make_previous_folder(const fs::path& dir) {
  const std::string stamp = utc_stamp();
  fs::path aside = dir / ("previous-" + stamp);
  std::error_code ec;
  for (int n = 2; fs::exists(aside, ec); ++n) aside = dir / ("previous-" + stamp + "-" + std::to_string(n));
  fs::create_directory(aside, ec);
  TF_CHECK_INPUT(!ec, "cannot create '", aside.string(), "' (to move earlier files aside): ", ec.message());
  return aside;
}

void claim_fresh_run_folder(const fs::path& dir, bool overwrite, std::ostream& out) {
  const RunFolderContents held = run_folder_contents(dir);
  if (held.empty()) return;
  // Files of a run that never wrote a checkpoint (it failed or was killed before its first one) hold
  // nothing to continue: they move aside without being asked, so they never block the next run.
  const bool unfinished = held.checkpoints.empty();
  TF_CHECK_INPUT(overwrite || unfinished, "checkpoint.dir '", dir.string(), "' already holds a run: ", held.describe(),
                 ". Continue it with --resume, start afresh there with --overwrite (moves those files into ",
                 (dir / "previous-<time>").string(), "/, deleting nothing), or choose another folder with ",
                 "--set checkpoint.dir=...");
  const fs::path aside = make_previous_folder(dir);
  std::error_code ec;
  size_t moved = 0;
  for (const auto* files : {&held.checkpoints, &held.other_files})
    for (const fs::path& f : *files) {
      fs::rename(f, aside / f.filename(), ec);  // same folder tree, same file system: a rename
      TF_CHECK_INPUT(!ec, "--overwrite: cannot move '", f.string(), "' into '", aside.string(), "': ", ec.message(),
                     " (", moved, " files moved so far; nothing was deleted)");
      ++moved;
    }
  if (overwrite)
    out << "--overwrite: moved the earlier run's " << moved << " files (" << held.describe() << ") into "
        << aside.string() << "/\n";
  else
    out << dir.string() << " held files of a run that wrote no checkpoint (" << held.describe()
        << "): nothing to continue, so they moved into " << aside.string() << "/\n";
}

namespace {

// The newest checkpoint of a folder that holds some, when they are all of one run. `option` is how the
// user named the folder ("--resume", "--init-from"; empty for a command's checkpoint argument): a
// folder of several runs is refused with how to name one checkpoint on that command's line.
fs::path newest_run_checkpoint(const fs::path& dir, const std::string& option) {
  const auto all = list_checkpoints(dir);
  const std::string newest_id = checkpoint_run_id(all.back().second);
  for (const auto& [step, file] : all) {
    std::string id;
    try {
      id = checkpoint_run_id(file);
    } catch (const InputError&) {
      continue;  // an unreadable file is no run's; the newest one is checked when it is loaded
    }
    TF_CHECK_INPUT(id == newest_id, option.empty() ? "" : option + ": ", "the run folder ", dir.string(),
                   " holds checkpoints of more than one run (", file.filename().string(), " is of run '", id,
                   "', ", all.back().second.filename().string(), " of run '", newest_id,
                   "'): name the one to use, e.g. ", option.empty() ? "" : option + " ", all.back().second.string());
  }
  return all.back().second;
}

}  // namespace

fs::path resume_checkpoint(const fs::path& dir) {
  TF_CHECK_INPUT(!list_checkpoints(dir).empty(), "--resume: no checkpoint in the run folder ", dir.string(),
                 " (name one: --resume runs/x/ckpt_00000500.h5)");
  return newest_run_checkpoint(dir, "--resume");
}

fs::path checkpoint_argument(const std::string& argument, const std::string& option) {
  const fs::path path(argument);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    TF_CHECK_INPUT(!list_checkpoints(path).empty(), option.empty() ? "" : option + " ", argument,
                   ": a folder without checkpoints (ckpt_<step>.h5)");
    return newest_run_checkpoint(path, option);
  }
  if (fs::exists(path, ec) || ec) return path;  // opening it reports what is wrong with it
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const auto held = list_checkpoints(folder);
  if (held.empty()) return path;  // no run folder here either: the reader's "no such file" names it
  std::string names;
  for (const auto& [step, file] : held) names += (names.empty() ? "" : ", ") + file.filename().string();
  throw InputError(concat(argument, ": no such checkpoint; ", folder.string(), " holds ", names,
                          " (or pass the folder for the newest)"));
}

void prune_run_checkpoints(const fs::path& dir, int64_t keep, const std::string& run_id) {
  // Fewer checkpoints than kept: nothing to read (each run id is an HDF5 open; checkpoint.keep: 1000
  // with a checkpoint every step would read the whole folder after every step).
  const auto all = list_checkpoints(dir);
  if (static_cast<int64_t>(all.size()) <= keep) return;
  std::vector<fs::path> own;  // oldest first
  for (const auto& [step, file] : all) {
    try {
      if (checkpoint_run_id(file) == run_id) own.push_back(file);
    } catch (const InputError&) {
      // unreadable: not provably this run's, so it stays
    }
  }
  for (size_t i = 0; i + keep < own.size(); ++i) {
    std::error_code ec;
    fs::remove(own[i], ec);  // best effort: a leftover old checkpoint harms nothing
  }
}

namespace {

// The run's latest recipe file: recipe.resume-<step>.yaml of the highest step, else recipe.yaml.
fs::path latest_run_recipe(const fs::path& dir) {
  fs::path latest = dir / "recipe.yaml";
  int64_t latest_step = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "recipe.resume-", suffix = ".yaml";
    if (name.rfind(prefix, 0) != 0 || !name.ends_with(suffix)) continue;
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    if (const int64_t step = std::stoll(digits); step > latest_step) latest_step = step, latest = entry.path();
  }
  return latest;
}

}  // namespace

fs::path write_run_recipe(const fs::path& dir, const std::string& yaml, bool resumed, int64_t step) {
  fs::path file = dir / "recipe.yaml";
  if (resumed) {
    const fs::path latest = latest_run_recipe(dir);
    std::ifstream in(latest, std::ios::binary);
    if (in) {
      std::stringstream kept;
      kept << in.rdbuf();
      if (kept.str() == yaml) return latest;  // resumed as it was: nothing new to record
      file = dir / ("recipe.resume-" + std::to_string(step) + ".yaml");
    }
  }
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << yaml;
  TF_CHECK_INPUT(out.flush(), file.string(), ": cannot write");
  return file;
}

}  // namespace tf::train
