// A run's history past a step; see run_history.h.
//
// Note [resuming from an earlier step]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A resume from step S continues the run as if nothing had happened after S. Whatever the folder
// holds of the run past S is then another branch of its history: checkpoints past S (a resume from
// an older checkpoint; the new run would overwrite them as it passes their steps), recipe.resume-<k>
// files with k > S, and metrics records past S (the new run would log those steps a second time,
// and plots would draw both). The invariant: metrics.jsonl never holds two records of one step of
// one run. So a resume
//  - refuses when the run has checkpoints past S, unless --overwrite moves them aside or --branch
//    continues in another folder (train/trainer.cpp);
//  - otherwise moves the records past S into previous-<time>/ by itself: they are of steps no
//    checkpoint holds (the process was killed, or a second Ctrl-C stopped it, after logging them),
//    which the resumed run trains again. Nothing is deleted.
// The order of the moves keeps every record somewhere at every moment: the later records are
// written and synced to previous-<time>/metrics.jsonl first, then metrics.jsonl is replaced
// atomically (written to .partial, synced, renamed).
#include "train/run_history.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <ostream>
#include <sstream>

#include "framework/error.h"
#include "train/checkpoint.h"
#include "train/metrics_log.h"
#include "train/run_folder.h"

namespace tf::train {

namespace fs = std::filesystem;

namespace {

std::string read_whole(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Writes `text` to `file` durably: a .partial file, fsync, rename.
void write_durably(const fs::path& file, const std::string& text) {
  const fs::path partial = file.string() + ".partial";
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TF_CHECK_INPUT(fd >= 0, "cannot create '", partial.string(), "'");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool synced = done == text.size() && ::fsync(fd) == 0;
  ::close(fd);
  std::error_code ec;
  if (synced) fs::rename(partial, file, ec);
  if (!synced || ec) fs::remove(partial, ec);
  TF_CHECK_INPUT(synced && !ec, "cannot write '", file.string(), "' (", text.size(), " bytes; disk full?)");
}

// The k of recipe.resume-<k>.yaml, -1 for other names.
int64_t resume_recipe_step(const std::string& name) {
  const std::string prefix = "recipe.resume-", suffix = ".yaml";
  if (name.rfind(prefix, 0) != 0 || !name.ends_with(suffix)) return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoll(digits);
}

}  // namespace

std::string LaterHistory::describe() const {
  std::string s;
  for (const fs::path& c : checkpoints) s += (s.empty() ? "" : ", ") + c.filename().string();
  if (!records.empty()) {
    s += s.empty() ? "" : " and ";
    s += concat(records.size(), " metrics record", records.size() == 1 ? "" : "s", " (step");
    if (first_record_step == last_record_step)
      s += concat(" ", first_record_step, ")");
    else
      s += concat("s ", first_record_step, "-", last_record_step, ")");
  }
  for (const fs::path& r : recipes) s += (s.empty() ? "" : ", ") + r.filename().string();
  return s;
}

LaterHistory later_history(const fs::path& dir, const std::string& run_id, int64_t step) {
  LaterHistory later;
  later.step = step;
  for (const auto& [k, file] : list_checkpoints(dir)) {
    if (k <= step) continue;
    try {
      if (checkpoint_run_id(file) == run_id) later.checkpoints.push_back(file);
    } catch (const InputError&) {
      // unreadable: not provably this run's, so it is left where it is
    }
  }
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (resume_recipe_step(entry.path().filename().string()) > step) later.recipes.push_back(entry.path());
  std::sort(later.recipes.begin(), later.recipes.end());

  const fs::path metrics = dir / "metrics.jsonl";
  if (!fs::exists(metrics, ec)) return later;
  const std::string text = read_whole(metrics);
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = text.substr(start, end - start);
    MetricsRecord r;
    const bool ours = parse_metrics_line(line, r) && (r.texts.count("run") ? r.texts.at("run") : "") == run_id;
    const double k = r.number("step");
    if (ours && k > static_cast<double>(step)) {
      if (later.records.empty()) later.first_record_step = static_cast<int64_t>(k);
      later.first_record_step = std::min(later.first_record_step, static_cast<int64_t>(k));
      later.last_record_step = std::max(later.last_record_step, static_cast<int64_t>(k));
      later.records.push_back(line);
    } else {
      later.kept_metrics += line + "\n";
    }
  }
  later.cut_line = text.substr(start);
  return later;
}

fs::path set_aside_later_history(const fs::path& dir, const LaterHistory& later, std::ostream& out) {
  if (later.empty()) return {};
  const fs::path metrics = dir / "metrics.jsonl";
  if (later.checkpoints.empty() && later.recipes.empty() && later.records.empty()) {
    write_durably(metrics, later.kept_metrics);  // only a cut-off line: not a record, nothing to keep
    out << "metrics.jsonl: removed a cut-off last line (the process stopped while writing it)\n";
    return {};
  }
  const fs::path aside = make_previous_folder(dir);
  std::string moved_records;
  for (const std::string& line : later.records) moved_records += line + "\n";
  moved_records += later.cut_line;  // still without its newline: readers skip it as before
  write_durably(aside / "metrics.jsonl", moved_records);
  std::error_code ec;
  for (const auto* files : {&later.checkpoints, &later.recipes})
    for (const fs::path& f : *files) {
      fs::rename(f, aside / f.filename(), ec);
      TF_CHECK_INPUT(!ec, "cannot move '", f.string(), "' into '", aside.string(), "': ", ec.message(),
                     " (nothing was deleted)");
    }
  write_durably(metrics, later.kept_metrics);
  out << "resuming at step " << later.step << ": moved the run's later history (" << later.describe() << ") into "
      << aside.string() << "/\n";
  return aside;
}

LaterHistory check_resume_folder(const fs::path& dir, const fs::path& checkpoint, bool overwrite, bool branching) {
  const int64_t step = checkpoint_step(checkpoint);
  if (branching) {
    LaterHistory none;
    none.step = step;
    return none;
  }
  LaterHistory later = later_history(dir, checkpoint_run_id(checkpoint), step);
  if (later.checkpoints.empty() || overwrite) return later;
  const auto newest = list_checkpoints(dir).back().second;
  throw InputError(concat(
      "--resume: ", checkpoint.string(), " is at step ", step, ", and ", dir.string(), " holds this run's later ",
      "history: ", later.describe(), ". Continuing there would overwrite it. Choose one:\n",
      "  --branch DIR   continue from step ", step, " in a new run folder DIR; ", dir.string(), " stays as it is\n",
      "  --overwrite    move that later history into ", (dir / "previous-<time>").string(),
      "/ (nothing is deleted) and continue in ", dir.string(), "\n",
      "  --resume ", newest.string(), "   continue from the newest checkpoint instead"));
}

void start_branch(const fs::path& from, const fs::path& branch, const std::string& run_id, int64_t step) {
  std::error_code ec;
  fs::create_directories(branch, ec);
  TF_CHECK_INPUT(!ec, "--branch: cannot create the run folder '", branch.string(), "': ", ec.message());
  const LaterHistory source = later_history(from, run_id, step);
  // The history up to the branch point: the source's records of this run at or before `step`.
  std::string kept;
  std::istringstream lines(source.kept_metrics);
  for (std::string line; std::getline(lines, line);) {
    MetricsRecord r;
    if (parse_metrics_line(line, r) && (r.texts.count("run") ? r.texts.at("run") : "") == run_id) kept += line + "\n";
  }
  write_durably(branch / "metrics.jsonl", kept);
}

FilesBeforeFirstCheckpoint::FilesBeforeFirstCheckpoint() : exceptions_(std::uncaught_exceptions()) {}

void FilesBeforeFirstCheckpoint::will_create(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) created_.push_back(path);
}

void FilesBeforeFirstCheckpoint::will_append(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) created_.push_back(path);
  else appended_.push_back({path, fs::file_size(path, ec)});
}

FilesBeforeFirstCheckpoint::~FilesBeforeFirstCheckpoint() {
  if (done_ || std::uncaught_exceptions() <= exceptions_) return;
  std::error_code ec;
  for (const auto& [path, size] : appended_) fs::resize_file(path, size, ec);
  for (auto p = created_.rbegin(); p != created_.rend(); ++p) fs::remove(*p, ec);  // a folder only when empty
}

}  // namespace tf::train
