// data.seq_len_warmup (train/seq_len_warmup.h): the window lengths of the linear schedule against
// hand-computed values; a warm-up step trains on its windows' first columns (its loss is the model's
// loss there, its token count B x T(step)); a time budget is measured on full-shape steps only (this
// warm-up's and train.batch_warmup's); the recipe's errors name the key.
#include <gtest/gtest.h>

#include <sstream>

#include "framework/autograd/tape.h"
#include "support/errors.h"
#include "train/run.h"
#include "train/run_fixture.h"
#include "train/seq_len_warmup.h"
#include "train/step.h"
#include "train/trainer.h"
#include "train/warmup_fixture.h"

namespace tf::train {
namespace {

TEST(SeqLenWarmup, WindowLengthsGrowLinearlyInMultiplesOf8) {
  DataConfig d;
  d.seq_len = 128;
  d.seq_len_warmup = 1000;
  EXPECT_EQ(seq_len_start(d), 32);      // a quarter of 128
  EXPECT_EQ(window_length(d, 0), 32);
  EXPECT_EQ(window_length(d, 83), 32);  // 32 + 96 * 83 / 1000 = 39.97: 39, down to 32
  EXPECT_EQ(window_length(d, 84), 40);  // 32 + 8.06
  EXPECT_EQ(window_length(d, 500), 80);
  EXPECT_EQ(window_length(d, 999), 120);  // 32 + 95.9: 127, down to 120
  EXPECT_EQ(window_length(d, 1000), 128);
  EXPECT_EQ(window_length(d, 123456), 128);

  d.seq_len = 100;
  d.seq_len_start = 20;
  d.seq_len_warmup = 10;
  EXPECT_EQ(window_length(d, 0), 20);  // 16 would be below the start
  EXPECT_EQ(window_length(d, 5), 56);  // 20 + 40 = 60: 56
  EXPECT_EQ(window_length(d, 9), 88);  // 20 + 72 = 92: 88
  EXPECT_EQ(window_length(d, 10), 100);

  d.seq_len_warmup = 0;  // off
  EXPECT_EQ(window_length(d, 0), 100);

  d.seq_len = 3;  // shorter than 8: the start, then the full length
  d.seq_len_start = 0;
  d.seq_len_warmup = 5;
  EXPECT_EQ(seq_len_start(d), 1);
  EXPECT_EQ(window_length(d, 4), 1);  // 1 + 2 * 4 / 5 = 2.6: 2, down to 0, up to the start
  EXPECT_EQ(window_length(d, 5), 3);
}

TEST(SeqLenWarmup, FirstColumnsCopiesEachRowsLeadingIds) {
  Tensor ids = Tensor::empty({3, 5}, DType::i32);
  for (int64_t i = 0; i < 15; ++i) ids.data<int32_t>()[i] = static_cast<int32_t>(10 * (i / 5) + i % 5);
  const Tensor first = first_columns(ids, 2);
  ASSERT_EQ(first.shape(), (Shape{3, 2}));
  const std::vector<int32_t> expected = {0, 1, 10, 11, 20, 21};
  EXPECT_EQ(std::vector<int32_t>(first.data<int32_t>(), first.data<int32_t>() + 6), expected);
  EXPECT_EQ(first_columns(ids, 5).raw_data(), ids.raw_data());  // the whole width: no copy
  EXPECT_THROW(first_columns(ids, 6), Error);
  EXPECT_THROW(first_columns(ids, 0), Error);
}

class SeqLenWarmupRun : public ::testing::Test {
 protected:
  void SetUp() override { tf::testing::write_file(text_, tf::testing::english_text(4000)); }
  Recipe recipe(std::vector<std::string> more) const {
    more.push_back("train.threads=1");
    return tf::testing::tiny_recipe("tiny_gpt", text_, tmp_.path() / "run", tmp_.path() / "cache", more);
  }
  tf::testing::TempDir tmp_;
  std::filesystem::path text_ = tmp_.path() / "text.txt";
};

// tiny_gpt: batch 4, windows of 32. Start 8 over 4 steps: 8, 8 + 6 = 14 -> 8, 8 + 12 = 20 -> 16, 26 -> 24,
// then 32. The first step's loss is the untrained model's loss on the first 8 columns of the batch
// the batcher draws (a second run of the same recipe, the same seeds).
TEST_F(SeqLenWarmupRun, EachStepTrainsOnTheFirstColumnsOfItsWindows) {
  const Recipe r = recipe({"data.seq_len_warmup=4", "data.seq_len_start=8", "model.dropout=0"});
  tf::testing::WarmupStart start = tf::testing::warmup_start(r, [](const Batch& b) {
    return Batch{first_columns(b.inputs, 8), first_columns(b.targets, 8), b.key_padding};
  });
  train::Run& run = start.run;
  layers::Context ctx{true, &run.dropout_rng, nullptr};
  const double expected_loss = start.first_loss;

  const std::vector<int64_t> windows = {8, 8, 16, 24, 32, 32};
  int64_t tokens = 0;
  for (size_t i = 0; i < windows.size(); ++i) {
    const StepResult step = train_step(run, *start.batches, ctx);
    EXPECT_EQ(step.tokens, 4 * windows[i]) << "step " << i;
    tokens += step.tokens;
    if (i == 0) {
      EXPECT_NEAR(step.loss, expected_loss, 1e-5 * std::abs(expected_loss));
    }
  }
  EXPECT_EQ(run.tokens_seen, tokens);
}

// A budgeted run counts only full-shape steps in its measurement: with 6 warm-up steps (of the window
// length or of the batch size), steps 7 and 8 warm up the measurement and steps 9 .. 16 are measured,
// so the count is fixed after step 16 (after step 10 without the warm-up). 20 steps: the progress
// prints a line for every step.
TEST_F(SeqLenWarmupRun, ATimeBudgetIsMeasuredOnFullShapeSteps) {
  for (const std::string key : {"data.seq_len_warmup", "train.batch_warmup"}) {
    for (const auto& [warmup, after, before] :
         {std::tuple{"0", "step 9/20", "step 10/20"}, std::tuple{"6", "step 15/20", "step 16/20"}}) {
      std::filesystem::remove_all(tmp_.path() / "run");
      std::ostringstream out;
      TrainOptions options;
      options.out = &out;
      train(recipe({"train.steps=20", "train.time_budget=1h", "eval.interval=0", "schedule.warmup_steps=2",
                    key + "=" + warmup}),
            options);
      const std::string text = out.str();
      const size_t note = text.find("time budget 1h:");
      ASSERT_NE(note, std::string::npos) << text;
      EXPECT_LT(text.find(after), note) << key << " " << warmup << ":\n" << text;
      EXPECT_GT(text.find(before), note) << key << " " << warmup << ":\n" << text;
    }
  }
}

TEST(SeqLenWarmupRecipe, ErrorsNameTheKey) {
  const std::string bert = tf::testing::error_message<InputError>(
      [] { parse_recipe("model:\n  arch: bert\ndata:\n  seq_len_warmup: 100\n", "r.yaml"); });
  EXPECT_NE(bert.find("r.yaml:4:"), std::string::npos) << bert;
  EXPECT_NE(bert.find("data.seq_len_warmup is for a GPT"), std::string::npos) << bert;

  const std::string start = tf::testing::error_message<InputError>(
      [] { parse_recipe("data:\n  seq_len: 64\n  seq_len_warmup: 100\n  seq_len_start: 65\n", "r.yaml"); });
  EXPECT_NE(start.find("r.yaml:4:"), std::string::npos) << start;
  EXPECT_NE(start.find("data.seq_len_start (65) exceeds data.seq_len (64)"), std::string::npos) << start;

  const std::string ring = tf::testing::error_message<InputError>([] {
    parse_recipe("data:\n  seq_len_warmup: 100\ntrain:\n  sequence_parallel: zigzag\n", "r.yaml");
  });
  EXPECT_NE(ring.find("cannot be combined"), std::string::npos) << ring;
}

}  // namespace
}  // namespace tf::train
