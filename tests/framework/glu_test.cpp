// Gated linear units (kernels/reference/glu.h): SwiGLU against its definition written here, the fast
// float32 kernel against float64 on odd sizes (forward and backward), the sigmoid's tails, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/ops/activation.h"
#include "framework/random.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

constexpr ops::FeedForwardKind kSwiglu = ops::FeedForwardKind::swiglu;

// y[r, c] = a / (1 + exp(-a)) * b with a = h[r, c], b = h[r, F + c] (Shazeer 2020, eq. 5 without
// the projections), in double.
Tensor naive_swiglu(const Tensor& h) {
  const int64_t F = h.dim(-1) / 2, rows = h.numel() / (2 * F);
  const std::vector<double> v = h.to_vector();
  std::vector<double> y(rows * F);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < F; ++c) {
      const double a = v[r * 2 * F + c], b = v[r * 2 * F + F + c];
      y[r * F + c] = a / (1 + std::exp(-a)) * b;
    }
  Shape shape = h.shape();
  shape[shape.rank() - 1] = F;
  return Tensor::from_vector(y, shape, DType::f64);
}

TEST(Swiglu, MatchesItsDefinition) {
  Rng rng(1);
  const Tensor h = randn({2, 3, 14}, rng, 3.0, DType::f64);
  const Tensor want = naive_swiglu(h);
  EXPECT_TRUE(testing::all_close(ops::glu(h, kSwiglu), want, 1e-14, 1e-14));
  EXPECT_EQ(ops::glu(h, kSwiglu).shape(), (Shape{2, 3, 7}));
  // float32, fast kernel: exp_fast's 0.87 ulp and a few roundings on values up to ~30.
  EXPECT_TRUE(testing::all_close(ops::glu(h.to(DType::f32), kSwiglu), want, 2e-6, 2e-6));
}

// (y, dh) of one run under upstream gradient dy.
std::vector<Tensor> swiglu_with_grad(const Tensor& h0, const Tensor& dy) {
  Tensor h = h0.clone().set_requires_grad();
  const Tensor y = ops::glu(h, kSwiglu);
  tape().backward(y, dy);
  return {y, h.grad()};
}

// The fast kernel against the float64 reference on the same float32 inputs, N(0, 3^2) so gates reach
// both tails. y and dh are products of O(1-10) factors, each within a few ulp: 4e-6 relative.
TEST(Swiglu, FastMatchesFloat64OnOddSizes) {
  Rng rng(2);
  for (int64_t rows : {1, 3, 17, 63, 130})
    for (int64_t width : {1, 3, 17, 63, 130}) {
      SCOPED_TRACE(::testing::Message() << rows << " x 2 x " << width);
      const Tensor h = randn({rows, 2 * width}, rng, 3.0), dy = randn({rows, width}, rng);
      const auto fast = swiglu_with_grad(h, dy);
      const auto exact = swiglu_with_grad(h.to(DType::f64), dy.to(DType::f64));
      EXPECT_TRUE(testing::all_close(fast[0], exact[0], 4e-6, 4e-6)) << "y";
      EXPECT_TRUE(testing::all_close(fast[1], exact[1], 4e-6, 4e-6)) << "dh";
    }
}

// A gate far below 0 shuts the unit (SiLU(a) -> 0, and so do both gradients); far above 0 it is the
// identity on a (y = a b, da = b, db = a); NaN propagates. Both kernels.
TEST(Swiglu, TailsAreExactAndNaNPropagates) {
  for (DType dt : {DType::f64, DType::f32}) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Tensor h = Tensor::from_vector({-1000.0, 100.0, nan, 3.0, 2.0, 1.0}, {1, 6}, dt);  // a | b
    const auto r = swiglu_with_grad(h, Tensor::full({1, 3}, 1.0, dt));
    const std::vector<double> y = r[0].to_vector(), dh = r[1].to_vector();
    EXPECT_EQ(y[0], 0.0) << dtype_name(dt);
    EXPECT_EQ(y[1], 200.0) << dtype_name(dt);
    EXPECT_TRUE(std::isnan(y[2])) << dtype_name(dt);
    EXPECT_EQ(dh[0], 0.0) << dtype_name(dt);    // da of the shut gate
    EXPECT_EQ(dh[3], 0.0) << dtype_name(dt);    // db of the shut gate: SiLU(-1000) = 0 (exp(1000) overflows)
    EXPECT_EQ(dh[1], 2.0) << dtype_name(dt);    // da = b
    EXPECT_EQ(dh[4], 100.0) << dtype_name(dt);  // db = a
  }
}

TEST(Swiglu, ErrorsNameTheShape) {
  testing::expect_error([] { ops::glu(Tensor::zeros({2, 5}), kSwiglu); }, "must be even");
  testing::expect_error([] { ops::glu(Tensor::zeros({2, 4}), ops::FeedForwardKind::gelu); }, "has no gate");
}

}  // namespace
}  // namespace tf
