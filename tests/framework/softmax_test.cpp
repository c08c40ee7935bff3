// softmax and log_softmax: hand-computed values, invariants (shift invariance, rows sum to 1,
// gradient rows sum to 0), masked -inf entries, exp_fast's accuracy, and the fast float32 kernels
// against the reference on odd shapes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "framework/autograd/tape.h"
#include "framework/random.h"
#include "framework/kernels/cpu/exp.h"
#include "framework/kernels/mode.h"
#include "framework/ops/softmax.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

using Op = Tensor (*)(const Tensor&);

// Forward value and dx for a given upstream gradient dy, through the tape.
std::pair<Tensor, Tensor> forward_backward(Op op, const Tensor& input, const Tensor& dy) {
  Tensor x = input.clone().set_requires_grad();
  const Tensor y = op(x);
  tape().backward(y, dy);
  return {y.detach(), x.grad()};
}

TEST(Softmax, HandValues) {
  // softmax([0, ln 2]) = [1, 2] / 3; log_softmax = [ln(1/3), ln(2/3)].
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor x = Tensor::from_vector({0.0, std::log(2.0)}, {2}, dtype);
    const double tol = dtype == DType::f32 ? 1e-7 : 1e-15;
    const auto p = ops::softmax(x).to_vector(), lp = ops::log_softmax(x).to_vector();
    EXPECT_NEAR(p[0], 1.0 / 3, tol);
    EXPECT_NEAR(p[1], 2.0 / 3, tol);
    EXPECT_NEAR(lp[0], std::log(1.0 / 3), tol);
    EXPECT_NEAR(lp[1], std::log(2.0 / 3), tol);
  }
  // A single column is certain: probability 1, log-probability 0.
  EXPECT_EQ(ops::softmax(Tensor::from_vector({-3, 5}, {2, 1})).to_vector(), (std::vector<double>{1, 1}));
  EXPECT_EQ(ops::log_softmax(Tensor::from_vector({-3, 5}, {2, 1})).to_vector(), (std::vector<double>{0, 0}));
}

TEST(Softmax, HandGradient) {
  // y = softmax([0, ln 2]) = [1/3, 2/3], dy = [1, 0]: dx = y * (dy - y . dy) = [1/3 * 2/3, 2/3 * -1/3].
  const Tensor x = Tensor::from_vector({0.0, std::log(2.0)}, {2}, DType::f64);
  const auto [y, dx] = forward_backward(ops::softmax, x, Tensor::from_vector({1, 0}, {2}, DType::f64));
  EXPECT_NEAR(dx.at(0), 2.0 / 9, 1e-15);
  EXPECT_NEAR(dx.at(1), -2.0 / 9, 1e-15);
  // log_softmax: dx = dy - softmax * sum(dy) = [1 - 1/3, -2/3].
  const auto [ly, ldx] = forward_backward(ops::log_softmax, x, Tensor::from_vector({1, 0}, {2}, DType::f64));
  EXPECT_NEAR(ldx.at(0), 2.0 / 3, 1e-15);
  EXPECT_NEAR(ldx.at(1), -2.0 / 3, 1e-15);
}

TEST(Softmax, LargeLogitsAndShiftInvariance) {
  // exp(1000) overflows float; the max subtraction makes softmax(x + c) = softmax(x) exactly
  // representable here.
  const Tensor x = Tensor::from_vector({1000, 1001, 999}, {1, 3});
  const Tensor shifted = Tensor::from_vector({1, 2, 0}, {1, 3});
  EXPECT_TRUE(testing::all_close(ops::softmax(x), ops::softmax(shifted), 1e-6));
  EXPECT_TRUE(testing::all_close(ops::log_softmax(x), ops::log_softmax(shifted), 1e-6, 1e-6));
  for (double v : ops::softmax(Tensor::from_vector({-1e30, 0, 1e30}, {3})).to_vector()) EXPECT_TRUE(std::isfinite(v));
}

TEST(Softmax, MaskedEntriesGetExactlyZero) {
  // Attention masks fill scores with -inf: those keys must get probability exactly 0.
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor scores = Tensor::from_vector({0.5, -inf, 1.5, -inf}, {2, 2});
  for (bool reference : {false, true}) {
    std::unique_ptr<kernels::ReferenceKernelsGuard> guard;
    if (reference) guard = std::make_unique<kernels::ReferenceKernelsGuard>();
    EXPECT_EQ(ops::softmax(scores).to_vector(), (std::vector<double>{1, 0, 1, 0})) << "reference " << reference;
    EXPECT_EQ(ops::log_softmax(scores).at(1), -inf);
  }
}

