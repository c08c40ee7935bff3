// Crash safety: `tapeformer train` with a checkpoint every kInterval steps is SIGKILLed at seeded
// random moments spread over the run by progress (the checkpoints are ~19 MB, so writing one takes
// about as long as a step, and half the kills are aimed inside a write). After each kill the
// newest checkpoint loads, is at most one checkpoint interval behind the last step the process
// logged, no ".partial" file passes for a checkpoint, and `--resume` finishes the run with losses
// and parameters bit-identical to an uninterrupted run.
//
// The same for Ctrl-C (Note [Ctrl-C] in train/interrupt.cpp): one SIGINT at a random step ends the
// run with exit 130 and a checkpoint of the last step logged; a second SIGINT while that checkpoint
// is being written ends it at once with exit 130 and no ".partial" file. Both resume bit-identically
// and log each step once.
//
// TAPEFORMER_KILL_TRIALS sets the number of kills (10 by default, about half a minute; the soak,
// tests/soak/kill_soak.sh, runs 100), TAPEFORMER_CTRL_C_TRIALS the number of Ctrl-C runs (4), and
// TAPEFORMER_KILL_SEED their seed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <random>

#include "framework/io/hdf5_io.h"
#include "train/checkpoint.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using tf::testing::Child;
using tf::testing::read_file;
using tf::testing::read_metrics;

constexpr int64_t kSteps = 8;
constexpr int64_t kInterval = 2;  // checkpoints at steps 2, 4, 6, 8

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::atoi(value) : fallback;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::vector<fs::path> partial_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".partial") out.push_back(e.path());
  return out;
}

// The last step logged in metrics.jsonl (complete lines only), 0 if none.
int64_t last_logged_step(const fs::path& dir) {
  if (!fs::exists(dir / "metrics.jsonl")) return 0;
  const auto records = read_metrics(dir / "metrics.jsonl");
  return records.empty() ? 0 : std::stoll(records.back().at("step"));
}

// train_loss by step. A step is never logged twice: the records a stopped process logged past its
// newest checkpoint move aside when the run resumes (train/run_history.h).
std::map<int64_t, double> losses_by_step(const fs::path& dir) {
  std::map<int64_t, double> out;
  for (const auto& r : read_metrics(dir / "metrics.jsonl")) {
    const int64_t step = std::stoll(r.at("step"));
    const double loss = tf::testing::number(r, "train_loss");
    const auto [it, fresh] = out.emplace(step, loss);
    EXPECT_TRUE(fresh) << "step " << step << " logged twice, as " << it->second << " and " << loss;
  }
  return out;
}

void expect_same_model(const fs::path& a, const fs::path& b) {
  const H5Reader ra(a.string()), rb(b.string());
  const auto names = ra.list("model");
  ASSERT_EQ(names, rb.list("model"));
  for (const auto& name : names) {
    const Tensor ta = ra.read_tensor("model", name), tb = rb.read_tensor("model", name);
    ASSERT_EQ(ta.shape(), tb.shape());
    EXPECT_EQ(std::memcmp(ta.raw_data(), tb.raw_data(), ta.nbytes()), 0) << name;
  }
}

// The run both tests stop: d_model 256 makes a checkpoint (weights + two Adam moments) ~19 MB, so
// writing and flushing it takes about as long as the step itself or longer, and stops often land
// inside save_checkpoint. A checkpoint every `interval` steps (0: only the stop's and the end's).
std::vector<std::string> run_args(const fs::path& tmp, const fs::path& dir, int64_t interval) {
  return tf::testing::train_args("tiny_gpt", tmp / "text.txt", dir, tmp / "cache",
                                 {"train.steps=" + std::to_string(kSteps), "model.d_model=256", "model.n_heads=4",
                                  "checkpoint.interval=" + std::to_string(interval), "checkpoint.keep=3",
                                  "eval.interval=0", "train.threads=1", "model.dropout=0.1"});
}

