// cross_entropy: hand-computed values (uniform logits give ln V), ignore_index and reductions, the
// gradient (softmax - onehot) / count, agreement with log_softmax, the fast float32 kernels against
// the reference on odd shapes, and the errors for bad targets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "framework/autograd/tape.h"
#include "framework/random.h"
#include "framework/kernels/mode.h"
#include "framework/ops/cross_entropy.h"
#include "framework/ops/softmax.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

using ops::CrossEntropyOptions;
using ops::Reduction;

using testing::expect_error;

// Loss and d loss / d logits through the tape.
std::pair<double, Tensor> loss_and_grad(const Tensor& logits, const Tensor& targets, CrossEntropyOptions o = {}) {
  Tensor x = logits.clone().set_requires_grad();
  const Tensor loss = ops::cross_entropy(x, targets, o);
  EXPECT_EQ(loss.shape(), Shape{});
  backward(loss);
  return {loss.item(), x.grad()};
}

TEST(CrossEntropy, UniformLogitsGiveLogV) {
  for (int64_t classes : {1, 2, 7, 130}) {
    const Tensor logits = Tensor::full({3, classes}, 0.25);
    const Tensor targets = Tensor::from_ids({0, static_cast<int32_t>(classes - 1), 0}, {3});
    EXPECT_NEAR(ops::cross_entropy(logits, targets).item(), std::log(static_cast<double>(classes)), 1e-6) << classes;
  }
}

TEST(CrossEntropy, HandValues) {
  // logits [0, ln 2]: softmax [1/3, 2/3]; target 1 costs -ln(2/3), target 0 costs -ln(1/3).
  const Tensor logits = Tensor::from_vector({0, std::log(2.0), 0, std::log(2.0)}, {2, 2}, DType::f64);
  const Tensor targets = Tensor::from_ids({1, 0}, {2});
  const double l1 = -std::log(2.0 / 3), l0 = -std::log(1.0 / 3);
  EXPECT_NEAR(ops::cross_entropy(logits, targets).item(), (l1 + l0) / 2, 1e-15);
  EXPECT_NEAR(ops::cross_entropy(logits, targets, {.reduction = Reduction::sum}).item(), l1 + l0, 1e-15);
  // Gradient of the mean: (softmax - onehot) / 2.
  const auto [loss, grad] = loss_and_grad(logits, targets);
  const std::vector<double> expected = {(1.0 / 3) / 2, (2.0 / 3 - 1) / 2, (1.0 / 3 - 1) / 2, (2.0 / 3) / 2};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(grad.at(i), expected[i], 1e-15) << i;
}

TEST(CrossEntropy, IgnoredRowsAreLeftOutOfLossCountAndGradient) {
  const Tensor logits = Tensor::from_vector({0, std::log(2.0), 5, -5, 0, std::log(2.0)}, {3, 2}, DType::f64);
  const Tensor targets = Tensor::from_ids({1, -100, 1}, {3});
  const auto [loss, grad] = loss_and_grad(logits, targets);
  EXPECT_NEAR(loss, -std::log(2.0 / 3), 1e-15);  // mean over the two counted rows, not three
  EXPECT_EQ(grad.at(2), 0.0);
  EXPECT_EQ(grad.at(3), 0.0);
  EXPECT_NEAR(grad.at(0), (1.0 / 3) / 2, 1e-15);
  // A custom ignore_index; then -100 is an ordinary (out-of-range) target.
  const auto [loss7, grad7] = loss_and_grad(logits, Tensor::from_ids({1, 7, 1}, {3}), {.ignore_index = 7});
  EXPECT_NEAR(loss7, loss, 1e-15);
}

TEST(CrossEntropy, AllIgnoredGivesZeroAndZeroGradient) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor logits = Tensor::from_vector({1, 2, 3, 4}, {2, 2}, dtype);
    const auto [loss, grad] = loss_and_grad(logits, Tensor::from_ids({-100, -100}, {2}));
    EXPECT_EQ(loss, 0.0);
    EXPECT_EQ(grad.to_vector(), std::vector<double>(4, 0.0));
  }
}

