// Fine-tuning (train --init-from): a new run that starts from a checkpoint's weights and tokenizer
// with a fresh optimizer at step 0, on other text, in its own folder; the model keys its recipe
// leaves out are the checkpoint's, a different model is refused key by key; text outside the
// vocabulary is warned about; --init-from and --resume exclude each other.
#include <gtest/gtest.h>

#include <sstream>

#include "data/char_tokenizer.h"
#include "support/errors.h"
#include "train/checkpoint.h"
#include "train/fine_tune.h"
#include "train/resume_changes.h"
#include "train/run_fixture.h"
#include "train/trainer.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;

class FineTune : public ::testing::Test {
 protected:
  void SetUp() override {
    tf::testing::write_file(base_text_, tf::testing::english_text(6000, 1));
    tf::testing::write_file(new_text_, tf::testing::english_text(6000, 2));
    std::ostringstream quiet;
    TrainOptions o;
    o.out = &quiet;
    train(recipe(base_text_, base_dir_, {"train.steps=6"}), o);
  }
  Recipe recipe(const fs::path& text, const fs::path& dir, std::vector<std::string> more) const {
    more.insert(more.begin(), {"eval.interval=0", "schedule.warmup_steps=0", "checkpoint.interval=0"});
    return tf::testing::tiny_recipe("tiny_gpt", text, dir, tmp_.path() / "cache", std::move(more));
  }

  tf::testing::RunTempDir tmp_;
  fs::path base_text_ = tmp_.path() / "base.txt", new_text_ = tmp_.path() / "new.txt";
  fs::path base_dir_ = tmp_.path() / "base", tuned_dir_ = tmp_.path() / "tuned";
};

TEST_F(FineTune, StartsFromTheWeightsWithAFreshOptimizerAtStepZero) {
  const fs::path base = checkpoint_path(base_dir_, 6);
  const LoadedRun stored = load_checkpoint(base);
  std::ostringstream out;
  TrainOptions o;
  o.out = &out;
  o.init_from = base_dir_.string();  // a run folder: its newest checkpoint
  bool checked = false;
  o.before_training = [&](train::Run& run) {
    checked = true;
    EXPECT_EQ(run.step, 0);
    EXPECT_EQ(run.tokens_seen, 0);
    ASSERT_EQ(run.params.size(), stored.run.params.size());
    for (size_t i = 0; i < run.params.size(); ++i)
      EXPECT_EQ(run.params[i].tensor.to_vector(), stored.run.params[i].tensor.to_vector()) << run.params[i].name;
    EXPECT_TRUE(run.optimizer->state().params.empty()) << "no optimizer state is carried over";
    EXPECT_EQ(run.tokenizer->to_string(), stored.run.tokenizer->to_string()) << "the checkpoint's tokenizer";
  };
  // Other text, another learning rate and step count: free in a fine-tune.
  const TrainSummary s = train(recipe(new_text_, tuned_dir_, {"train.steps=3", "optim.lr=1e-4"}), o);
  EXPECT_TRUE(checked);
  EXPECT_EQ(s.final_step, 3);
  EXPECT_NE(out.str().find("fine-tuning from " + base.string()), std::string::npos) << out.str();
  EXPECT_NE(load_checkpoint(checkpoint_path(tuned_dir_, 3)).run.run_id, stored.run.run_id) << "a run of its own";
  EXPECT_TRUE(fs::exists(base)) << "the base run is untouched";
}