TEST(Kill, SigkillAtRandomMomentsLeavesALoadableRecentCheckpointAndResumeFinishes) {
  tf::testing::RunTempDir tmp;
  tf::testing::write_file(tmp / "text.txt", tf::testing::english_text(6000));
  auto args_for = [&](const fs::path& dir) { return run_args(tmp.path(), dir, kInterval); };

  // The uninterrupted run: the truth every resumed run must reproduce bit for bit.
  const fs::path reference = tmp / "reference";
  const auto start = Clock::now();
  ASSERT_EQ(tf::testing::run_tapeformer(args_for(reference), tmp / "ref.out", tmp / "ref.err"), 0)
      << read_file(tmp / "ref.err");
  const double run_seconds = seconds_since(start);
  const fs::path reference_final = checkpoint_path(reference, kSteps);
  ASSERT_TRUE(fs::exists(reference_final));
  const std::map<int64_t, double> reference_losses = losses_by_step(reference);
  ASSERT_EQ(reference_losses.size(), static_cast<size_t>(kSteps));

  // Time scale of one step, from the reference's own log (used only before a trial has timed
  // steps of its own).
  const auto reference_log = read_metrics(reference / "metrics.jsonl");
  const auto checkpoint_bytes = static_cast<double>(fs::file_size(reference_final));
  const double reference_step = (tf::testing::number(reference_log.back(), "elapsed_s") -
                                 tf::testing::number(reference_log.front(), "elapsed_s")) / (kSteps - 1);

  const int trials = env_int("TAPEFORMER_KILL_TRIALS", 10);
  const auto seed = static_cast<uint64_t>(env_int("TAPEFORMER_KILL_SEED", 20261129));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int no_checkpoint = 0, mid_write = 0, finished_first = 0, aimed = 0, aimed_hit = 0, newest_due = 0,
      one_behind = 0;
  std::ostringstream table;
  table << "run without kills: " << std::fixed << std::setprecision(2) << run_seconds << " s for " << kSteps
        << " steps, checkpoints of " << checkpoint_bytes / 1e6
        << " MB\ntrial  aim    target   step s  logged  newest  partial  resume\n";
  for (int trial = 0; trial < trials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const fs::path dir = tmp / ("trial" + std::to_string(trial));
    // Moments spread over the run by progress, not by the clock (other tests share the cores, so
    // a run's pace varies): trial i waits for step k, stratified over [0, kSteps), to be logged.
    // Even trials then wait a random fraction u of a step (of this run's pace); odd trials aim at
    // the checkpoint of the first checkpointed step >= k, written right after that step is logged,
    // and kill once its ".partial" file has grown to u times a finished checkpoint's size.
    const double position = (trial + unit(rng)) / trials * kSteps;
    const double u = position - static_cast<int64_t>(position);
    const bool aim_at_write = trial % 2 == 1 && position >= 1;
    const int64_t target = aim_at_write ? (static_cast<int64_t>(position) + kInterval - 1) / kInterval * kInterval
                                        : static_cast<int64_t>(position);
    const std::vector<std::string> args = args_for(dir);
    bool exited_first = false;
    double step_seconds = reference_step;
    {
      Child child(args, dir.string() + ".out", dir.string() + ".err");
      ASSERT_TRUE(child.started());
      auto previous = Clock::now();
      for (int64_t seen = 0; seen < target && !child.exited();) {
        const int64_t now_seen = last_logged_step(dir);
        if (now_seen > seen) {
          if (seen > 0) step_seconds = seconds_since(previous) / (now_seen - seen);  // this run's pace
          previous = Clock::now();
          seen = now_seen;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (aim_at_write) {
        const fs::path partial = checkpoint_path(dir, target).string() + ".partial";
        for (;;) {  // until the file is big enough, or the write is over (then kill at once)
          std::error_code ec;
          const auto size = fs::file_size(partial, ec);
          if (!ec && static_cast<double>(size) >= u * checkpoint_bytes) break;
          if (ec && fs::exists(checkpoint_path(dir, target))) break;
          if (child.exited()) break;
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      } else {
        std::this_thread::sleep_for(std::chrono::duration<double>(u * step_seconds));
      }
      exited_first = child.exited();
      if (!exited_first) ::kill(child.pid(), SIGKILL);
      child.wait();
    }
    finished_first += exited_first;

    // What survived the kill.
    const int64_t logged = last_logged_step(dir);
    const bool partial = fs::exists(dir) && !partial_files(dir).empty();
    mid_write += partial;
    aimed += aim_at_write;
    aimed_hit += aim_at_write && partial;
    const auto newest = latest_checkpoint(dir);
    int64_t newest_step = 0;
    if (newest) {
      EXPECT_EQ(newest->extension(), ".h5") << *newest;  // never a ".partial"
      LoadedRun loaded;
      ASSERT_NO_THROW(loaded = load_checkpoint(*newest)) << *newest;
      newest_step = loaded.run.step;
      EXPECT_EQ(*newest, checkpoint_path(dir, newest_step));
    } else {
      ++no_checkpoint;
    }
    // The checkpoint of step s (a multiple of kInterval) is written right after step s is logged:
    // the newest is that of the last multiple logged, or, killed while writing it, the one before.
    const int64_t due = logged / kInterval * kInterval;
    EXPECT_LE(newest_step, logged);
    EXPECT_GE(newest_step, logged - kInterval) << "newest checkpoint " << newest_step << ", last logged step " << logged;
    EXPECT_TRUE(newest_step == due || newest_step == due - kInterval) << newest_step << " vs due " << due;
    newest_due += newest_step == due;
    one_behind += newest_step == due - kInterval;

    // Resume and finish. Without any checkpoint, --resume must say so, and a fresh start (--overwrite:
    // the folder holds the killed run's metrics) finishes.
    const auto resume_start = Clock::now();
    std::vector<std::string> resume = args;
    resume.push_back("--resume");
    const int code = tf::testing::run_tapeformer(resume, dir.string() + ".out2", dir.string() + ".err2");
    if (newest && newest_step == kSteps) {
      // The first run got to the end before the kill: nothing is left to train, and --resume says so.
      EXPECT_EQ(code, 2);
      EXPECT_NE(read_file(dir.string() + ".err2").find("nothing is left to train"), std::string::npos)
          << read_file(dir.string() + ".err2");
    } else if (newest) {
      ASSERT_EQ(code, 0) << read_file(dir.string() + ".err2");
      EXPECT_NE(read_file(dir.string() + ".out2").find("resuming from " + newest->string()), std::string::npos);
    } else {
      EXPECT_EQ(code, 2);
      EXPECT_NE(read_file(dir.string() + ".err2").find("no checkpoint in the run folder"), std::string::npos)
          << read_file(dir.string() + ".err2");
      // The folder holds the killed run's metrics and recipe: a fresh start moves them aside.
      std::vector<std::string> fresh = args;
      fresh.push_back("--overwrite");
      ASSERT_EQ(tf::testing::run_tapeformer(fresh, dir.string() + ".out2", dir.string() + ".err2"), 0)
          << read_file(dir.string() + ".err2");
    }
    const double resume_seconds = seconds_since(resume_start);
    EXPECT_EQ(latest_checkpoint(dir), checkpoint_path(dir, kSteps));
    EXPECT_TRUE(partial_files(dir).empty()) << "a .partial file outlived the finished run";
    // Exactly the uninterrupted run: every logged loss, every parameter bit.
    EXPECT_EQ(losses_by_step(dir), reference_losses);
    expect_same_model(checkpoint_path(dir, kSteps), reference_final);

    table << std::setw(5) << trial << (aim_at_write ? "  write" : "  step ") << std::setw(8) << std::setprecision(2) << position << std::setw(9) << std::setprecision(3) << step_seconds
          << std::setw(8) << logged
          << std::setw(8) << (newest ? std::to_string(newest_step) : "none") << std::setw(9)
          << (partial ? "yes" : "no") << std::setw(7) << resume_seconds << "s"
          << (exited_first ? "  (finished before the kill)" : "") << "\n";
    // Checked: its ~60 MB of checkpoints would add up to gigabytes over a 100-kill soak.
    if (!::testing::Test::HasFailure()) fs::remove_all(dir);
  }
  std::cout << table.str() << trials << " kills (seed " << seed << "): " << mid_write
            << " during a checkpoint write (" << aimed_hit << " of " << aimed << " aimed at one), " << no_checkpoint
            << " before the first checkpoint, " << finished_first << " after the run ended; newest checkpoint "
            << newest_due << " x the last one due, " << one_behind << " x one interval behind; " << trials
            << " resumes finished bit-identical: " << (::testing::Test::HasFailure() ? "NO" : "yes") << "; total "
            << std::fixed << std::setprecision(1) << seconds_since(start) << " s\n";
  // Kills did land inside checkpoint writes (else the test did not test the hard case).
  EXPECT_GE(aimed_hit, aimed / 2);
}

TEST(Kill, CtrlCAndASecondCtrlCDuringTheCheckpointWriteResumeBitIdentically) {
  tf::testing::RunTempDir tmp;
  tf::testing::write_file(tmp / "text.txt", tf::testing::english_text(6000));
  auto args_for = [&](const fs::path& dir) { return run_args(tmp.path(), dir, 0); };
  const fs::path reference = tmp / "reference";
  ASSERT_EQ(tf::testing::run_tapeformer(args_for(reference), tmp / "ref.out", tmp / "ref.err"), 0)
      << read_file(tmp / "ref.err");
  const std::map<int64_t, double> reference_losses = losses_by_step(reference);

  const int trials = env_int("TAPEFORMER_CTRL_C_TRIALS", 4);
  std::mt19937_64 rng(static_cast<uint64_t>(env_int("TAPEFORMER_KILL_SEED", 20261129)));
  int second_hit = 0;
  for (int trial = 0; trial < trials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const fs::path dir = tmp / ("trial" + std::to_string(trial));
    const bool twice = trial % 2 == 1;
    const int64_t at = 1 + static_cast<int64_t>(rng() % (kSteps - 2));  // Ctrl-C once step `at` is logged
    const std::vector<std::string> args = args_for(dir);
    int status = 0;
    bool partial_seen = false;
    {
      Child child(args, dir.string() + ".out", dir.string() + ".err");
      ASSERT_TRUE(child.started());
      while (last_logged_step(dir) < at && !child.exited()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ASSERT_FALSE(child.exited()) << read_file(dir.string() + ".err");
      ::kill(child.pid(), SIGINT);
      if (twice) {  // the second once the stop's checkpoint is being written
        while (!child.exited() && !partial_seen) {
          partial_seen = !partial_files(dir).empty();
          if (!partial_seen) std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        if (partial_seen) ::kill(child.pid(), SIGINT);
      }
      status = child.wait();
    }
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 130) << read_file(dir.string() + ".err");
    EXPECT_TRUE(partial_files(dir).empty()) << "a .partial file outlived the stop";
    const int64_t logged = last_logged_step(dir);
    const auto newest = latest_checkpoint(dir);
    if (twice && partial_seen) {
      ++second_hit;
      EXPECT_FALSE(newest.has_value()) << "the only checkpoint was the one the second Ctrl-C stopped";
      EXPECT_NE(read_file(dir.string() + ".err").find("stopped at once"), std::string::npos);
    } else {
      ASSERT_TRUE(newest.has_value()) << read_file(dir.string() + ".out");
      EXPECT_EQ(*newest, checkpoint_path(dir, logged));  // the stop's checkpoint: the last step logged
    }
    // Resume (or, with no checkpoint, start afresh: the folder's files move aside by themselves).
    std::vector<std::string> again = args;
    if (newest) again.push_back("--resume");
    ASSERT_EQ(tf::testing::run_tapeformer(again, dir.string() + ".out2", dir.string() + ".err2"), 0)
        << read_file(dir.string() + ".err2");
    EXPECT_EQ(losses_by_step(dir), reference_losses);
    expect_same_model(checkpoint_path(dir, kSteps), checkpoint_path(reference, kSteps));
    if (!::testing::Test::HasFailure()) fs::remove_all(dir);
  }
  std::cout << trials << " Ctrl-C runs, " << second_hit << " with a second Ctrl-C inside the checkpoint write\n";
  EXPECT_GE(second_hit, 1) << "no second Ctrl-C landed inside a write: the hard case went untested";
}

}  // namespace
}  // namespace tf::train