TEST(CrossEntropy, BatchedLogitsAndSumReduction) {
  // (B, T, V) logits with (B, T) targets equal the flattened (B*T, V) ones; sum = count * mean.
  Rng rng(2);
  const Tensor logits = randn({2, 3, 5}, rng, 1.0, DType::f64);
  const Tensor targets = Tensor::from_ids({0, 4, -100, 2, 2, 1}, {2, 3});
  const double mean = ops::cross_entropy(logits, targets).item();
  EXPECT_NEAR(ops::cross_entropy(logits.view({6, 5}), targets.view({6})).item(), mean, 1e-15);
  EXPECT_NEAR(ops::cross_entropy(logits, targets, {.reduction = Reduction::sum}).item(), 5 * mean, 1e-13);
}

TEST(CrossEntropy, EqualsMeanNegativeLogSoftmaxOfTheTargets) {
  Rng rng(9);
  const Tensor logits = randn({17, 63}, rng, 3.0, DType::f64);
  std::vector<int32_t> ids;
  for (int r = 0; r < 17; ++r) ids.push_back((r * 29) % 63);
  const Tensor logprobs = ops::log_softmax(logits);
  double expected = 0;
  for (int r = 0; r < 17; ++r) expected -= logprobs.at(r * 63 + ids[r]) / 17;
  EXPECT_NEAR(ops::cross_entropy(logits, Tensor::from_ids(ids, {17})).item(), expected, 1e-13);
}

// Fast float32 kernels against the reference (std::exp, sums in double) on odd shapes, including
// ignored rows. Tolerances: exp_fast errs < 2 ulp and a row's float SIMD sum by ~cols/8 roundings
// of 2^-24, so each row's log-sum-exp differs by ~1e-6 absolute and so does the mean loss; each
// gradient entry g * softmax differs by ~2e-6 relative, i.e. ~2e-6 * g absolute (g = 1 / count
// or 1); at the target entry, g * (p - 1) cancels, so only the absolute bound holds there.
TEST(CrossEntropy, FastMatchesReferenceOnOddShapes) {
  Rng rng(4);
  for (int64_t rows : {1, 3, 17, 63, 130, 513}) {  // 513 x 130 runs threaded (worth_threads: 64K elements)
    for (int64_t classes : {1, 3, 17, 63, 130}) {
      const Tensor logits = randn({rows, classes}, rng, 3.0);
      std::vector<int32_t> ids;
      for (int64_t r = 0; r < rows; ++r) ids.push_back(r % 5 == 3 ? -100 : static_cast<int32_t>((r * 7) % classes));
      const Tensor targets = Tensor::from_ids(ids, {rows});
      const int64_t count = std::count_if(ids.begin(), ids.end(), [](int32_t t) { return t != -100; });
      for (Reduction reduction : {Reduction::mean, Reduction::sum}) {
        const auto [loss_fast, grad_fast] = loss_and_grad(logits, targets, {.reduction = reduction});
        std::pair<double, Tensor> reference;
        {
          kernels::ReferenceKernelsGuard guard;
          reference = loss_and_grad(logits, targets, {.reduction = reduction});
        }
        const double scale = reduction == Reduction::sum ? static_cast<double>(rows) : 1.0;
        const std::string where = std::to_string(rows) + "x" + std::to_string(classes);
        EXPECT_NEAR(loss_fast, reference.first, 4e-6 * scale) << where;
        const double g = reduction == Reduction::sum ? 1.0 : 1.0 / static_cast<double>(count);
        EXPECT_TRUE(testing::all_close(grad_fast, reference.second, 0.0, 2e-6 * g)) << where;
      }
    }
  }
}

TEST(CrossEntropy, Errors) {
  const Tensor logits = Tensor::zeros({3, 4});
  expect_error([&] { ops::cross_entropy(logits, Tensor::from_ids({0, 1, 7}, {3})); },
               "cross_entropy: target 7 at row 2 is out of range for 4 classes");
  expect_error([&] { ops::cross_entropy(logits, Tensor::from_ids({-1, 1, 2}, {3})); },
               "cross_entropy: target -1 at row 0 is out of range for 4 classes");
  expect_error([&] { ops::cross_entropy(logits, Tensor::from_ids({0, 1}, {2})); },
               "cross_entropy: targets (2,) i32 do not match logits (3, 4) f32 (expected targets of shape (3,))");
  expect_error([&] { ops::cross_entropy(logits, Tensor::zeros({3})); }, "cross_entropy: targets must be i32 class ids");
  expect_error([&] { ops::cross_entropy(Tensor::scalar(1.0), Tensor::from_ids({0}, {})); },
               "cross_entropy: logits need a class axis");
}

}  // namespace
}  // namespace tf
