// `mpirun -np 2 tapeformer train` with train.sequence_parallel (docs/distributed.md): each rank holds
// half of every sequence and attention runs round the ring, yet the run is the one-process run within
// float32 rounding (the ring adds the blocks' softmax sums in another order). Label mpi.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "framework/io/hdf5_io.h"
#include "dist/mpi_fixture.h"
#include "layers/attention_options.h"
#include "train/run_compare.h"

namespace tf::testing {
namespace {

namespace fs = std::filesystem;

class SequenceParallel : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(dir_.path() / "text.txt") << english_text(60000); }
  std::vector<std::string> args(const std::string& name, std::vector<std::string> more) const {
    // SGD: its update is the gradient times the rate, so the parameters compare the gradients.
    // (AdamW divides by sqrt(v): an element whose gradient is ~0 moves by ~lr on either side of
    // rounding, and the parameters then differ by 1e-4 of their largest element after 8 steps.)
    more.insert(more.begin(), {"train.steps=8", "checkpoint.interval=8", "eval.interval=4", "log.report=false",
                               "model.dropout=0", "optim.name=sgd", "optim.lr=0.5", "schedule.min_lr=0.05"});
    return train_args("tiny_gpt", dir_.path() / "text.txt", dir_.path() / name, dir_.path() / "cache", more);
  }
  // Every step's loss within `tolerance` (relative) and every parameter within it (relative to the
  // largest element of the tensor).
  void expect_close_runs(const std::string& a, const std::string& b, double tolerance) const {
    const auto ma = read_metrics(dir_.path() / a / "metrics.jsonl"), mb = read_metrics(dir_.path() / b / "metrics.jsonl");
    ASSERT_EQ(ma.size(), 8u);
    ASSERT_EQ(mb.size(), 8u);
    for (size_t i = 0; i < ma.size(); ++i)
      EXPECT_NEAR(number(ma[i], "train_loss"), number(mb[i], "train_loss"), tolerance * number(ma[i], "train_loss"))
          << "step " << i + 1;
    expect_close_parameters(a, b, tolerance);
  }
  void expect_close_parameters(const std::string& a, const std::string& b, double tolerance) const {
    const H5Reader ra((dir_.path() / a / "ckpt_00000008.h5").string()), rb((dir_.path() / b / "ckpt_00000008.h5").string());
    double worst_of_all = 0;
    for (const std::string& name : ra.list("model")) {
      const Tensor ta = ra.read_tensor("model", name), tb = rb.read_tensor("model", name);
      ASSERT_EQ(ta.shape(), tb.shape()) << name;
      double largest = 1e-30, worst = 0;
      for (int64_t i = 0; i < ta.numel(); ++i) largest = std::max(largest, std::abs(ta.at(i)));
      for (int64_t i = 0; i < ta.numel(); ++i) worst = std::max(worst, std::abs(ta.at(i) - tb.at(i)));
      EXPECT_LE(worst / largest, tolerance) << name;
      worst_of_all = std::max(worst_of_all, worst / largest);
    }
    std::cout << "largest parameter difference, relative to the tensor's largest element: " << worst_of_all << "\n";
  }
  // The recipe with `model` overrides, in one process and split over 2 ranks by `layout`.
  void expect_split_matches_one_process(std::vector<std::string> model, const std::string& layout) const {
    ASSERT_EQ(run(dir_.path(), "one", 0, args("one", model)).code, 0);
    model.push_back("train.sequence_parallel=" + layout);
    const Outcome two = run(dir_.path(), "two", 2, args("two", model));
    ASSERT_EQ(two.code, 0) << two.err;
    expect_close_runs("one", "two", 2e-5);
  }
  RunTempDir dir_;
};

// RoPE and zigzag chunks: each rank rotates its two chunks at their own positions.
TEST_F(SequenceParallel, ZigzagOnTwoRanksTrainsTheOneProcessModel) {
  expect_split_matches_one_process({"model.position=rope"}, "zigzag");
}

// Learned positions and contiguous chunks, three micro-batches a step (both ranks run all three).
TEST_F(SequenceParallel, ContiguousWithLearnedPositionsAndGradAccum) {
  expect_split_matches_one_process({"model.position=learned", "train.grad_accum=3"}, "contiguous");
}

