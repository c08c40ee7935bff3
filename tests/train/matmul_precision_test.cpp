// train.matmul_precision (Note [bfloat16 matmuls] in framework/kernels/onednn.cpp): bf16 reaches the
// step's matmuls (the losses move off the float32 run's, by bfloat16's rounding and no more), the run
// says so, and auto follows what the CPU does faster. The kernels' numbers are checked in
// matmul_bf16_test.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "framework/kernels/bf16.h"
#include "train/run_fixture.h"
#include "train/step.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;

TEST(MatmulPrecision, AutoIsBf16ExactlyWhereTheCpuMultipliesBf16Faster) {
  TrainConfig train;
  EXPECT_FALSE(bf16_matmuls(train));  // the default, fp32
  train.matmul_precision = "bf16";
  EXPECT_TRUE(bf16_matmuls(train));
  train.matmul_precision = "auto";
  const bool faster = kernels::bf16_faster();
  EXPECT_EQ(bf16_matmuls(train), faster);
  EXPECT_EQ(kernels::bf16_faster(), faster);  // timed once: the choice holds for the whole process
  if (!kernels::native_bf16()) {
    EXPECT_FALSE(faster);  // never bf16 emulated in float32
  }
}

// The rule on the timings: bf16 only when it saves more than the margin (a tie keeps fp32, so
// that timing noise does not flip the choice between runs of one recipe on one machine).
TEST(MatmulPrecision, Bf16PaysOnlyBeyondTheMargin) {
  EXPECT_TRUE(kernels::bf16_pays(1.0, 0.55));   // Zen 5: about 1.8x
  EXPECT_FALSE(kernels::bf16_pays(1.0, 1.6));   // a Xeon without AMX: about 0.6x
  EXPECT_FALSE(kernels::bf16_pays(1.0, 0.95));  // within the margin: a tie
  EXPECT_FALSE(kernels::bf16_pays(1.0, kernels::kBf16Margin));
  EXPECT_TRUE(kernels::bf16_pays(1.0, 0.89));
}

// Three steps of the same tiny GPT on two threads (rows split between them), fp32 and bf16. The
// first step's loss is the initial model's, so it differs only by the forward's rounding: bfloat16
// keeps 8 significant bits, and the loss, a mean over 128 positions, moves by far less than that.
TEST(MatmulPrecision, Bf16MovesTheLossesByRoundingAndTheRunSaysSo) {
  tf::testing::RunTempDir tmp;
  const fs::path text = tmp / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(20000));
  constexpr int64_t kSteps = 3;
  auto run = [&](const std::string& precision) {
    const fs::path dir = tmp / ("run_" + precision);
    std::vector<std::string> overrides;
    for (const char* s : {"model.max_seq_len=32", "data.seq_len=32", "train.batch_size=4", "train.threads=2",
                          "schedule.warmup_steps=1", "eval.interval=0", "train.steps=3"})
      overrides.emplace_back(s);
    overrides.push_back("train.matmul_precision=" + precision);
    const tf::testing::CommandOutcome o =
        tf::testing::run_command(tf::testing::train_args("tiny_gpt", text, dir, tmp / "cache", overrides), tmp.path());
    EXPECT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(o.out.find("bf16 matmuls") != std::string::npos, precision == "bf16") << o.out;
    return tf::testing::read_metrics(dir / "metrics.jsonl");
  };
  const auto fp32 = run("fp32"), bf16 = run("bf16");
  ASSERT_EQ(fp32.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(bf16.size(), static_cast<size_t>(kSteps));
  for (int64_t i = 0; i < kSteps; ++i) {
    const double a = tf::testing::number(fp32[i], "train_loss"), b = tf::testing::number(bf16[i], "train_loss");
    EXPECT_NE(a, b) << "step " << i + 1 << ": bf16 gave the float32 loss";
    EXPECT_LT(std::abs(a - b), 0.01 * a) << "step " << i + 1;
  }
}

// `train --dry-run` of a tiny GPT at this matmul precision.
tf::testing::CommandOutcome dry_run(const std::string& precision) {
  tf::testing::RunTempDir tmp;
  const fs::path text = tmp / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(5000));
  std::vector<std::string> args = tf::testing::train_args("tiny_gpt", text, tmp / "run", tmp / "cache",
                                                          {"train.matmul_precision=" + precision});
  args.push_back("--dry-run");
  return tf::testing::run_command(args, tmp.path());
}

TEST(MatmulPrecision, DryRunNamesThePrecision) {
  const tf::testing::CommandOutcome o = dry_run("bf16");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("matmuls               bf16 operands, float32 sums (train.matmul_precision: bf16)"),
            std::string::npos)
      << o.out;
}

// With auto, the dry run says what decided: no instructions, or the timed speed of bf16 against fp32,
// on the side that the choice took.
TEST(MatmulPrecision, DryRunSaysWhyAutoChose) {
  const tf::testing::CommandOutcome o = dry_run("auto");
  ASSERT_EQ(o.code, 0) << o.err;
  // The program timed its own product, so its choice is read from its output, not from this process's.
  const size_t line = o.out.find("matmuls               ");
  ASSERT_NE(line, std::string::npos) << o.out;
  const std::string text = o.out.substr(line, o.out.find('\n', line) - line);
  const bool bf16 = text.find("bf16 operands, float32 sums (train.matmul_precision: auto; ") != std::string::npos;
  ASSERT_TRUE(bf16 || text.find("fp32 (train.matmul_precision: auto; ") != std::string::npos) << text;
  if (!kernels::native_bf16()) {
    EXPECT_FALSE(bf16) << text;
    EXPECT_NE(text.find("; this CPU has no bfloat16 instructions)"), std::string::npos) << text;
    return;
  }
  const size_t at = text.find("bf16 timed at ");
  ASSERT_NE(at, std::string::npos) << text;
  // The printed speed ratio (two decimals) is on the side of the margin that the choice took.
  const double ratio = std::stod(text.substr(at + 14));
  if (bf16)
    EXPECT_GT(ratio, 1.0 / kernels::kBf16Margin - 0.01) << text;
  else
    EXPECT_LT(ratio, 1.0 / kernels::kBf16Margin + 0.01) << text;
}

}  // namespace
}  // namespace tf::train