TEST(Softmax, RankZeroIsRefused) {
  testing::expect_error([] { ops::softmax(Tensor::scalar(1.0)); }, "softmax: needs at least one axis, got () f32");
}

TEST(ExpFast, WithinTwoUlpOfExp) {
  // Every 97th float in [-87, 88], walked through the bit patterns (negative floats' patterns
  // grow with the magnitude): relative error against double exp.
  double worst = 0;
  auto check = [&](uint32_t first, uint32_t last) {
    for (uint64_t bits = first; bits <= last; bits += 97) {
      const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
      const double exact = std::exp(static_cast<double>(x));
      worst = std::max(worst, std::abs(kernels::exp_fast(x) - exact) / exact);
    }
  };
  check(std::bit_cast<uint32_t>(0.0f), std::bit_cast<uint32_t>(88.0f));
  check(std::bit_cast<uint32_t>(-0.0f), std::bit_cast<uint32_t>(-87.0f));
  EXPECT_LT(worst, 1.5 * 0x1p-24);  // measured 1.24 * 2^-24 over every float (Note [fast exp])
  EXPECT_EQ(kernels::exp_fast(0.0f), 1.0f);
  EXPECT_EQ(kernels::exp_fast(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(kernels::exp_fast(-100.0f), 0.0f);
  EXPECT_EQ(kernels::exp_fast(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(kernels::exp_fast(std::numeric_limits<float>::quiet_NaN())));
}

// Fast float32 kernels against the reference (sums in double, std::exp) on odd shapes.
// Tolerances: exp_fast errs by < 2 ulp per element and the fast row sums are float SIMD
// reductions, whose error is at most ~cols/8 roundings of 2^-24 relative to the sum (about 1e-6
// for 130 columns); so probabilities agree to ~2e-6 relative, log-probabilities to ~2e-6 absolute
// (an error in log(sum) is absolute), and gradients, which subtract a dot product of such terms,
// to ~2e-6 of the upstream gradient's scale (here ~1).
TEST(Softmax, FastMatchesReferenceOnOddShapes) {
  Rng rng(11);
  for (int64_t rows : {1, 3, 17, 63, 130, 513}) {  // 513 x 130 runs threaded (worth_threads: 64K elements)
    for (int64_t cols : {1, 3, 17, 63, 130}) {
      const Tensor x = randn({rows, cols}, rng, 3.0), dy = randn({rows, cols}, rng);
      for (Op op : {Op(ops::softmax), Op(ops::log_softmax)}) {
        const bool is_softmax = op == Op(ops::softmax);
        const auto [y_fast, dx_fast] = forward_backward(op, x, dy);
        std::pair<Tensor, Tensor> reference;
        {
          kernels::ReferenceKernelsGuard guard;
          reference = forward_backward(op, x, dy);
        }
        const std::string where = std::string(is_softmax ? "softmax " : "log_softmax ") + std::to_string(rows) +
                                  "x" + std::to_string(cols);
        EXPECT_TRUE(testing::all_close(y_fast, reference.first, 5e-6, is_softmax ? 1e-30 : 5e-6)) << where;
        EXPECT_TRUE(testing::all_close(dx_fast, reference.second, 1e-5, 5e-6)) << where;
      }
    }
  }
}

TEST(Softmax, Invariants) {
  // Rows of softmax sum to 1, and rows of its gradient sum to 0 (the outputs are tied by sum = 1).
  Rng rng(5);
  const Tensor x = randn({63, 130}, rng, 2.0), dy = randn({63, 130}, rng);
  const auto [y, dx] = forward_backward(ops::softmax, x, dy);
  for (int64_t r = 0; r < 63; ++r) {
    double total = 0, grad_total = 0;
    for (int64_t j = 0; j < 130; ++j) total += y.at(r * 130 + j), grad_total += dx.at(r * 130 + j);
    EXPECT_NEAR(total, 1.0, 2e-6);
    EXPECT_NEAR(grad_total, 0.0, 2e-6);
  }
}

}  // namespace
}  // namespace tf
