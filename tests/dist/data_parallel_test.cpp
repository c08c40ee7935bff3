// `mpirun -np N tapeformer train` (docs/distributed.md) against one process: the same micro-batches
// give the same model; a run resumes on another rank count; bad input prints one error; a killed rank
// stops the others and leaves a checkpoint that resumes. Each test starts mpirun with 2 ranks on
// loopback (label mpi).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dist/mpi_fixture.h"
#include "train/run_compare.h"

namespace tf::testing {
namespace {

namespace fs = std::filesystem;

class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = dir_.path() / "text.txt";
    std::ofstream(text_) << english_text(60000);
  }
  // tiny_gpt (or `recipe`) with dropout (each micro-batch's own stream) and 2 micro-batches per step.
  std::vector<std::string> args(const std::string& run_name, std::vector<std::string> more = {},
                                const std::string& recipe = "tiny_gpt") const {
    more.insert(more.begin(), {"train.steps=12", "train.grad_accum=2", "model.dropout=0.1",
                               "checkpoint.interval=6", "eval.interval=6", "log.report=false"});
    return train_args(recipe, text_, dir_.path() / run_name, dir_.path() / "cache", more);
  }
  fs::path run_dir(const std::string& name) const { return dir_.path() / name; }
  RunTempDir dir_;
  fs::path text_;
};

// Note [micro-batch sums] (train/grad_sync.h): with train.deterministic the ranks' gradients are
// added in rank order, as one process adds its micro-batches: the same bits.
TEST_F(DataParallel, TwoRanksEqualOneProcessWithGradAccumTwoBitForBit) {
  const auto det = std::vector<std::string>{"train.deterministic=true"};
  const Outcome one = run(dir_.path(), "one", 0, args("one", det));
  ASSERT_EQ(one.code, 0) << one.err;
  const Outcome two = run(dir_.path(), "two", 2, args("two", det));
  ASSERT_EQ(two.code, 0) << two.err;
  expect_same_parameters(run_dir("one") / "ckpt_00000012.h5", run_dir("two") / "ckpt_00000012.h5");
  expect_same_steps(run_dir("one") / "metrics.jsonl", run_dir("two") / "metrics.jsonl", 12);
  // Rank 0 alone prints and writes: one progress report, one run folder's worth of files.
  EXPECT_NE(two.out.find("2 ranks (mpirun)"), std::string::npos) << two.out;
  EXPECT_EQ(read_metrics(run_dir("two") / "metrics.jsonl").size(), 12u);
}

// A BERT: masked batches with padding keys, drawn whole by every rank and divided the same way.
TEST_F(DataParallel, TwoRanksEqualOneProcessForABertBitForBit) {
  const auto det = std::vector<std::string>{"train.deterministic=true"};
  ASSERT_EQ(run(dir_.path(), "one", 0, args("one", det, "tiny_bert")).code, 0);
  const Outcome two = run(dir_.path(), "two", 2, args("two", det, "tiny_bert"));
  ASSERT_EQ(two.code, 0) << two.err;
  expect_same_parameters(run_dir("one") / "ckpt_00000012.h5", run_dir("two") / "ckpt_00000012.h5");
  expect_same_steps(run_dir("one") / "metrics.jsonl", run_dir("two") / "metrics.jsonl", 12);
}