TEST_F(FineTune, AnotherModelIsRefusedKeyByKey) {
  TrainOptions o;
  o.init_from = checkpoint_path(base_dir_, 6).string();
  const std::string message = tf::testing::error_message<InputError>(
      [&] { train(recipe(new_text_, tuned_dir_, {"model.d_model=64", "model.norm=rms"}), o); });
  EXPECT_NE(message.find("--init-from: the recipe's model differs"), std::string::npos) << message;
  EXPECT_NE(message.find("model.d_model: 32 in the checkpoint, 64 now"), std::string::npos) << message;
  EXPECT_NE(message.find("model.norm: layer in the checkpoint, rms now"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(tuned_dir_)) << "nothing is written";
  o.resume = "";
  const std::string both = tf::testing::error_message<InputError>([&] { train(recipe(new_text_, base_dir_, {}), o); });
  EXPECT_NE(both.find("give one of them"), std::string::npos) << both;
}

// A fine-tuning recipe need not repeat the model: the keys it leaves out are the checkpoint's (its
// tokenizer keys too); the model keys it writes are compared with the checkpoint's as before.
TEST_F(FineTune, TheModelKeysARecipeLeavesOutAreTheCheckpoints) {
  const fs::path base = checkpoint_path(base_dir_, 6);
  const fs::path tune = tmp_.path() / "tune.yaml";
  tf::testing::write_file(tune, "# the model is the checkpoint's, but for its dropout\nmodel:\n  dropout: 0.1\n"
                                "data:\n  corpus: files\n  train_path: " + new_text_.string() + "\n  seq_len: 32\n"
                                "  cache_dir: " + (tmp_.path() / "cache").string() + "\ntrain:\n  steps: 3\n"
                                "  batch_size: 4\nschedule:\n  warmup_steps: 0\neval:\n  interval: 0\n"
                                "sample:\n  tokens: 0\ncheckpoint:\n  dir: " + tuned_dir_.string() + "\n");
  const Recipe tuned = load_fine_tune_recipe(tune.string(), {}, base_dir_.string());
  std::vector<std::string> changed;
  for (const RecipeChange& c : recipe_changes(load_checkpoint(base).run.recipe, tuned))
    if (c.key.rfind("model.", 0) == 0 || c.key.rfind("data.", 0) == 0) changed.push_back(c.key);
  EXPECT_EQ(changed, (std::vector<std::string>{"model.dropout", "data.train_path"}));
  std::ostringstream out;
  TrainOptions o;
  o.out = &out;
  o.init_from = base_dir_.string();
  EXPECT_EQ(train(tuned, o).final_step, 3) << out.str();
  EXPECT_EQ(out.str().find("warning:"), std::string::npos) << "the same alphabet: " << out.str();
  // Read as a recipe of its own, the file has the default model, which the checkpoint refuses.
  const std::string own = tf::testing::error_message<InputError>([&] { train(load_recipe(tune.string()), o); });
  EXPECT_NE(own.find("model.d_model: 32 in the checkpoint, 128 now"), std::string::npos) << own;
  // A model key the recipe writes must still be the checkpoint's.
  const std::string wider = tf::testing::error_message<InputError>(
      [&] { train(load_fine_tune_recipe(tune.string(), {"model.n_layers=3"}, base.string()), o); });
  EXPECT_NE(wider.find("model.n_layers: 2 in the checkpoint, 3 now"), std::string::npos) << wider;
  // The command line reads the recipe so: a dry run of the file with --init-from prints the model.
  const tf::testing::CommandOutcome dry =
      tf::testing::run_command({"train", tune.string(), "--init-from", base_dir_.string(), "--dry-run", "--set",
                                "checkpoint.dir=" + (tmp_.path() / "fresh").string()},
                               tmp_.path());
  EXPECT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("d_model: 32"), std::string::npos) << dry.out;
}

// Text mostly outside the checkpoint's vocabulary reads as <unk>: the run says how much of it.
TEST_F(FineTune, TextOutsideTheVocabularyIsWarnedAbout) {
  const data::CharTokenizer letters = data::CharTokenizer::train("abc ");
  std::ostringstream out;
  EXPECT_DOUBLE_EQ(warn_unknown_text(letters, letters.encode("abc abc 12"), "base.h5", out), 0.2);
  EXPECT_EQ(out.str(), "warning: 20.0% of the training text (2 of 10 characters) is outside the vocabulary of "
                       "base.h5's char tokenizer: each such character reads as <unk>, which the model can neither "
                       "tell apart nor learn to write; fine-tune on text in the checkpoint's alphabet, or train a "
                       "new model on this text\n");
  std::ostringstream quiet;
  EXPECT_DOUBLE_EQ(warn_unknown_text(letters, letters.encode("abc abc abc abc abc1"), "base.h5", quiet), 0.05);
  EXPECT_EQ(quiet.str(), "") << "5% is not above the threshold";
  // In a run: the base model never saw a digit; this text is about a tenth digits.
  const std::string words = tf::testing::english_text(6000, 3);
  std::string text;
  for (size_t i = 0; i < words.size(); i += 60) text += words.substr(i, 60) + " 1984 2001\n";
  const fs::path digits = tmp_.path() / "digits.txt";
  tf::testing::write_file(digits, text);
  TrainOptions o;
  o.out = &out;
  o.dry_run = true;
  o.init_from = checkpoint_path(base_dir_, 6).string();
  train(recipe(digits, tuned_dir_, {}), o);
  EXPECT_NE(out.str().find("% of the training text ("), std::string::npos) << out.str();
  EXPECT_NE(out.str().find(" characters) is outside the vocabulary of " + *o.init_from + "'s char tokenizer"),
            std::string::npos)
      << out.str();
}

}  // namespace
}  // namespace tf::train
