// A resume never overwrites a run's history (Note [resuming from an earlier step] in
// train/run_history.cpp): a resume from an earlier checkpoint is refused while later checkpoints
// exist; --overwrite moves the later history into previous-<time>/ and trains it again bit for bit;
// --branch DIR continues in a new folder and leaves the run as it was; records a killed process
// logged past its newest checkpoint move aside by themselves; and whatever fails before the first
// checkpoint leaves the folder as it was. Throughout: metrics.jsonl never holds two records of one
// step of one run.
#include "train/run_history.h"

#include <gtest/gtest.h>

#include <set>

#include "train/checkpoint.h"
#include "train/run_compare.h"
#include "train/run_folder_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using tf::testing::read_file;
using tf::testing::read_metrics;

// The invariant of issue-free run folders: one record per step and run, steps 1..last in order.
void expect_each_step_once(const fs::path& metrics, int64_t last) {
  const auto records = read_metrics(metrics);
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& r : records)
    EXPECT_TRUE(seen.insert({r.at("run"), r.at("step")}).second) << metrics << ": step " << r.at("step") << " twice";
  ASSERT_EQ(records.size(), static_cast<size_t>(last)) << read_file(metrics);
  for (int64_t i = 0; i < last; ++i) EXPECT_EQ(records[i].at("step"), std::to_string(i + 1));
}

// The one previous-<time>/ folder inside `dir`.
fs::path previous_folder(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("previous-", 0) == 0) found.push_back(e.path());
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? fs::path() : found[0];
}

class RunHistory : public tf::testing::RunFolderTest {
 protected:
  // 8 steps with checkpoints at 4 and 8: the run a resume from step 4 would branch.
  void SetUp() override {
    RunFolderTest::SetUp();
    train(eight_steps(), quiet_);
    ASSERT_TRUE(fs::exists(checkpoint_path(dir_, 8)));
  }
  Recipe eight_steps(std::vector<std::string> more = {}) const {
    more.insert(more.begin(), {"train.steps=8", "checkpoint.interval=4", "schedule.warmup_steps=2"});
    return recipe(more);
  }
  TrainOptions from_step_4() const {
    TrainOptions o = quiet_;
    o.resume = checkpoint_path(dir_, 4).string();
    return o;
  }
};

// The reported loss: --resume ckpt_00000004.h5 overwrote ckpt_00000008.h5 and logged steps 5-8 twice.
TEST_F(RunHistory, AResumeFromAnEarlierCheckpointIsRefusedAndChangesNothing) {
  const auto before = snapshot();
  const std::string message = error_of(eight_steps(), from_step_4());
  EXPECT_NE(message.find("ckpt_00000008.h5"), std::string::npos) << message;
  EXPECT_NE(message.find("4 metrics records (steps 5-8)"), std::string::npos) << message;
  EXPECT_NE(message.find("--branch DIR"), std::string::npos) << message;
  EXPECT_NE(message.find("--overwrite"), std::string::npos) << message;
  EXPECT_NE(message.find("--resume " + checkpoint_path(dir_, 8).string()), std::string::npos) << message;
  EXPECT_TRUE(snapshot() == before) << "a refused resume changed the folder";

  // The command line says the same with exit 2.
  auto args = tf::testing::train_args("tiny_gpt", text_, dir_, tmp_.path() / "cache",
                                      {"train.steps=8", "checkpoint.interval=4", "schedule.warmup_steps=2",
                                       "eval.interval=0"});
  args.insert(args.end(), {"--resume", checkpoint_path(dir_, 4).string()});
  const auto cli = tf::testing::run_command(args, tmp_.path());
  EXPECT_EQ(cli.code, 2) << cli.err;
  EXPECT_NE(cli.err.find("ckpt_00000008.h5"), std::string::npos) << cli.err;
  EXPECT_TRUE(snapshot() == before) << "the folder changed";
}

// --overwrite: the later history moves into previous-<time>/ (nothing deleted), and training it
// again from step 4 gives the same step-8 weights and losses.
TEST_F(RunHistory, OverwriteMovesTheLaterHistoryAsideAndTrainsItAgain) {
  const std::string first_8 = read_file(checkpoint_path(dir_, 8));
  const auto first_records = read_metrics(dir_ / "metrics.jsonl");
  TrainOptions o = from_step_4();
  o.overwrite = true;
  EXPECT_EQ(train(eight_steps(), o).final_step, 8);
  const fs::path aside = previous_folder(dir_);
  ASSERT_TRUE(fs::exists(aside / "ckpt_00000008.h5"));
  EXPECT_EQ(read_file(aside / "ckpt_00000008.h5"), first_8);
  const auto moved = read_metrics(aside / "metrics.jsonl");
  ASSERT_EQ(moved.size(), 4u);
  EXPECT_EQ(moved[0].at("step"), "5");
  expect_each_step_once(dir_ / "metrics.jsonl", 8);
  const auto records = read_metrics(dir_ / "metrics.jsonl");
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(records[i].at("train_loss"), first_records[i].at("train_loss")) << i;
  tf::testing::expect_same_parameters(aside / "ckpt_00000008.h5", checkpoint_path(dir_, 8));
  EXPECT_NE(sink_.str().find("previous-"), std::string::npos) << sink_.str();
}