// MPI's own all-reduce (no train.deterministic): within float32 rounding of one process.
TEST_F(DataParallel, TwoRanksWithMpiAllreduceMatchWithinRounding) {
  ASSERT_EQ(run(dir_.path(), "one", 0, args("one")).code, 0);
  const Outcome two = run(dir_.path(), "two", 2, args("two"));
  ASSERT_EQ(two.code, 0) << two.err;
  const auto a = read_metrics(run_dir("one") / "metrics.jsonl"), b = read_metrics(run_dir("two") / "metrics.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(number(a[i], "train_loss"), number(b[i], "train_loss"), 1e-5 * number(a[i], "train_loss")) << i;
}

// The checkpoint holds the whole global batch stream, so a run continues on any rank count.
TEST_F(DataParallel, ResumesOnADifferentRankCount) {
  const auto det = std::vector<std::string>{"train.deterministic=true"};
  ASSERT_EQ(run(dir_.path(), "straight", 0, args("straight", det)).code, 0);
  ASSERT_EQ(run(dir_.path(), "two", 2, args("two", det)).code, 0);
  // Two ranks' checkpoint at step 6, continued by one process; one process's, by two ranks.
  auto resumed = [&](const std::string& name, const fs::path& from, int ranks) {
    std::vector<std::string> a = args(name, det);
    a.insert(a.end(), {"--resume", from.string(), "--accept-changes"});  // into another run folder
    const Outcome o = run(dir_.path(), name, ranks, a);
    EXPECT_EQ(o.code, 0) << o.err;
  };
  resumed("on_one", run_dir("two") / "ckpt_00000006.h5", 0);
  resumed("on_two", run_dir("straight") / "ckpt_00000006.h5", 2);
  expect_same_parameters(run_dir("straight") / "ckpt_00000012.h5", run_dir("on_one") / "ckpt_00000012.h5");
  expect_same_parameters(run_dir("straight") / "ckpt_00000012.h5", run_dir("on_two") / "ckpt_00000012.h5");
}

// Note [failing together] (framework/dist/comm.h): every rank refuses, one message.
TEST_F(DataParallel, BadInputIsRefusedByEveryRankWithOneMessage) {
  const Outcome bad_key = run(dir_.path(), "bad", 2, args("bad", {"train.sttps=3"}));
  EXPECT_EQ(bad_key.code, 2);
  const std::string err = bad_key.err;
  const size_t first = err.find("unknown key 'train.sttps'");
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("unknown key 'train.sttps'", first + 1), std::string::npos) << "printed twice:\n" << err;

  const Outcome odd = run(dir_.path(), "odd", 2, args("odd", {"train.grad_accum=3"}));
  EXPECT_EQ(odd.code, 2);
  EXPECT_NE(odd.err.find("Set train.grad_accum to a multiple of 2 (--set train.grad_accum=4)"), std::string::npos)
      << odd.err;
  EXPECT_FALSE(fs::exists(run_dir("odd") / "metrics.jsonl"));
}

// Only train runs distributed: another command under mpirun says so once, on every rank's behalf.
TEST_F(DataParallel, OtherCommandsRefuseSeveralRanks) {
  const Outcome info = run(dir_.path(), "info", 2, {"info", "no_such.h5"});
  EXPECT_EQ(info.code, 2);
  const std::string said = "'info' runs in one process; under mpirun only 'train' runs";
  const size_t first = info.err.find(said);
  ASSERT_NE(first, std::string::npos) << info.err;
  EXPECT_EQ(info.err.find(said, first + 1), std::string::npos) << info.err;
}

// A rank killed mid-run: mpirun stops the other within seconds, names the lost rank, and the last
// checkpoint (written atomically by rank 0) resumes.
TEST_F(DataParallel, KilledRankStopsTheOthersAndTheLastCheckpointResumes) {
  allow_root();
  ::setenv("TAPEFORMER_KILL_TEST", "1", 1);  // marks this test's ranks among the machine's processes
  const fs::path out = dir_.path() / "kill.out", err = dir_.path() / "kill.err";
  std::vector<std::string> a = args("killed", {"train.steps=100000", "checkpoint.interval=5", "eval.interval=0"});
  Child child(under_mpirun(2, a), out, err, {}, TAPEFORMER_MPIRUN);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(run_dir("killed") / "ckpt_00000010.h5") && std::chrono::steady_clock::now() < deadline &&
         !child.exited())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(fs::exists(run_dir("killed") / "ckpt_00000010.h5")) << read_file(err);
  const pid_t victim = rank_pid(1, "TAPEFORMER_KILL_TEST");
  ::unsetenv("TAPEFORMER_KILL_TEST");
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  while (!child.exited() && std::chrono::steady_clock::now() - killed_at < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  ASSERT_TRUE(child.exited()) << "the other rank still runs " << seconds << " s after rank 1 was killed";
  const int status = child.wait();
  EXPECT_TRUE(!WIFEXITED(status) || WEXITSTATUS(status) != 0);
  EXPECT_NE(read_file(err).find("signal 9"), std::string::npos) << read_file(err);
  std::cout << "the job ended " << seconds << " s after rank 1 was killed\n";

  std::vector<std::string> resume = args("killed", {"train.steps=100000", "checkpoint.interval=5", "eval.interval=0"});
  resume.insert(resume.end(), {"--resume", "--accept-changes", "--set", "train.steps=" +
                               std::to_string(read_metrics(run_dir("killed") / "metrics.jsonl").size() + 3)});
  const Outcome resumed = run(dir_.path(), "resumed", 0, resume);
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming from"), std::string::npos) << resumed.out;
}

}  // namespace
}  // namespace tf::testing
