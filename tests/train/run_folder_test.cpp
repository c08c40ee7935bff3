// A run folder is the user's data (Note [run folders] in train/run_folder.cpp): the scenario that lost
// a run's checkpoints (a fresh run into a folder of another run, pruning, then --resume) now loses
// nothing; --overwrite moves files aside; pruning and --resume keep to the folder's own run; a kill
// in the middle of pruning loses nothing; elapsed_s continues across a resume; each recipe gets its
// own default folder; a resume with changed keys keeps the run's first recipe.yaml.
#include "train/run_folder.h"

#include <gtest/gtest.h>

#include <set>

#include "support/errors.h"
#include "train/checkpoint.h"
#include "train/run_folder_fixture.h"
#include "train/trainer.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using tf::testing::read_file;
using tf::testing::read_metrics;

using RunFolder = tf::testing::RunFolderTest;

// The reported scenario: run A writes checkpoints 10, 20, 30 (keep 3); a fresh run B into the same
// folder is refused, and the folder is byte for byte as A left it; with --overwrite, A's files move
// into previous-<time>/ and B's own checkpoints survive its pruning; --resume then continues B.
TEST_F(RunFolder, AFreshRunNeverTakesOverAnotherRunsFolder) {
  train(recipe({"train.steps=30", "checkpoint.interval=10", "checkpoint.keep=3"}), quiet_);
  const auto a_files = snapshot();
  ASSERT_EQ(list_checkpoints(dir_).size(), 3u);
  const std::string a_id = checkpoint_run_id(checkpoint_path(dir_, 30));
  EXPECT_EQ(a_id.size(), 16u);

  const Recipe b = recipe({"train.steps=5", "checkpoint.interval=5", "checkpoint.keep=3"});
  const std::string refused = error_of(b, quiet_);
  EXPECT_NE(refused.find("checkpoint.dir '" + dir_.string() + "' already holds a run: 3 checkpoints (newest "
                         "ckpt_00000030.h5), metrics.jsonl, recipe.yaml"),
            std::string::npos)
      << refused;
  for (const char* option : {"--resume", "--overwrite"}) EXPECT_NE(refused.find(option), std::string::npos) << option;
  EXPECT_EQ(snapshot(), a_files) << "a refused run changed the folder";

  TrainOptions overwrite = quiet_;
  overwrite.overwrite = true;
  train(b, overwrite);
  // A's files, byte for byte, now under previous-<time>/; B's checkpoint is the folder's only one.
  std::map<std::string, std::string> moved;
  for (const auto& [name, bytes] : snapshot())
    if (name.rfind("previous-", 0) == 0) moved[name.substr(name.find('/') + 1)] = bytes;
  EXPECT_EQ(moved, a_files);
  ASSERT_EQ(list_checkpoints(dir_).size(), 1u);
  EXPECT_EQ(list_checkpoints(dir_)[0].second, checkpoint_path(dir_, 5));
  const std::string b_id = checkpoint_run_id(checkpoint_path(dir_, 5));
  EXPECT_NE(b_id, a_id);
  // B's metrics are B's alone.
  for (const auto& record : read_metrics(dir_ / "metrics.jsonl")) EXPECT_EQ(record.at("run"), "\"" + b_id + "\"");

  // --resume continues B (to 8 steps), not A.
  TrainOptions resume = quiet_;
  resume.resume = "";
  resume.accept_changes = true;  // more steps
  train(recipe({"train.steps=8", "checkpoint.interval=5", "checkpoint.keep=3"}), resume);
  EXPECT_EQ(checkpoint_run_id(checkpoint_path(dir_, 8)), b_id);
  EXPECT_NE(sink_.str().find("resuming from " + checkpoint_path(dir_, 5).string()), std::string::npos);
}

// Checkpoints of two runs side by side (put there by hand): pruning removes only the current run's,
// and --resume without a path refuses to guess.
TEST_F(RunFolder, PruningAndResumeKeepToTheFoldersOwnRun) {
  const fs::path other = tmp_.path() / "other";
  train(recipe({"train.steps=40", "checkpoint.interval=40", "checkpoint.dir=" + other.string()}), quiet_);
  train(recipe({"train.steps=6", "checkpoint.interval=2", "checkpoint.keep=2"}), quiet_);
  // The other run's step-40 checkpoint is newer by step than all of ours.
  fs::copy_file(checkpoint_path(other, 40), checkpoint_path(dir_, 40));
  prune_run_checkpoints(dir_, 1, checkpoint_run_id(checkpoint_path(dir_, 6)));
  std::vector<int64_t> steps;
  for (const auto& [step, file] : list_checkpoints(dir_)) steps.push_back(step);
  EXPECT_EQ(steps, (std::vector<int64_t>{6, 40}));  // ours pruned to 1; theirs untouched
  TrainOptions resume = quiet_;
  resume.resume = "";
  resume.accept_changes = true;  // more steps
  const std::string message = error_of(recipe({"train.steps=10"}), resume);
  EXPECT_NE(message.find("holds checkpoints of more than one run"), std::string::npos) << message;
  EXPECT_NE(message.find("--resume " + checkpoint_path(dir_, 40).string()), std::string::npos) << message;
}

