// train.deterministic: the same run on 1, 2, 3 and 4 threads gives the same loss at every step and
// the same bits in every parameter, for a GPT with dropout, a BERT with grad_accum 2 and a GPT
// trained with Muon. The batch (64 x 128 tokens) makes a weight gradient's product long in k and
// small in m and n, the shape where oneDNN splits k over threads: without the option, the 4-thread
// run's weights differ from the 1-thread run's (measured: 23 of 28 parameters; docs/performance.md,
// "Deterministic training"). The deterministic run also stays close to the default one: it computes
// the same math.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "train/checkpoint.h"
#include "train/run_compare.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;

struct DeterministicCase {
  std::string name, recipe;
  std::vector<std::string> overrides;
};

std::ostream& operator<<(std::ostream& os, const DeterministicCase& c) { return os << c.name; }

class Deterministic : public ::testing::TestWithParam<DeterministicCase> {};

TEST_P(Deterministic, EveryThreadCountGivesTheSameBits) {
  const DeterministicCase& c = GetParam();
  // train.threads is what varies here; OMP_NUM_THREADS would override it (train/threads.h).
  unsetenv("OMP_NUM_THREADS");
  tf::testing::RunTempDir tmp;
  const fs::path text = tmp / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(40000));
  constexpr int64_t kSteps = 3;
  // Each run is its own process, as a user's runs are: oneDNN plans a matmul for the thread count
  // it sees when it first meets the shape, and keeps the plan for the process's life.
  auto run = [&](int threads, bool deterministic) {
    const fs::path dir = tmp / ("run_" + std::to_string(threads) + (deterministic ? "_det" : ""));
    std::vector<std::string> overrides = c.overrides;
    for (const char* s : {"model.d_model=128", "model.n_heads=4", "model.max_seq_len=128", "data.seq_len=128",
                          "train.batch_size=64", "schedule.warmup_steps=1", "eval.interval=0"})
      overrides.emplace_back(s);
    overrides.push_back("train.steps=" + std::to_string(kSteps));
    overrides.push_back("train.threads=" + std::to_string(threads));
    overrides.push_back(std::string("train.deterministic=") + (deterministic ? "true" : "false"));
    const tf::testing::CommandOutcome o =
        tf::testing::run_command(tf::testing::train_args(c.recipe, text, dir, tmp / "cache", overrides), tmp.path());
    EXPECT_EQ(o.code, 0) << o.err;
    return dir;
  };
  const fs::path one = run(1, true);
  for (int threads : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(threads) + " threads against 1");
    const fs::path many = run(threads, true);
    tf::testing::expect_same_steps(one / "metrics.jsonl", many / "metrics.jsonl", kSteps);
    tf::testing::expect_same_parameters(checkpoint_path(one, kSteps), checkpoint_path(many, kSteps));
  }
  // The same math as the default kernels: every step's loss within float32 rounding of theirs.
  const fs::path usual = run(1, false);
  const auto a = tf::testing::read_metrics(one / "metrics.jsonl"), b = tf::testing::read_metrics(usual / "metrics.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double la = tf::testing::number(a[i], "train_loss"), lb = tf::testing::number(b[i], "train_loss");
    EXPECT_NEAR(la, lb, 1e-4 * std::abs(lb)) << "step " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, Deterministic,
    ::testing::Values(DeterministicCase{"gpt_dropout", "tiny_gpt", {"model.n_layers=1", "model.dropout=0.1"}},
                      DeterministicCase{"bert_accumulating", "tiny_bert", {"model.n_layers=1", "train.grad_accum=2"}},
                      // Newton-Schulz's Gram products, (128, 512) by its transpose, are long in k too.
                      DeterministicCase{"gpt_muon", "tiny_gpt", {"model.n_layers=1", "optim.name=muon"}}),
    [](const ::testing::TestParamInfo<DeterministicCase>& info) { return info.param.name; });

}  // namespace
}  // namespace tf::train
