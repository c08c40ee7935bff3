// RMSNorm (ops::layer_norm with kernels::NormKind::rms; Zhang & Sennrich 2019): naive loops written
// here from the paper's formula, the invariants the math guarantees (unit root mean square, scale
// invariance, a gradient orthogonal to x), the fast float32 kernel against float64 on odd shapes,
// and the fused residual form against add then norm.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/layer_norm.h"
#include "framework/ops/shape.h"
#include "framework/random.h"
#include "support/compare.h"

namespace tf {
namespace {

constexpr kernels::NormKind kRms = kernels::NormKind::rms;

// y[r, c] = x[r, c] / sqrt(sum_c x^2 / C + eps) * weight[c], in double.
Tensor naive_rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  const int64_t C = x.dim(-1), rows = x.numel() / C;
  const std::vector<double> v = x.to_vector(), w = weight.to_vector();
  std::vector<double> y(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sq = 0;
    for (int64_t c = 0; c < C; ++c) sq += v[r * C + c] * v[r * C + c];
    const double rms = std::sqrt(sq / C + eps);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = v[r * C + c] / rms * w[c];
  }
  return Tensor::from_vector(y, x.shape(), DType::f64);
}

TEST(RmsNorm, MatchesThePapersFormula) {
  Rng rng(1);
  for (const Shape& shape : {Shape{1, 1}, Shape{3, 5}, Shape{2, 3, 17}, Shape{63, 130}}) {
    const Tensor x = randn(shape, rng, 2.0, DType::f64), w = randn({shape[shape.rank() - 1]}, rng, 1.0, DType::f64);
    const Tensor want = naive_rms_norm(x, w, 1e-5);
    EXPECT_TRUE(testing::all_close(ops::layer_norm(x, w, Tensor(), 1e-5, kRms), want, 1e-13, 1e-13)) << shape;
    // float32 on the fast kernel: a few ulp of the O(1) outputs.
    EXPECT_TRUE(testing::all_close(ops::layer_norm(x.to(DType::f32), w.to(DType::f32), Tensor(), 1e-5, kRms), want,
                                   2e-6, 4e-6))
        << shape;
  }
}

// Without eps every row comes out with root mean square 1, whatever its mean (RMSNorm does not
// centre: a row of equal values gives all ones, not zeros), and scaling x by any s > 0 changes nothing.
TEST(RmsNorm, RowsHaveUnitRootMeanSquareAndScaleDropsOut) {
  for (DType dt : {DType::f64, DType::f32}) {
    Rng rng(2);
    Tensor x = randn({4, 33}, rng, 1.0, dt);
    x = ops::add(x, Tensor::full({4, 33}, 3.0, dt));  // far from zero mean
    const Tensor y = ops::layer_norm(x, Tensor(), Tensor(), 0.0, kRms);
    const std::vector<double> v = y.to_vector();
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    for (int r = 0; r < 4; ++r) {
      double sq = 0;
      for (int c = 0; c < 33; ++c) sq += v[r * 33 + c] * v[r * 33 + c];
      EXPECT_NEAR(sq / 33, 1.0, tol) << dtype_name(dt) << " row " << r;
    }
    const Tensor scaled = ops::layer_norm(ops::scale(x, 7.5), Tensor(), Tensor(), 0.0, kRms);
    EXPECT_TRUE(testing::all_close(scaled, y, tol, tol)) << dtype_name(dt);
    const Tensor constant = ops::layer_norm(Tensor::full({1, 5}, -2.0, dt), Tensor(), Tensor(), 0.0, kRms);
    EXPECT_TRUE(testing::all_close(constant, Tensor::full({1, 5}, -1.0, DType::f64), tol, tol)) << dtype_name(dt);
  }
}

// Scale invariance y(s x) = y(x) means the directional derivative along x is 0: sum_c dx_c x_c = 0
// for every row and any upstream gradient (eps = 0).
TEST(RmsNorm, InputGradientIsOrthogonalToTheInput) {
  Rng rng(3);
  Tensor x = randn({5, 17}, rng, 1.0, DType::f64).set_requires_grad();
  const Tensor w = randn({17}, rng, 1.0, DType::f64);
  tape().backward(ops::layer_norm(x, w, Tensor(), 0.0, kRms), randn({5, 17}, rng, 1.0, DType::f64));
  const std::vector<double> dx = x.grad().to_vector(), xv = x.to_vector();
  for (int r = 0; r < 5; ++r) {
    double dot = 0, norm = 0;
    for (int c = 0; c < 17; ++c) dot += dx[r * 17 + c] * xv[r * 17 + c], norm += dx[r * 17 + c] * dx[r * 17 + c];
    EXPECT_GT(norm, 1e-6) << "row " << r;  // a zero gradient would pass trivially
    EXPECT_NEAR(dot, 0.0, 1e-12) << "row " << r;
  }
}

// y, dx, dweight of one run under upstream gradient dy; optionally through the fused residual form
// (h = x + a, normed with dh reaching h too).
std::vector<Tensor> run_with_grads(const Tensor& x0, const Tensor& w0, const Tensor& dy, bool fused) {
  Tensor x = x0.clone().set_requires_grad(), w = w0.clone().set_requires_grad();
  Tensor y;
  if (fused) {
    const ops::ResidualNorm h = ops::add_layer_norm(x, x, w, Tensor(), 1e-5, kRms);
    y = ops::concat({h.sum, h.normed}, 0);
    tape().backward(y, ops::concat({dy, dy}, 0).detach());
  } else {
    y = ops::layer_norm(x, w, Tensor(), 1e-5, kRms);
    tape().backward(y, dy);
  }
  return {y, x.grad(), w.grad()};
}

// Tolerances as for layer norm's fast kernel (layer_norm_test.cpp): y is O(1) from float sums over
// C channels, gradients sum R rows of such terms.
TEST(RmsNorm, FastMatchesFloat64OnOddShapes) {
  Rng rng(4);
  for (bool fused : {false, true})
    for (int64_t rows : {1, 3, 17, 63, 130})
      for (int64_t c : {1, 3, 17, 63, 130, 768}) {
        SCOPED_TRACE(::testing::Message() << (fused ? "add_layer_norm " : "layer_norm ") << rows << " x " << c);
        const Tensor x = randn({rows, c}, rng), w = randn({c}, rng), dy = randn({rows, c}, rng);
        const auto fast = run_with_grads(x, w, dy, fused);
        const auto exact = run_with_grads(x.to(DType::f64), w.to(DType::f64), dy.to(DType::f64), fused);
        EXPECT_TRUE(testing::all_close(fast[0], exact[0].to(DType::f32), 2e-6, 4e-6)) << "y";
        EXPECT_TRUE(testing::all_close(fast[1], exact[1].to(DType::f32), 2e-5, 2e-5)) << "dx";
        EXPECT_TRUE(testing::all_close(fast[2], exact[2].to(DType::f32), 2e-5, 5e-5)) << "dweight";
      }
}

}  // namespace
}  // namespace tf