// --branch DIR (here a learning-rate experiment from step 4): the run's folder stays byte for byte;
// the branch holds the run's records up to step 4, then its own.
TEST_F(RunHistory, BranchContinuesInANewFolderAndLeavesTheRunAsItWas) {
  const auto before = snapshot();
  const fs::path branch = tmp_.path() / "branch";
  auto args = tf::testing::train_args("tiny_gpt", text_, dir_, tmp_.path() / "cache",
                                      {"train.steps=8", "checkpoint.interval=4", "schedule.warmup_steps=2",
                                       "eval.interval=0", "optim.lr=0.01"});
  args.insert(args.end(), {"--resume", checkpoint_path(dir_, 4).string(), "--branch", branch.string(),
                           "--accept-changes"});
  const auto cli = tf::testing::run_command(args, tmp_.path());
  ASSERT_EQ(cli.code, 0) << cli.err;
  EXPECT_NE(cli.out.find("branching from " + checkpoint_path(dir_, 4).string() + " at step 4 into " +
                         branch.string()),
            std::string::npos)
      << cli.out;
  EXPECT_TRUE(snapshot() == before) << "the branch changed the run's own folder";
  ASSERT_TRUE(fs::exists(checkpoint_path(branch, 8)));
  EXPECT_TRUE(fs::exists(branch / "recipe.yaml"));
  expect_each_step_once(branch / "metrics.jsonl", 8);
  const auto original = read_metrics(dir_ / "metrics.jsonl"), branched = read_metrics(branch / "metrics.jsonl");
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(branched[i], original[i]) << "step " << i + 1;
  EXPECT_NE(branched[5].at("lr"), original[5].at("lr")) << "the branch's own learning rate";
  EXPECT_EQ(load_checkpoint(checkpoint_path(branch, 8)).run.run_id, load_checkpoint(checkpoint_path(dir_, 8)).run.run_id);

  // --branch needs --resume, and into a folder of another run it is refused like a fresh run.
  auto lone = args;
  lone.erase(lone.end() - 5, lone.end() - 3);  // drop --resume CKPT
  EXPECT_EQ(tf::testing::run_command(lone, tmp_.path()).code, 2);
  const auto again = tf::testing::run_command(args, tmp_.path());
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("already holds a run"), std::string::npos) << again.err;
}

// A process killed after logging steps 5-8 but before checkpointing them (and in the middle of a
// line): those records hold steps no checkpoint has, so the resume moves them aside by itself and
// logs the steps once, with the same losses.
TEST_F(RunHistory, RecordsPastTheNewestCheckpointMoveAsideByThemselves) {
  const auto first_records = read_metrics(dir_ / "metrics.jsonl");
  const fs::path later = tmp_.path() / "ckpt_8.h5";
  fs::rename(checkpoint_path(dir_, 8), later);
  std::ofstream(dir_ / "metrics.jsonl", std::ios::app) << "{\"step\": 9, \"train_lo";
  TrainOptions o = quiet_;
  o.resume = "";
  EXPECT_EQ(train(eight_steps(), o).final_step, 8);
  expect_each_step_once(dir_ / "metrics.jsonl", 8);
  const auto records = read_metrics(dir_ / "metrics.jsonl");
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(records[i].at("train_loss"), first_records[i].at("train_loss")) << i;
  tf::testing::expect_same_parameters(later, checkpoint_path(dir_, 8));
  EXPECT_EQ(read_metrics(previous_folder(dir_) / "metrics.jsonl").size(), 4u);
}

// A fresh run whose time budget pays for fewer steps than the warmup fails in the user's keys once
// its speed is measured, and leaves no file behind; a failed resume leaves the folder as it was.
TEST_F(RunHistory, AFailureBeforeTheFirstCheckpointLeavesTheFolderAsItWas) {
  const fs::path fresh = tmp_.path() / "fresh";
  const Recipe short_budget = tf::testing::tiny_recipe(
      "tiny_gpt", text_, fresh, tmp_.path() / "cache",
      {"train.steps=100000", "train.time_budget=1s", "schedule.warmup_steps=90000", "eval.interval=0",
       "checkpoint.interval=0"});
  const std::string message = error_of(short_budget, quiet_);
  EXPECT_NE(message.find("train.time_budget 1s pays for "), std::string::npos) << message;
  EXPECT_NE(message.find("fewer than schedule.warmup_steps = 90000"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(fresh)) << "a failed start left files";

  // A resume that fails the same way after writing its recipe file and 12 records.
  const auto before = snapshot();
  TrainOptions o = quiet_;
  o.resume = "";
  o.accept_changes = true;
  const std::string resumed = error_of(eight_steps({"train.steps=100000", "train.time_budget=3s",
                                                    "schedule.warmup_steps=90000", "checkpoint.interval=0"}),
                                       o);
  EXPECT_NE(resumed.find("fewer than schedule.warmup_steps = 90000"), std::string::npos) << resumed;
  EXPECT_TRUE(snapshot() == before) << "the folder changed";
}

// Files a killed run left before its first checkpoint hold nothing to continue: the next fresh run
// moves them aside by itself (saying so) instead of refusing.
TEST_F(RunHistory, LeftoversOfARunWithoutCheckpointsMoveAsideByThemselves) {
  const fs::path other = tmp_.path() / "other";
  fs::create_directories(other);
  tf::testing::write_file(other / "recipe.yaml", "model:\n  d_model: 32\n");
  tf::testing::write_file(other / "metrics.jsonl", "{\"step\": 1, \"train_loss\": 4.1, \"run\": \"x\"}\n");
  const Recipe r = tf::testing::tiny_recipe("tiny_gpt", text_, other, tmp_.path() / "cache",
                                            {"train.steps=2", "schedule.warmup_steps=0", "eval.interval=0"});
  EXPECT_EQ(train(r, quiet_).final_step, 2);
  const fs::path aside = previous_folder(other);
  EXPECT_EQ(read_file(aside / "metrics.jsonl"), "{\"step\": 1, \"train_loss\": 4.1, \"run\": \"x\"}\n");
  expect_each_step_once(other / "metrics.jsonl", 2);
  EXPECT_NE(sink_.str().find("wrote no checkpoint"), std::string::npos) << sink_.str();
}

}  // namespace
}  // namespace tf::train