// A run folder of several runs given in place of a checkpoint: each command is told how to name one
// on its own command line; only train --resume (and --init-from) hear of their option.
TEST_F(RunFolder, AFolderOfSeveralRunsIsRefusedInTheCommandsOwnTerms) {
  const fs::path other = tmp_.path() / "other";
  train(recipe({"train.steps=4", "schedule.warmup_steps=1", "checkpoint.interval=4", "checkpoint.dir=" + other.string()}),
        quiet_);
  train(recipe({"train.steps=2", "schedule.warmup_steps=1", "checkpoint.interval=2"}), quiet_);
  fs::copy_file(checkpoint_path(other, 4), checkpoint_path(dir_, 4));
  const std::string newest = checkpoint_path(dir_, 4).string();
  const std::string several = "the run folder " + dir_.string() + " holds checkpoints of more than one run (";
  std::string message = tf::testing::error_message<InputError>([&] { checkpoint_argument(dir_.string()); });
  EXPECT_EQ(message.rfind(several, 0), 0u) << message;
  EXPECT_NE(message.find("): name the one to use, e.g. " + newest), std::string::npos) << message;
  EXPECT_EQ(message.find("--resume"), std::string::npos) << message;
  message = tf::testing::error_message<InputError>([&] { checkpoint_argument(dir_.string(), "--init-from"); });
  EXPECT_EQ(message.rfind("--init-from: " + several, 0), 0u) << message;
  EXPECT_NE(message.find("e.g. --init-from " + newest), std::string::npos) << message;
  // Through the program: prune and eval name no option they do not take.
  for (const std::vector<std::string>& args : {std::vector<std::string>{"eval", dir_.string()},
                                               {"prune", dir_.string(), "--heads", "0.5", "--out",
                                                (tmp_.path() / "pruned.h5").string()}}) {
    const auto o = tf::testing::run_command(args, tmp_.path());
    EXPECT_EQ(o.code, 2) << args[0];
    EXPECT_NE(o.err.find("error: " + several), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("--resume"), std::string::npos) << o.err;
  }
}

// Pruning after each checkpoint removes older ones one file at a time, after the new one is complete.
// A SIGKILL at random moments of a run that checkpoints and prunes at every step (keep 1) must leave
// complete checkpoints of the run only, at least one, and a foreign checkpoint put beside them
// untouched; the run then resumes.
TEST_F(RunFolder, KillsDuringPruningLoseNothing) {
  const fs::path other = tmp_.path() / "other", foreign = dir_ / "ckpt_99999999.h5";
  train(recipe({"train.steps=6", "checkpoint.interval=6", "checkpoint.dir=" + other.string()}), quiet_);
  const auto args = tf::testing::train_args("tiny_gpt", text_, dir_, tmp_.path() / "cache",
                                            {"train.steps=150", "checkpoint.interval=1", "checkpoint.keep=1",
                                             "eval.interval=0", "sample.tokens=0"});
  Rng rng(3);
  int killed = 0;
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<std::string> run = args;
    if (trial > 0) run.push_back("--resume");
    const int64_t before = list_checkpoints(dir_).empty() ? 0 : list_checkpoints(dir_).back().first;
    tf::testing::Child child(run, tmp_.path() / "out", tmp_.path() / "err");
    // Once the run has written a checkpoint of its own (it has claimed the folder), a foreign one
    // appears beside it; then the kill comes at a random moment of checkpointing and pruning.
    for (int wait = 0; wait < 3000 && !child.exited(); ++wait) {
      const auto all = list_checkpoints(dir_);
      if (!all.empty() && all.back().first > before) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    fs::copy_file(checkpoint_path(other, 6), foreign);
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int>(rng.uniform() * 300000)));
    if (!child.exited()) ::kill(child.pid(), SIGKILL), ++killed;
    child.wait();
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + read_file(tmp_.path() / "err"));
    EXPECT_TRUE(fs::exists(foreign)) << "the foreign checkpoint was pruned";
    std::set<std::string> ids;
    for (const auto& [step, file] : list_checkpoints(dir_)) {
      if (file == foreign) continue;
      ASSERT_NO_THROW(load_checkpoint(file)) << file;  // complete
      ids.insert(checkpoint_run_id(file));
    }
    EXPECT_EQ(ids.size(), 1u) << "the run has no checkpoint left, or checkpoints of several runs";
    fs::remove(foreign);  // else the next --resume rightly refuses to choose between two runs
  }
  EXPECT_GE(killed, 4) << "the run finished before most kills: the test checked little";
  std::printf("[kills] %d of 6 trials killed the run mid-way\n", killed);
  // Resumed after the last kill, the run finishes.
  std::vector<std::string> finish = args;
  finish.push_back("--resume");
  EXPECT_EQ(tf::testing::run_tapeformer(finish, tmp_.path() / "out", tmp_.path() / "err"), 0)
      << read_file(tmp_.path() / "err");
  EXPECT_EQ(list_checkpoints(dir_).back().first, 150);
}

