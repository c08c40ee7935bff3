// Shared by the training-loop tests: a deterministic English-like text, tiny recipes that train on
// it in a temporary folder, metrics.jsonl parsing, and running the `tapeformer` binary.
#pragma once
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/env_guard.h"
#include "support/temp_dir.h"
#include "train/recipe.h"

namespace tf::testing {

// About `bytes` bytes of sentences drawn from a fixed word list by a 64-bit LCG (Knuth's MMIX
// constants): same text for the same seed on every machine, with English-like letter statistics.
inline std::string english_text(size_t bytes, uint64_t seed = 7) {
  static const char* const kWords[] = {
      "the",   "of",    "and",   "to",     "a",     "in",    "that",   "is",    "was",   "he",
      "for",   "it",    "with",  "as",     "his",   "on",    "be",     "at",    "by",    "had",
      "this",  "not",   "but",   "from",   "or",    "have",  "an",     "they",  "which", "one",
      "you",   "were",  "her",   "all",    "she",   "there", "would",  "their", "we",    "him",
      "been",  "has",   "when",  "who",    "will",  "more",  "no",     "if",    "out",   "so",
      "river", "house", "small", "people", "water", "years", "little", "old",   "world", "work"};
  const size_t n = sizeof kWords / sizeof kWords[0];
  uint64_t state = seed;
  auto next = [&](uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  };
  std::string text;
  while (text.size() < bytes) {
    const uint64_t words = 4 + next(10);
    for (uint64_t w = 0; w < words; ++w) {
      std::string word = kWords[next(n)];
      if (w == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
      text += word;
      text += w + 1 == words ? (next(4) == 0 ? "?" : ".") : (next(8) == 0 ? ", " : " ");
    }
    text += next(3) == 0 ? "\n" : " ";
  }
  return text;
}

using RunTempDir = tf::testing::TempDir;

// Changes the working directory for a scope and restores it on exit.
class CwdGuard {
 public:
  explicit CwdGuard(const std::filesystem::path& dir) : previous_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~CwdGuard() { std::filesystem::current_path(previous_); }
  CwdGuard(const CwdGuard&) = delete;
  CwdGuard& operator=(const CwdGuard&) = delete;

 private:
  std::filesystem::path previous_;
};

inline std::string source_path(const std::string& relative) {
  return std::string(TAPEFORMER_SOURCE_DIR) + "/" + relative;
}

// A shipped recipe (recipes/<name>.yaml) trained on `text_file`, with its run folder and token
// cache in `folder`; `more` overrides come last.
inline train::Recipe tiny_recipe(const std::string& name, const std::filesystem::path& text_file,
                                 const std::filesystem::path& run_dir, const std::filesystem::path& cache_dir,
                                 std::vector<std::string> more = {}) {
  std::vector<std::string> overrides = {"data.corpus=files",
                                        "data.train_path=" + text_file.string(),
                                        "data.cache_dir=" + cache_dir.string(),
                                        "checkpoint.dir=" + run_dir.string(),
                                        "sample.tokens=0",
                                        "log.interval=1"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  return train::parse_recipe(read_file(source_path("recipes/" + name + ".yaml")), name + ".yaml", overrides);
}

// `tapeformer train` arguments for the same tiny run as tiny_recipe, overrides as --set flags.
inline std::vector<std::string> train_args(const std::string& name, const std::filesystem::path& text_file,
                                           const std::filesystem::path& run_dir,
                                           const std::filesystem::path& cache_dir,
                                           const std::vector<std::string>& more = {}) {
  std::vector<std::string> args = {"train", source_path("recipes/" + name + ".yaml")};
  std::vector<std::string> sets = {"data.corpus=files", "data.train_path=" + text_file.string(),
                                   "data.cache_dir=" + cache_dir.string(), "checkpoint.dir=" + run_dir.string(),
                                   "sample.tokens=0", "log.interval=1"};
  sets.insert(sets.end(), more.begin(), more.end());
  for (const std::string& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  return args;
}

// One metrics.jsonl record: key -> value text ("null" for a missing evaluation).
using MetricsRecord = std::map<std::string, std::string>;

// Records of complete lines only: a line without its newline (a process killed mid-write) is not
// a record yet. The records are flat objects of numbers and nulls, so a small scanner suffices.
inline std::vector<MetricsRecord> read_metrics(const std::filesystem::path& file) {
  std::vector<MetricsRecord> out;
  const std::string text = read_file(file);
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = text.substr(start, end - start);
    MetricsRecord record;
    for (size_t q = line.find('"'); q != std::string::npos; q = line.find('"', q)) {
      const size_t close = line.find('"', q + 1);
      const std::string key = line.substr(q + 1, close - q - 1);
      size_t v = line.find(':', close) + 1;
      while (line[v] == ' ') ++v;
      const size_t stop = line.find_first_of(",}", v);
      record[key] = line.substr(v, stop - v);
      q = stop;
    }
    out.push_back(record);
  }
  return out;
}

// The value of `key` in a record as a double (NaN for null).
inline double number(const MetricsRecord& r, const std::string& key) {
  const auto it = r.find(key);
  if (it == r.end() || it->second == "null") return std::nan("");
  return std::stod(it->second);
}

// A `tapeformer` child process with stdout and stderr sent to files.
class Child {
 public:
  // `cwd`: the child's working directory (empty: this process's). `program`: what to run instead
  // of tapeformer (mpirun, for the tests of several processes). `file_size_limit`: the most bytes
  // the child may write to a file, with SIGXFSZ ignored (both survive exec), so that writing past it
  // fails with EFBIG as on a full disk.
  Child(const std::vector<std::string>& args, const std::filesystem::path& out_file,
        const std::filesystem::path& err_file, const std::filesystem::path& cwd = {},
        const std::string& program = TAPEFORMER_BINARY, rlim_t file_size_limit = RLIM_INFINITY) {
    std::vector<std::string> argv_strings = {program};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls between fork and exec.
      const int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out, 1);
      ::dup2(err, 2);
      if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
      if (file_size_limit != RLIM_INFINITY) {
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        ::sigaction(SIGXFSZ, &ignore, nullptr);
        const rlimit limit{file_size_limit, file_size_limit};
        if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(125);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  // Waits for the child and returns its wait status.
  int wait() {
    if (!status_) {
      int status = 0;
      rusage usage{};
      ::wait4(pid_, &status, 0, &usage);
      status_ = status;
      max_rss_kib_ = usage.ru_maxrss;
    }
    return *status_;
  }
  // The child's peak resident set size in KiB (Linux's ru_maxrss), once it has been waited for.
  long max_rss_kib() const { return max_rss_kib_; }
  // True (and the status recorded) when the child has already exited.
  bool exited() {
    if (status_) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    status_ = status;
    return true;
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  long max_rss_kib_ = 0;
};

// Runs `tapeformer ARGS` to completion; the exit code (or 128 + signal). `file_size_limit`: as Child's.
inline int run_tapeformer(const std::vector<std::string>& args, const std::filesystem::path& out_file,
                          const std::filesystem::path& err_file, const std::filesystem::path& cwd = {},
                          rlim_t file_size_limit = RLIM_INFINITY) {
  Child child(args, out_file, err_file, cwd, TAPEFORMER_BINARY, file_size_limit);
  const int status = child.wait();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// `tapeformer ARGS` run to completion in `dir` (its stdout and stderr kept in files there).
struct CommandOutcome {
  int code;
  std::string out, err;
};
inline CommandOutcome run_command(const std::vector<std::string>& args, const std::filesystem::path& dir) {
  const int code = run_tapeformer(args, dir / "out.txt", dir / "err.txt");
  return {code, read_file(dir / "out.txt"), read_file(dir / "err.txt")};
}

}  // namespace tf::testing
