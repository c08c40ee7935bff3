// A kill-and-Ctrl-C soak under `mpirun -np 2` (issue "run folders, round 2", Done when): a run is
// stopped again and again at seeded random moments, by Ctrl-C (mpirun sends its ranks SIGTERM), by a
// second Ctrl-C, and by SIGKILL of either rank (sometimes during a checkpoint write: one every four
// steps), and resumed each time with `train --resume`. It must end with the parameters of an
// uninterrupted run bit for bit, and metrics.jsonl must hold every step once, with the same figures.
// (The single-process soak is tests/train/kill_test.cpp.)
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dist/mpi_fixture.h"
#include "train/checkpoint.h"
#include "train/run_compare.h"

namespace tf::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Under AddressSanitizer a step takes some 0.6 s instead of 20 ms: the 14 rounds then end near step 56
// (near 188 in Release, where more steps pass before each stop lands), and the uninterrupted run and the
// last resume spent 200 s of the test's 300 s on steps no stop reached. 80 keeps every round stopping.
#ifdef __SANITIZE_ADDRESS__
constexpr int kSteps = 80;
#else
constexpr int kSteps = 200;
#endif

std::vector<std::string> soak_args(const fs::path& dir, const fs::path& text, const std::string& name) {
  return train_args("tiny_gpt", text, dir / name, dir / "cache",
                    // steps of some 20 ms: long enough that a stop lands where it was aimed
                    {"train.steps=" + std::to_string(kSteps), "train.grad_accum=2", "model.dropout=0.1",
                     "model.d_model=64", "model.d_ff=256", "model.max_seq_len=128", "data.seq_len=128",
                     "train.batch_size=8",
                     "train.deterministic=true", "checkpoint.interval=4", "checkpoint.keep=1000", "eval.interval=0",
                     "log.report=false", "schedule.warmup_steps=5"});
}

void wait_for(Child& child, double seconds, const std::function<bool()>& done = [] { return false; }) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until && !child.exited() && !done())
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

TEST(Soak, TwoRanksStoppedByCtrlCAndKillsResumeToTheUninterruptedRunBitForBit) {
  RunTempDir tmp;
  const fs::path text = tmp.path() / "text.txt";
  std::ofstream(text) << english_text(60000);
  const Outcome straight = run(tmp.path(), "straight", 2, soak_args(tmp.path(), text, "straight"));
  ASSERT_EQ(straight.code, 0) << straight.err;

  allow_root();
  ::setenv("TAPEFORMER_SOAK_TEST", "1", 1);  // marks this test's ranks among the machine's processes
  const fs::path soak = tmp.path() / "soak", last = train::checkpoint_path(soak, kSteps);
  std::mt19937 rng(20261204);
  const char* const kActions[] = {"Ctrl-C", "Ctrl-C twice", "SIGKILL rank 1", "SIGKILL rank 0"};
  int stops = 0;
  for (int round = 0; round < 14 && !fs::exists(last); ++round) {
    std::vector<std::string> args = soak_args(tmp.path(), text, "soak");
    if (round > 0) args.push_back("--resume");
    const fs::path out = tmp.path() / ("round" + std::to_string(round) + ".out");
    const fs::path err = tmp.path() / ("round" + std::to_string(round) + ".err");
    Child child(under_mpirun(2, args), out, err, {}, TAPEFORMER_MPIRUN);
    // The first round runs to its first checkpoint, so that every later one has one to resume. Then
    // the stop comes a random 1-8 steps on (counted in metrics.jsonl, so the soak does not depend on
    // the machine's speed), or, every fifth round, at a random moment of the start: within a random
    // 0-1 s but before the round's first step, however fast the machine starts.
    if (round == 0) wait_for(child, 120, [&] { return fs::exists(soak / "ckpt_00000004.h5"); });
    const size_t records = fs::exists(soak / "metrics.jsonl") ? read_metrics(soak / "metrics.jsonl").size() : 0;
    if (round % 5 == 4) {
      wait_for(child, std::uniform_real_distribution<double>(0.0, 1.0)(rng),
               [&] { return read_metrics(soak / "metrics.jsonl").size() > records; });
    } else {
      const size_t target = records + std::uniform_int_distribution<size_t>(1, 8)(rng);
      wait_for(child, 60, [&] { return read_metrics(soak / "metrics.jsonl").size() >= target; });
    }
    const int action = round % 4;
    if (!child.exited()) {
      if (action <= 1) {
        ::kill(child.pid(), SIGINT);
        if (action == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 150)(rng)));
          ::kill(child.pid(), SIGINT);
        }
      } else {
        // The rank's process, once mpirun has started it.
        pid_t victim = -1;
        for (int tries = 0; tries < 500 && victim <= 0 && !child.exited(); ++tries) {
          victim = rank_pid(action == 2 ? 1 : 0, "TAPEFORMER_SOAK_TEST");
          if (victim <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (victim > 0) ::kill(victim, SIGKILL);
      }
      ++stops;
    }
    wait_for(child, 60);
    ASSERT_TRUE(child.exited()) << "round " << round << " (" << kActions[action] << ") did not end: " << read_file(err);
    const int status = child.wait();
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::cout << "[ soak ] round " << round << ": " << kActions[action] << ", exit " << code << ", newest "
              << (train::latest_checkpoint(soak) ? train::latest_checkpoint(soak)->filename().string() : std::string("none"))
              << "\n";
    // Never a refusal: a stopped run always leaves something `--resume` continues.
    EXPECT_NE(code, 2) << read_file(err);
    // No rank outlives mpirun (Note [orphaned ranks] in framework/dist/comm.cpp): without that, after a
    // second Ctrl-C both ranks still ran when mpirun had exited, and one went on for seconds.
    // Under AddressSanitizer a rank was still there 0.5 s after mpirun ended (its exit is slower; the
    // cause is not pinned down): it gets 5 s there. Elsewhere 2 s: beside other tests' ranks on 2
    // cores, a killed rank's peer once took longer than 0.5 s to go.
#ifdef __SANITIZE_ADDRESS__
    constexpr int kTries = 100;  // 5 s
#else
    constexpr int kTries = 40;  // 2 s
#endif
    pid_t orphan = -1;
    for (int tries = 0; tries < kTries; ++tries) {
      orphan = std::max(rank_pid(0, "TAPEFORMER_SOAK_TEST"), rank_pid(1, "TAPEFORMER_SOAK_TEST"));
      if (orphan <= 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_LE(orphan, 0) << "round " << round << ": rank process " << orphan << " still runs " << kTries * 0.05
                         << " s after mpirun ended";
  }
  ::unsetenv("TAPEFORMER_SOAK_TEST");
  EXPECT_GE(stops, 8) << "the runs ended before most stops: the soak tested little";
  if (!fs::exists(last)) {
    std::vector<std::string> args = soak_args(tmp.path(), text, "soak");
    args.push_back("--resume");
    const Outcome final_run = run(tmp.path(), "final", 2, args);
    ASSERT_EQ(final_run.code, 0) << final_run.err;
  }
  expect_same_parameters(tmp.path() / "straight" / last.filename(), last);
  expect_same_steps(tmp.path() / "straight/metrics.jsonl", soak / "metrics.jsonl", kSteps);
  for (const auto& entry : fs::directory_iterator(soak))
    EXPECT_EQ(entry.path().string().find(".partial"), std::string::npos) << "left behind: " << entry.path();
}

}  // namespace
}  // namespace tf::testing
