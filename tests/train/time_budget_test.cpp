// train.time_budget (Note [time budget] in train/time_budget.cpp): durations parse, the step count is
// what the measured speed pays for, a budgeted run ends on its fixed count with the schedule
// decayed to its floor, and a resume continues to that recorded count bit for bit; a finished
// budgeted run continues to a raised train.steps, or for --more time, and info shows its real end;
// the count is measured again once, after the first steps, unless a checkpoint came first (a fake
// clock, hand-computed counts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "framework/io/hdf5_io.h"
#include "support/errors.h"
#include "train/checkpoint.h"
#include "train/run_compare.h"
#include "train/run_fixture.h"
#include "train/time_budget.h"
#include "train/trainer.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;

TEST(TimeBudget, DurationsParse) {
  EXPECT_EQ(parse_duration(""), 0.0);
  EXPECT_EQ(parse_duration("90s"), 90.0);
  EXPECT_EQ(parse_duration("5m"), 300.0);
  EXPECT_EQ(parse_duration("1.5h"), 5400.0);
  for (const char* bad : {"5", "m", "5 m", "-5m", "5min", "0s", "1e999s", "+5m"}) EXPECT_FALSE(parse_duration(bad)) << bad;
  const std::string message = tf::testing::error_message<InputError>(
      [] { parse_recipe("train:\n  time_budget: 5 minutes\n", "r.yaml"); });
  EXPECT_NE(message.find("r.yaml:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("train.time_budget: expected a duration such as 90s, 5m or 1.5h (or 0, none or empty for no budget), got '5 minutes'"),
            std::string::npos)
      << message;
}

TEST(TimeBudget, TheCountIsWhatTheRemainingTimePaysFor) {
  // 300 s, 20 s gone at step 10, 0.5 s per step, an evaluation of 5 s every 100 steps (0.05 s a
  // step): 280 / 0.55 = 509.09 more steps.
  EXPECT_EQ(budget_total_steps({300, 20, 0.5, 5, 100, 10, 100000}), 10 + 509);
  EXPECT_EQ(budget_total_steps({300, 20, 0.5, 5, 0, 10, 100000}), 10 + 560);  // no evaluations
  EXPECT_EQ(budget_total_steps({300, 20, 0.5, 0, 100, 10, 400}), 400);        // train.steps bounds it
  EXPECT_EQ(budget_total_steps({10, 20, 0.5, 0, 0, 10, 400}), 10);            // the time is up: stop here
}

// A budget of 100 s on a fake clock: steps 1-10 take 1 s each (not yet at speed), then 0.5 s. At step
// 10 (t = 10) the median of steps 3-10 is 1 s: 10 + 90 / 1 = 100 steps. The second measurement lasts
// 5% of the 90 s left, until t = 14.5, which step 19 reaches: 0.5 s a step, 19 + 85.5 / 0.5 = 190.
TEST(TimeBudget, TheCountIsMeasuredAgainOnceAfterTheFirstSteps) {
  for (const bool checkpoint_at_12 : {false, true}) {
    train::Run run;
    run.recipe.train.steps = 1000000;
    run.recipe.eval.interval = 0;
    run.recipe.schedule.warmup_steps = 5;
    run.recipe.train.time_budget = "100s";
    std::ostringstream out;
    Progress progress(out, run.recipe.train.steps, false);
    double t = 0;
    TimeBudget budget(100, {dist::Comm::world(), progress, [&] { return t; }, [] { return 0.0; }});
    std::vector<int64_t> counts;  // the count after each step
    while (run.budget_steps == 0 || run.step < run.budget_steps) {
      const double seconds = run.step < 10 ? 1.0 : 0.5;
      t += seconds;
      ++run.step;
      budget.after_step(run, seconds, run.step);
      if (checkpoint_at_12 && run.step == 12) budget.checkpoint_written();
      counts.push_back(run.budget_steps);
      ASSERT_LT(run.step, 1000) << out.str();
    }
    EXPECT_EQ(counts[8], 0);  // step 9: still measuring
    EXPECT_EQ(counts[9], 100) << out.str();
    EXPECT_EQ(counts[17], 100) << out.str();  // step 18, t = 14
    if (checkpoint_at_12) {
      EXPECT_EQ(run.step, 100) << "a checkpoint holds the first count:\n" << out.str();
      EXPECT_EQ(out.str().find("measured again"), std::string::npos) << out.str();
    } else {
      EXPECT_EQ(counts[18], 190) << out.str();
      EXPECT_EQ(run.step, 190);
      EXPECT_NE(out.str().find("0.5000 s per step (measured again over steps 11-19): training for 190 steps"),
                std::string::npos)
          << out.str();
      EXPECT_EQ(run.schedule.lr_at(189), run_schedule(run.recipe, 190).lr_at(189));  // the schedule follows
    }
  }
}

class TimeBudgetRun : public ::testing::Test {
 protected:
  Recipe recipe(const fs::path& dir) const {
    return tf::testing::tiny_recipe("tiny_gpt", text_, dir, tmp_.path() / "cache",
                                    {"train.steps=150", "train.time_budget=" + budget_, "checkpoint.interval=12",
                                     "checkpoint.keep=1000", "eval.interval=0", "schedule.warmup_steps=3",
                                     "train.threads=1"});
  }
  // A budgeted run whose fixed count exceeds 12 steps (a resume from the step-12 checkpoint must have
  // steps left). The count depends on the machine's speed: a sanitizer build on a loaded machine may
  // fit only 12 steps in a short budget, so the budget grows through `budgets` until it fits more.
  TrainSummary train_past_step_12(const fs::path& run_root, std::initializer_list<const char*> budgets,
                                  fs::path& dir) {
    TrainOptions quiet;
    quiet.out = &sink_;
    TrainSummary summary;
    for (const char* budget : budgets) {
      budget_ = budget;
      dir = run_root.string() + "_" + budget_;
      summary = train(recipe(dir), quiet);
      if (summary.final_step > 12) break;
    }
    return summary;
  }
  void SetUp() override { tf::testing::write_file(text_, tf::testing::english_text(20000)); }
  tf::testing::RunTempDir tmp_;
  fs::path text_ = tmp_.path() / "text.txt";
  std::ostringstream sink_;
  std::string budget_ = "0.5s";
};

TEST_F(TimeBudgetRun, EndsOnItsFixedCountAndResumesToItBitForBit) {
  TrainOptions quiet;
  quiet.out = &sink_;
  fs::path straight;
  const TrainSummary a = train_past_step_12(tmp_.path() / "straight", {"0.5s", "2s", "8s"}, straight);
  const int64_t fixed = H5Reader(checkpoint_path(straight, a.final_step).string()).read_attr_int("/", "budget_steps");
  EXPECT_EQ(a.final_step, fixed);
  // train.steps bounds the count (and the checkpoint writes, which the budget does not count).
  ASSERT_GT(fixed, 12) << "too few steps in 0.5 s to test a resume";
  EXPECT_LE(fixed, 150);
  const auto metrics = tf::testing::read_metrics(straight / "metrics.jsonl");
  // The schedule runs over the fixed count: the last step's rate is that schedule's at step T - 1
  // (over train.steps it would differ whenever T < train.steps).
  EXPECT_EQ(tf::testing::number(metrics.back(), "lr"), run_schedule(recipe(straight), fixed).lr_at(fixed - 1));

  // The same run from its checkpoint at step 12 (after the count was fixed at step 10).
  const fs::path split = tmp_.path() / "split";
  fs::create_directories(split);
  for (const auto& entry : fs::directory_iterator(straight))
    if (entry.path().extension() != ".h5" || entry.path() == checkpoint_path(straight, 12))
      fs::copy(entry.path(), split / entry.path().filename());
  // metrics.jsonl keeps only the first 12 records, as if the run had stopped there.
  std::string kept;
  for (size_t i = 0; i < 12; ++i) {
    std::string line = "{";
    for (const auto& [k, v] : metrics[i]) line += (line.size() > 1 ? ", \"" : "\"") + k + "\": " + v;
    kept += line + "}\n";
  }
  tf::testing::write_file(split / "metrics.jsonl", kept);
  TrainOptions resume = quiet;
  resume.resume = "";
  resume.accept_changes = true;  // checkpoint.dir differs: the copy's folder
  const TrainSummary b = train(recipe(split), resume);
  EXPECT_EQ(b.final_step, fixed);
  tf::testing::expect_same_parameters(checkpoint_path(straight, fixed), checkpoint_path(split, fixed));
  const auto resumed = tf::testing::read_metrics(split / "metrics.jsonl");
  ASSERT_EQ(resumed.size(), metrics.size());
  for (size_t i = 12; i < metrics.size(); ++i)
    EXPECT_EQ(resumed[i].at("train_loss"), metrics[i].at("train_loss")) << "step " << i + 1;
}

// The finished budgeted run of the issue: `--resume --set train.steps=N --accept-changes` trains to N
// (it was refused: "the step count its time budget fixed"), saying what the learning rate does;
// `info` shows the real end; `--resume --more 1s` trains about a second longer.
TEST_F(TimeBudgetRun, AFinishedBudgetedRunContinuesToRaisedStepsOrForMoreTime) {
  fs::path dir;
  const TrainSummary first = train_past_step_12(tmp_.path() / "run", {"0.3s", "1s", "4s"}, dir);
  const int64_t fixed = first.final_step;
  ASSERT_GT(fixed, 12);
  const fs::path end = checkpoint_path(dir, fixed);
  const auto info = tf::testing::run_command({"info", end.string()}, tmp_.path());
  EXPECT_NE(info.out.find("step         " + std::to_string(fixed) + " of " + std::to_string(fixed) +
                          " (the count train.time_budget " + budget_ + " fixed)"),
            std::string::npos)
      << info.out;

  // A new end: train.steps raised past the recipe's 150 (a count of 150 - 7 = 143 would be no change).
  const int64_t target = std::max<int64_t>(fixed, 150) + 7;
  auto args = tf::testing::train_args("tiny_gpt", text_, dir, tmp_.path() / "cache",
                                      {"train.steps=" + std::to_string(target), "train.time_budget=" + budget_,
                                       "checkpoint.interval=12", "checkpoint.keep=1000", "eval.interval=0",
                                       "schedule.warmup_steps=3", "train.threads=1"});
  args.insert(args.end(), {"--resume", "--accept-changes"});
  const auto more_steps = tf::testing::run_command(args, tmp_.path());
  ASSERT_EQ(more_steps.code, 0) << more_steps.err;
  EXPECT_NE(more_steps.out.find("continuing to train.steps " + std::to_string(target) + ": the learning rate at step " +
                                std::to_string(fixed) + " is "),
            std::string::npos)
      << more_steps.out;
  ASSERT_TRUE(fs::exists(checkpoint_path(dir, target))) << more_steps.out;
  const auto after = tf::testing::run_command({"info", checkpoint_path(dir, target).string()}, tmp_.path());
  EXPECT_NE(after.out.find("of " + std::to_string(target) + "\n"), std::string::npos) << after.out;

  // --more 1s: a time budget of the run's elapsed time plus a second, measured again.
  const double elapsed = load_checkpoint(checkpoint_path(dir, target)).run.elapsed_seconds;
  // (Only the last checkpoint: the budget does not count checkpoint writes, which would dominate.)
  args = tf::testing::train_args("tiny_gpt", text_, dir, tmp_.path() / "cache",
                                 {"train.steps=100000", "train.time_budget=" + budget_, "checkpoint.interval=0",
                                  "checkpoint.keep=1000", "eval.interval=0", "schedule.warmup_steps=3",
                                  "train.threads=1"});
  args.insert(args.end(), {"--resume", "--accept-changes", "--more", "1s"});
  const auto more_time = tf::testing::run_command(args, tmp_.path());
  ASSERT_EQ(more_time.code, 0) << more_time.err;
  EXPECT_NE(more_time.out.find("continuing to --more: a time budget of "), std::string::npos) << more_time.out;
  EXPECT_NE(more_time.out.find(" s in all (--more): "), std::string::npos) << more_time.out;
  const LoadedRun loaded = load_checkpoint(*latest_checkpoint(dir));
  const auto& last = loaded.run;
  EXPECT_GT(last.step, target);
  EXPECT_EQ(last.budget_steps, last.step);
  EXPECT_GT(last.elapsed_seconds, elapsed + 0.5);
  EXPECT_LT(last.elapsed_seconds, elapsed + 3) << "a second more, give or take the checkpoint writes";
  // A budget below the time already trained, and a --more that is not a duration, are refused.
  args.erase(args.end() - 2, args.end());  // --more 1s
  auto short_budget = args;
  short_budget.insert(short_budget.end(), {"--set", "train.time_budget=0.01s"});
  const auto refused = tf::testing::run_command(short_budget, tmp_.path());
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("is the run's whole training time, and it has trained"), std::string::npos) << refused.err;
  auto bad_more = args;
  bad_more.insert(bad_more.end(), {"--more", "soon"});
  const auto bad = tf::testing::run_command(bad_more, tmp_.path());
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--more: expected a duration such as 90s, 5m or 1.5h, got 'soon'"), std::string::npos) << bad.err;
  // One record per step through all three processes.
  const auto records = tf::testing::read_metrics(dir / "metrics.jsonl");
  ASSERT_EQ(records.size(), static_cast<size_t>(last.step));
  for (size_t i = 0; i < records.size(); ++i) EXPECT_EQ(records[i].at("step"), std::to_string(i + 1));
}

}  // namespace
}  // namespace tf::train
