// Fine-tuning (train --init-from): a new run that starts from a checkpoint's weights and tokenizer
// with a fresh optimizer at step 0, on other text, in its own folder; a different model is refused
// key by key; --init-from and --resume exclude each other.
#include <gtest/gtest.h>

#include <sstream>

#include "support/errors.h"
#include "train/checkpoint.h"
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

}  // namespace
}  // namespace tf::train
