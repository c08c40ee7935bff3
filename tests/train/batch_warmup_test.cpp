// train.batch_warmup (train/batch_warmup.h): the rows of the linear schedule against hand-computed
// values; a warm-up step trains on its micro-batch's first rows (its loss is the model's loss there,
// on one thread and with the rows split between two, even when one thread's share is empty; its
// token count B(step) x T); the recipe's errors name the key. A time budget's measurement waits for
// full-size steps: seq_len_warmup_test.cpp, which tests both warm-ups.
#include <gtest/gtest.h>

#include "framework/autograd/tape.h"
#include "support/errors.h"
#include "train/batch_warmup.h"
#include "train/run.h"
#include "train/run_fixture.h"
#include "train/step.h"
#include "train/trainer.h"
#include "train/warmup_fixture.h"

namespace tf::train {
namespace {

TEST(BatchWarmup, RowsGrowLinearlyFromTheStart) {
  TrainConfig t;
  t.batch_size = 16;
  t.batch_warmup = 1000;
  EXPECT_EQ(batch_start(t), 4);  // a quarter of 16
  EXPECT_EQ(batch_rows(t, 0), 4);
  EXPECT_EQ(batch_rows(t, 83), 4);  // 4 + 12 * 83 / 1000 = 4.996: 4
  EXPECT_EQ(batch_rows(t, 84), 5);  // 4 + 1.008
  EXPECT_EQ(batch_rows(t, 500), 10);
  EXPECT_EQ(batch_rows(t, 999), 15);  // 4 + 11.988
  EXPECT_EQ(batch_rows(t, 1000), 16);
  EXPECT_EQ(batch_rows(t, 123456), 16);

  t.batch_size = 3;  // a quarter of 3 is 0: at least one row
  t.batch_warmup = 4;
  EXPECT_EQ(batch_start(t), 1);
  EXPECT_EQ(batch_rows(t, 1), 1);  // 1 + 2 * 1 / 4 = 1.5: 1
  EXPECT_EQ(batch_rows(t, 2), 2);
  EXPECT_EQ(batch_rows(t, 4), 3);

  t.batch_start = 2;
  t.batch_warmup = 0;  // off
  EXPECT_EQ(batch_rows(t, 0), 3);
}

TEST(BatchWarmup, FirstRowsCopiesTheLeadingRowsOfAnyTensor) {
  Tensor ids = Tensor::empty({3, 5}, DType::i32);
  for (int64_t i = 0; i < 15; ++i) ids.data<int32_t>()[i] = static_cast<int32_t>(i);
  const Tensor first = first_rows(ids, 2);
  ASSERT_EQ(first.shape(), (Shape{2, 5}));
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(first.data<int32_t>()[i], i);
  Tensor mask = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8}, {4, 1, 2});
  const Tensor one = first_rows(mask, 1);
  ASSERT_EQ(one.shape(), (Shape{1, 1, 2}));
  EXPECT_EQ(one.data<float>()[0], 1.0f);
  EXPECT_EQ(one.data<float>()[1], 2.0f);
  EXPECT_EQ(first_rows(ids, 3).raw_data(), ids.raw_data());  // every row: no copy
  EXPECT_FALSE(first_rows(Tensor(), 2).defined());            // no key padding (a GPT's batch)
  EXPECT_THROW(first_rows(ids, 4), Error);
  EXPECT_THROW(first_rows(ids, 0), Error);
}

class BatchWarmupRun : public ::testing::Test {
 protected:
  void SetUp() override { tf::testing::write_file(text_, tf::testing::english_text(4000)); }
  Recipe recipe(std::vector<std::string> more, int threads = 1) const {
    more.push_back("train.threads=" + std::to_string(threads));
    return tf::testing::tiny_recipe("tiny_gpt", text_, tmp_.path() / "run", tmp_.path() / "cache", more);
  }
  tf::testing::TempDir tmp_;
  std::filesystem::path text_ = tmp_.path() / "text.txt";
};

// tiny_gpt: batch 4, windows of 32. Start 1 over 3 steps: 1, 1 + 3 / 3 = 2, 1 + 6 / 3 = 3, then 4. The
// first step's loss is the untrained model's loss on the first row of the batch the batcher draws (a
// second run of the same recipe, the same seeds). With the rows split between two threads, the first
// step's one row leaves the second thread nothing to do.
TEST_F(BatchWarmupRun, EachStepTrainsOnTheFirstRowsOfItsBatch) {
  for (const int threads : {1, 2}) {
    const Recipe r = recipe({"train.batch_warmup=3", "train.batch_start=1", "model.dropout=0"}, threads);
    tf::testing::WarmupStart start = tf::testing::warmup_start(r, [](const Batch& b) {
      return Batch{first_rows(b.inputs, 1), first_rows(b.targets, 1), first_rows(b.key_padding, 1)};
    });
    train::Run& run = start.run;
    layers::Context ctx{true, &run.dropout_rng, nullptr};
    const double expected_loss = start.first_loss;

    const std::vector<int64_t> rows = {1, 2, 3, 4, 4};
    int64_t tokens = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const StepResult step = train_step(run, *start.batches, ctx);
      EXPECT_EQ(step.tokens, rows[i] * 32) << "step " << i << ", " << threads << " threads";
      EXPECT_TRUE(std::isfinite(step.loss)) << "step " << i << ", " << threads << " threads";
      tokens += step.tokens;
      if (i == 0) {
        EXPECT_NEAR(step.loss, expected_loss, 1e-5 * std::abs(expected_loss)) << threads << " threads";
      }
    }
    EXPECT_EQ(run.tokens_seen, tokens);
  }
}

TEST(BatchWarmupRecipe, ErrorsNameTheKey) {
  const std::string start = tf::testing::error_message<InputError>(
      [] { parse_recipe("train:\n  batch_size: 8\n  batch_warmup: 100\n  batch_start: 9\n", "r.yaml"); });
  EXPECT_NE(start.find("r.yaml:4:"), std::string::npos) << start;
  EXPECT_NE(start.find("train.batch_start (9) exceeds train.batch_size (8)"), std::string::npos) << start;
}

}  // namespace
}  // namespace tf::train