// Every row of Note [attention layer options], all at once, with RoPE: the options act on each
// rank's positions (queries and keys before each chunk's rotation, values with each chunk's own
// token ids), so the split run is the one-process run. A row without a setting here fails.
TEST_F(SequenceParallel, EveryAttentionLayerOptionTrainsTheOneProcessModel) {
  const std::map<std::string, std::string> settings = {{"model.qk_norm", "model.qk_norm=true"},
                                                              {"model.attention_gate", "model.attention_gate=true"},
                                                              {"model.value_embeddings", "model.value_embeddings=true"}};
  std::vector<std::string> model = {"model.position=rope"};
  for (const layers::AttentionLayerOption& option : layers::kAttentionLayerOptions) {
    ASSERT_TRUE(settings.count(option.key)) << option.key << " has no sequence-parallel case";
    model.push_back(settings.at(option.key));
  }
  if (model.size() == 1) GTEST_SKIP() << "no attention layer option yet";
  expect_split_matches_one_process(model, "zigzag");
}

// A one-process checkpoint continues split over 2 ranks (train.sequence_parallel may change on
// --resume, with --accept-changes) and ends where the one-process run ends.
TEST_F(SequenceParallel, AOneProcessRunResumesSplit) {
  ASSERT_EQ(run(dir_.path(), "one", 0, args("one", {"model.position=rope", "checkpoint.interval=4"})).code, 0);
  std::vector<std::string> resume = args("two", {"model.position=rope", "train.sequence_parallel=zigzag"});
  resume.insert(resume.end(), {"--resume", (dir_.path() / "one" / "ckpt_00000004.h5").string(), "--accept-changes"});
  const Outcome two = run(dir_.path(), "two", 2, resume);
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_NE(two.out.find("resuming from"), std::string::npos) << two.out;
  expect_close_parameters("one", "two", 2e-5);
}

// train.recompute blocks: each rank runs its blocks again during backward, ring attention included
// (the ranks replay together, so its messages pair up as in the first run): the same bits as the
// split run that keeps its activations.
TEST_F(SequenceParallel, RecomputedBlocksGiveTheSameBits) {
  const std::vector<std::string> split = {"model.position=rope", "train.sequence_parallel=zigzag"};
  std::vector<std::string> recomputed = split;
  recomputed.push_back("train.recompute=blocks");
  const Outcome kept = run(dir_.path(), "kept", 2, args("kept", split));
  ASSERT_EQ(kept.code, 0) << kept.err;
  const Outcome again = run(dir_.path(), "again", 2, args("again", recomputed));
  ASSERT_EQ(again.code, 0) << again.err;
  expect_same_parameters(dir_.path() / "kept" / "ckpt_00000008.h5", dir_.path() / "again" / "ckpt_00000008.h5");
  expect_same_steps(dir_.path() / "kept" / "metrics.jsonl", dir_.path() / "again" / "metrics.jsonl", 8);
}

TEST_F(SequenceParallel, RefusesWhatTheRingCannotRun) {
  const Outcome mamba = run(dir_.path(), "mamba", 2,
                            args("mamba", {"train.sequence_parallel=zigzag", "model.mixer=[attention, mamba]"}));
  EXPECT_EQ(mamba.code, 2);
  EXPECT_NE(mamba.err.find("train.sequence_parallel: zigzag runs softmax attention round the ring; layer 1 has "
                           "model.mixer mamba"), std::string::npos) << mamba.err;
  const Outcome odd = run(dir_.path(), "odd", 2, args("odd", {"train.sequence_parallel=zigzag", "data.seq_len=30"}));
  EXPECT_EQ(odd.code, 2);
  EXPECT_NE(odd.err.find("data.seq_len (30) must be a multiple of 4"), std::string::npos) << odd.err;
  // Longformer's global tokens: a row of Note [variant options] that the ring does not honour.
  const Outcome global = run(dir_.path(), "global", 2,
                             args("global", {"train.sequence_parallel=zigzag", "model.attention_window=4",
                                             "model.attention_global_tokens=1"}));
  EXPECT_EQ(global.code, 2);
  EXPECT_NE(global.err.find("takes no model.attention_global_tokens (ring attention does not honour it"),
            std::string::npos) << global.err;
}

}  // namespace
}  // namespace tf::testing