// A resume keeps the run's first recipe.yaml; the resumed recipe (here with more steps) goes beside it.
// elapsed_s counts the run's training time across processes, so it never goes back at a resume.
TEST_F(RunFolder, ResumeKeepsTheFirstRecipeAndContinuesElapsedTime) {
  const Recipe first = recipe({"train.steps=4", "checkpoint.interval=4", "schedule.warmup_steps=2"});
  train(first, quiet_);
  const std::string recipe_yaml = read_file(dir_ / "recipe.yaml");
  EXPECT_EQ(recipe_yaml, first.to_yaml());
  const double elapsed_at_4 = tf::testing::number(read_metrics(dir_ / "metrics.jsonl").back(), "elapsed_s");
  EXPECT_GT(elapsed_at_4, 0);

  TrainOptions resume = quiet_;
  resume.resume = "";
  resume.accept_changes = true;  // more steps
  const Recipe longer = recipe({"train.steps=6", "checkpoint.interval=4", "schedule.warmup_steps=2"});
  train(longer, resume);
  EXPECT_EQ(read_file(dir_ / "recipe.yaml"), recipe_yaml);
  EXPECT_EQ(read_file(dir_ / "recipe.resume-4.yaml"), longer.to_yaml());
  const auto records = read_metrics(dir_ / "metrics.jsonl");
  ASSERT_EQ(records.size(), 6u);
  EXPECT_GE(tf::testing::number(records[4], "elapsed_s"), elapsed_at_4);  // step 5, the resumed process
  // Resumed as the run last was (from its step-4 checkpoint, with the recipe of recipe.resume-4.yaml;
  // --overwrite moves its step-6 checkpoint and records aside), no new recipe file; with nothing left
  // to train, exit 2 and no file at all.
  auto count = [&] { return std::distance(fs::directory_iterator(dir_), fs::directory_iterator()); };
  const auto files = count();
  TrainOptions again = quiet_;
  again.resume = checkpoint_path(dir_, 4).string();
  again.accept_changes = true;
  again.overwrite = true;
  train(longer, again);
  EXPECT_EQ(count(), files + 1);  // previous-<time>/
  const auto files_now = count();
  EXPECT_NE(error_of(longer, resume).find("nothing is left to train"), std::string::npos);
  EXPECT_EQ(count(), files_now);
}

// Each recipe file has its own run folder unless it names one.
TEST(RunFolderDefault, IsRunsSlashTheRecipesStem) {
  tf::testing::RunTempDir tmp;
  const fs::path file = tmp.path() / "my_model.yaml";
  tf::testing::write_file(file, "model:\n  d_model: 32\n");
  EXPECT_EQ(load_recipe(file.string()).checkpoint.dir, "runs/my_model");
  EXPECT_EQ(load_recipe(file.string(), {"checkpoint.dir=elsewhere"}).checkpoint.dir, "elsewhere");
  tf::testing::write_file(file, "checkpoint:\n  dir: named\n");
  EXPECT_EQ(load_recipe(file.string()).checkpoint.dir, "named");
}

// A resume that changes the run: continuable keys need --accept-changes (and are then printed);
// others are refused key by key, whatever the flag; nothing is written either way.
TEST_F(RunFolder, ResumeNamesEveryChangeAndNeedsConsentForContinuableOnes) {
  train(recipe({"train.steps=4", "schedule.warmup_steps=2", "checkpoint.interval=4"}), quiet_);
  const auto before = snapshot();
  TrainOptions resume = quiet_;
  resume.resume = "";
  const Recipe changed = recipe({"train.steps=6", "schedule.warmup_steps=2", "checkpoint.interval=4", "optim.lr=0.002"});
  std::string message = error_of(changed, resume);
  EXPECT_NE(message.find("the recipe changes the run (" + checkpoint_path(dir_, 4).string() +
                         "):\n  optim.lr: 0.001 in the checkpoint, 0.002 now\n  train.steps: 4 in the checkpoint, 6 now"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--accept-changes"), std::string::npos) << message;
  resume.accept_changes = true;
  message = error_of(recipe({"train.steps=6", "schedule.warmup_steps=2", "model.n_layers=3", "train.batch_size=3"}),
                     resume);
  EXPECT_NE(message.find("where a run cannot continue:\n  model.n_layers: 2 in the checkpoint, 3 now\n  "
                         "train.batch_size: 4 in the checkpoint, 3 now"),
            std::string::npos)
      << message;
  EXPECT_TRUE(snapshot() == before) << "the folder changed";
  train(changed, resume);
  EXPECT_NE(sink_.str().find("continuing with changes (--accept-changes):\n  optim.lr: 0.001 in the checkpoint, 0.002 now"),
            std::string::npos);
}

}  // namespace
}  // namespace tf::train
