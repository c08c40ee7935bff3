// train.recompute blocks (Note [recomputed blocks] in layers/block.cpp): training that runs every
// block again during backward gives the same loss at every step and the same bits in every
// parameter as training that keeps the activations, for a GPT with dropout, a BERT with gradient
// accumulation and a hybrid of attention and Mamba blocks. A mistake in the replay (dropout masks
// drawn anew, a gradient not reaching the block's input, a parameter's gradient added twice) would
// change the weights after the first step.
#include <gtest/gtest.h>

#include "train/checkpoint.h"
#include "train/run_compare.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;

struct RecomputeCase {
  std::string name, recipe;
  std::vector<std::string> overrides;
};

std::ostream& operator<<(std::ostream& os, const RecomputeCase& c) { return os << c.name; }

class Recompute : public ::testing::TestWithParam<RecomputeCase> {};

TEST_P(Recompute, GivesTheSameBitsAsKeepingTheActivations) {
  const RecomputeCase& c = GetParam();
  tf::testing::RunTempDir tmp;
  const fs::path text = tmp / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(20000));
  constexpr int64_t kSteps = 3;
  auto run = [&](const std::string& recompute) {
    const fs::path dir = tmp / ("run_" + recompute);
    std::vector<std::string> overrides = c.overrides;
    for (const char* s : {"model.max_seq_len=32", "data.seq_len=32", "train.batch_size=4", "train.threads=2",
                          "schedule.warmup_steps=1", "eval.interval=0"})
      overrides.emplace_back(s);
    overrides.push_back("train.steps=" + std::to_string(kSteps));
    overrides.push_back("train.recompute=" + recompute);
    const tf::testing::CommandOutcome o =
        tf::testing::run_command(tf::testing::train_args(c.recipe, text, dir, tmp / "cache", overrides), tmp.path());
    EXPECT_EQ(o.code, 0) << o.err;
    return dir;
  };
  const fs::path kept = run("off"), recomputed = run("blocks");
  tf::testing::expect_same_steps(kept / "metrics.jsonl", recomputed / "metrics.jsonl", kSteps);
  tf::testing::expect_same_parameters(checkpoint_path(kept, kSteps), checkpoint_path(recomputed, kSteps));
}

INSTANTIATE_TEST_SUITE_P(
    Models, Recompute,
    ::testing::Values(
        RecomputeCase{"gpt_dropout", "tiny_gpt", {"model.n_layers=2", "model.dropout=0.1", "model.attn_dropout=0.1"}},
        RecomputeCase{"bert_accumulating", "tiny_bert", {"model.n_layers=2", "model.dropout=0.1", "train.grad_accum=2"}},
        RecomputeCase{"attention_and_mamba", "tiny_gpt", {"model.n_layers=2", "model.mixer=[attention, mamba]"}}),
    [](const ::testing::TestParamInfo<RecomputeCase>& info) { return info.param.name; });

}  // namespace
}  // namespace tf::train
