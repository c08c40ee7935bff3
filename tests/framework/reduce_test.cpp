// sum and mean: hand-computed values, gradients, float32 against float64 on odd shapes, and the
// errors a caller can provoke (bad, repeated or missing axes).
#include <gtest/gtest.h>

#include <cmath>

#include "framework/autograd/tape.h"
#include "framework/random.h"
#include "framework/ops/reduce.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

// [[1, 2, 3], [4, 5, 6]]
Tensor two_by_three(DType dtype = DType::f32) { return Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, dtype); }

using testing::expect_error;

TEST(Reduce, SumAndMeanOfEverythingAreScalars) {
  const Tensor s = ops::sum(two_by_three()), m = ops::mean(two_by_three());
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item(), 21.0);
  EXPECT_EQ(m.item(), 3.5);
}

TEST(Reduce, SumOverOneAxis) {
  EXPECT_EQ(ops::sum(two_by_three(), {0}).to_vector(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(ops::sum(two_by_three(), {-1}).to_vector(), (std::vector<double>{6, 15}));
  EXPECT_EQ(ops::sum(two_by_three(), {1}).shape(), Shape{2});
  EXPECT_EQ(ops::sum(two_by_three(), {1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(ops::mean(two_by_three(), {0}, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(ops::mean(two_by_three(), {0}, true).to_vector(), (std::vector<double>{2.5, 3.5, 4.5}));
}

TEST(Reduce, NonAdjacentAxes) {
  // x[i, j, k] = 100 i + 10 j + k over (2, 3, 4); summing axes 0 and 2 leaves, for each j,
  // sum_i sum_k (100 i + 10 j + k) = 4 * 100 * 1 + 8 * 10 j + 2 * 6 = 412 + 80 j.
  std::vector<double> values;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) values.push_back(100 * i + 10 * j + k);
  const Tensor x = Tensor::from_vector(values, {2, 3, 4}, DType::f64);
  EXPECT_EQ(ops::sum(x, {0, 2}).to_vector(), (std::vector<double>{412, 492, 572}));
  EXPECT_EQ(ops::sum(x, {-1, -3}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(ops::mean(x, {2, 0}).to_vector(), (std::vector<double>{412 / 8.0, 492 / 8.0, 572 / 8.0}));
}

TEST(Reduce, RankZeroAndEmpty) {
  EXPECT_EQ(ops::sum(Tensor::scalar(2.5)).item(), 2.5);
  EXPECT_EQ(ops::sum(Tensor::zeros({3, 0})).item(), 0.0);
  EXPECT_EQ(ops::sum(Tensor::zeros({3, 0}), {1}).to_vector(), (std::vector<double>{0, 0, 0}));
}

TEST(Reduce, GradientsBroadcastBack) {
  Tensor x = two_by_three(DType::f64).set_requires_grad();
  backward(ops::mean(x));
  EXPECT_EQ(x.grad().to_vector(), std::vector<double>(6, 1.0 / 6));

  x.zero_grad();
  // d/dx sum_j (w_j * sum_i x[i, j]) = w_j for every i.
  const Tensor w = Tensor::from_vector({1, 2, 3}, {3}, DType::f64);
  Tensor col = ops::sum(x, {0});
  tape().backward(col, w);
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
}

// The float32 result rounds each partial sum once (a multi-axis reduction runs one block per
// run of axes, rounding between them) and the result once; the inputs are exact (drawn in float32,
// widened to float64). Each rounding errs by at most 2^-24 times a partial sum no larger than the
// sum of |x| over that output's elements, so |f32 - f64| <= 2^-23 * reduce(|x|), elementwise.
::testing::AssertionResult within_rounding(const Tensor& got, const Tensor& want, const Tensor& abs_reduced) {
  const auto g = got.to_vector(), w = want.to_vector(), bound = abs_reduced.to_vector();
  if (got.shape() != want.shape()) return ::testing::AssertionFailure() << got.shape() << " vs " << want.shape();
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= 0x1p-23 * bound[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " vs " << w[i] << ", bound "
                                           << 0x1p-23 * bound[i];
  return ::testing::AssertionSuccess();
}

TEST(Reduce, Float32MatchesFloat64OnOddShapes) {
  Rng rng(7);
  for (int64_t rows : {1, 3, 17, 63, 130}) {
    for (int64_t cols : {1, 3, 17, 63, 130}) {
      const Tensor x32 = randn({rows, 2, cols}, rng);
      const Tensor x64 = x32.to(DType::f64);
      Tensor abs64 = x64.clone();
      for (int64_t i = 0; i < abs64.numel(); ++i) abs64.data<double>()[i] = std::abs(abs64.data<double>()[i]);
      for (const std::vector<int>& axes : {std::vector<int>{-1}, {0}, {0, 2}, {1}, {0, 1, 2}}) {
        const std::string where = std::to_string(rows) + "x2x" + std::to_string(cols) + ", " +
                                  std::to_string(axes.size()) + " axes from " + std::to_string(axes[0]);
        EXPECT_TRUE(within_rounding(ops::sum(x32, axes), ops::sum(x64, axes), ops::sum(abs64, axes))) << where;
        EXPECT_TRUE(within_rounding(ops::mean(x32, axes, true), ops::mean(x64, axes, true),
                                    ops::mean(abs64, axes, true)))
            << where;
      }
    }
  }
}

// The fast float32 column sum (kernels/cpu/reduce.h) accumulates in float in row order: each
// addition rounds once, so |f32 - f64| <= rows * 2^-24 * sum_r |x| per column (Higham, eq. 4.4,
// to first order); checked on odd sizes, with the threaded path (rows * cols > 2^15) included.
TEST(Reduce, BiasGradientFastMatchesFloat64OnOddShapes) {
  Rng rng(11);
  for (int64_t rows : {1, 3, 17, 63, 130, 2048}) {
    for (int64_t cols : {1, 3, 17, 63, 65, 130}) {
      const Tensor g32 = randn({rows, cols}, rng);
      const Tensor g64 = g32.to(DType::f64);
      const std::vector<double> got = ops::bias_gradient(g32, rows, cols).to_vector();
      const std::vector<double> want = ops::bias_gradient(g64, rows, cols).to_vector();
      const std::vector<double> want_by_sum = ops::sum(g64, {0}).to_vector();
      ASSERT_EQ(got.size(), static_cast<size_t>(cols));
      for (int64_t c = 0; c < cols; ++c) {
        double abs_sum = 0;
        for (int64_t r = 0; r < rows; ++r) abs_sum += std::abs(g64.data<double>()[r * cols + c]);
        EXPECT_EQ(want[c], want_by_sum[c]);  // the float64 path is the reference reduction itself
        EXPECT_LE(std::abs(got[c] - want[c]), static_cast<double>(rows) * 0x1p-24 * abs_sum)
            << rows << " x " << cols << ", column " << c;
      }
    }
  }
}

TEST(Reduce, LongFloat32SumDoesNotDrift) {
  // 2^20 copies of 0.1f: a float accumulator would drift by ~1e-3 relative; the double one is
  // exact to float rounding.
  const Tensor x = Tensor::full({1 << 20}, 0.1);
  const double exact = static_cast<double>(0.1f) * (1 << 20);
  EXPECT_NEAR(ops::sum(x).item(), exact, exact * 1.2e-7);
  EXPECT_NEAR(ops::mean(x).item(), static_cast<double>(0.1f), 0.1 * 1.2e-7);
}

TEST(Reduce, Errors) {
  expect_error([] { ops::sum(two_by_three(), {2}); }, "sum: axis 2 out of range for shape (2, 3)");
  expect_error([] { ops::mean(two_by_three(), {-3}); }, "mean: axis -3 out of range for shape (2, 3)");
  expect_error([] { ops::sum(two_by_three(), {1, -1}); }, "sum: axis -1 given twice for shape (2, 3)");
  expect_error([] { ops::sum(two_by_three(), {}); }, "sum: no axes given");
  expect_error([] { ops::mean(Tensor::zeros({2, 0}), {1}); }, "mean: cannot average over zero elements");
}

}  // namespace
}  // namespace tf
