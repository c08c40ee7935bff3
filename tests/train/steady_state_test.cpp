// A warm training step allocates no tensor storage and creates no oneDNN primitive: after the
// first steps every block comes from the storage pool (framework/storage_pool.h) and every matmul
// from the primitive cache. GPT and BERT, with gradient accumulation, dropout and clipping on.
// The threads share each op here (train.thread_split: ops). Split by rows, the threads allocate
// from the one pool at moments that vary from step to step, so the pool grows until it has seen
// the parts' peaks coincide (up to ~30 blocks more, beside a busy process); what such a step must
// never do is keep a block past its end, which BatchSplitStepsKeepNothingPastTheirEnd checks.
#include <gtest/gtest.h>
#include <omp.h>

#include "framework/kernels/onednn.h"
#include "framework/storage_pool.h"
#include "framework/tensor.h"
#include "train/run.h"
#include "train/run_fixture.h"
#include "train/step.h"

namespace tf::train {
namespace {

struct Counts {
  uint64_t storage, primitives;
  static Counts now() { return {storage_allocation_count(), kernels::onednn_primitives_created()}; }
};

class SteadyState : public ::testing::TestWithParam<const char*> {};

TEST_P(SteadyState, WarmStepsAllocateNothing) {
  tf::testing::TempDir tmp;
  const auto text = tmp / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(4000));
  const Recipe recipe = tf::testing::tiny_recipe(GetParam(), text, tmp / "run", tmp / "cache",
                                                 {"train.grad_accum=2", "model.dropout=0.1", "train.grad_clip=0.5",
                                                  "train.thread_split=ops"});
  data::PreparedCorpus corpus = prepare_recipe_corpus(recipe.data, recipe.model.arch, nullptr, true, nullptr);
  train::Run run = build_run(recipe, std::move(corpus.tokenizer));
  Batches batches(run.recipe, *run.tokenizer, corpus.train.tokens, 1);
  layers::Context ctx{true, &run.dropout_rng, nullptr};

  for (int i = 0; i < 4; ++i) train_step(run, batches, ctx);  // warm-up: the pool fills, primitives are made
  const Counts warm = Counts::now();
  const uint64_t reuses_before = storage_pool::stats().reuses;
  for (int i = 0; i < 3; ++i) train_step(run, batches, ctx);
  const Counts after = Counts::now();
  EXPECT_EQ(after.storage, warm.storage) << "tensor blocks taken from the system in 3 warm steps";
  EXPECT_EQ(after.primitives, warm.primitives) << "oneDNN primitives created in 3 warm steps";
  EXPECT_GT(storage_pool::stats().reuses, reuses_before + 100) << "the steps did allocate tensors: from the pool";
}

INSTANTIATE_TEST_SUITE_P(Models, SteadyState, ::testing::Values("tiny_gpt", "tiny_bert"));

// Split by rows on 2 threads (Note [batch-split threads]): between steps the pool holds the same live
// bytes every time (parameters, their gradients, the optimizer's state), so no part's activation,
// gradient or private gradient outlives its step, however the threads interleaved.
TEST(SteadyState, BatchSplitStepsKeepNothingPastTheirEnd) {
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(2);
  tf::testing::TempDir tmp;
  const auto text = tmp / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(4000));
  const Recipe recipe = tf::testing::tiny_recipe("tiny_bert", text, tmp / "run", tmp / "cache",
                                                 {"train.grad_accum=2", "model.dropout=0.1", "train.thread_split=batch"});
  data::PreparedCorpus corpus = prepare_recipe_corpus(recipe.data, recipe.model.arch, nullptr, true, nullptr);
  train::Run run = build_run(recipe, std::move(corpus.tokenizer));
  Batches batches(run.recipe, *run.tokenizer, corpus.train.tokens, 1);
  layers::Context ctx{true, &run.dropout_rng, nullptr};
  for (int i = 0; i < 2; ++i) train_step(run, batches, ctx);
  ASSERT_TRUE(run.batch_split) << "the step did not split the rows";
  const size_t live = storage_pool::stats().live_bytes;
  for (int i = 0; i < 8; ++i) {
    train_step(run, batches, ctx);
    EXPECT_EQ(storage_pool::stats().live_bytes, live) << "after warm step " << i + 1;
  }
  omp_set_num_threads(threads_before);
}

TEST(StoragePool, ReusesFreedBlocksOfTheSameClassAndTrimReturnsThem) {
  storage_pool::trim();
  const uint64_t before = storage_allocation_count();
  const std::byte* first = nullptr;
  {
    const Tensor a = Tensor::empty({1000, 37});  // 148000 bytes
    first = static_cast<const std::byte*>(a.raw_data());
  }
  EXPECT_EQ(storage_allocation_count(), before + 1);
  EXPECT_GE(storage_pool::stats().idle_bytes, size_t{148000});
  {
    const Tensor b = Tensor::empty({37, 1001});  // 148148 bytes: the same size class (within 1/8)
    EXPECT_EQ(static_cast<const std::byte*>(b.raw_data()), first);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.raw_data()) % 64, 0u);
  }
  EXPECT_EQ(storage_allocation_count(), before + 1);
  storage_pool::trim();
  EXPECT_EQ(storage_pool::stats().idle_bytes, 0u);
  const Tensor c = Tensor::empty({1000, 37});
  EXPECT_EQ(storage_allocation_count(), before + 2);
}

}  // namespace
}  // namespace tf::train
