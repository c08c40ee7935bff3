// GELU and ReLU: hand-computed values, the fast float32 kernels against the reference kernels on
// odd shapes, the fused bias_gelu against add + gelu, NaN propagation and error messages.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <numbers>
#include <optional>

#include "framework/autograd/tape.h"
#include "framework/gradcheck.h"
#include "framework/kernels/mode.h"
#include "framework/ops/activation.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/matmul.h"
#include "framework/random.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

using ops::GeluApprox;

// The closed forms of Hendrycks & Gimpel (2016), in double.
double gelu_tanh_truth(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
double gelu_erf_truth(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

TEST(Gelu, HandValuesOnEveryPath) {
  for (DType dtype : {DType::f32, DType::f64}) {
    for (bool reference : {false, true}) {
      std::optional<kernels::ReferenceKernelsGuard> guard;
      if (reference) guard.emplace();
      const Tensor x = Tensor::from_vector({0.0, 1.0, -1.0, 3.0}, {4}, dtype);
      const Tensor t = ops::gelu(x, GeluApprox::tanh), e = ops::gelu(x, GeluApprox::erf);
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (reference ? " reference" : " fast"));
      EXPECT_EQ(t.at(0), 0.0);
      EXPECT_EQ(e.at(0), 0.0);
      for (int i = 1; i < 4; ++i) {
        EXPECT_NEAR(t.at(i), gelu_tanh_truth(x.at(i)), 1e-6);
        EXPECT_NEAR(e.at(i), gelu_erf_truth(x.at(i)), 1e-6);
      }
      // The two forms are different functions: at 1 they differ by about 1.6e-4.
      EXPECT_GT(std::abs(t.at(1) - e.at(1)), 1e-4);
    }
  }
}

TEST(Gelu, DefaultIsTheTanhForm) {
  const Tensor x = Tensor::from_vector({1.0}, {1}, DType::f64);
  EXPECT_EQ(ops::gelu(x).item(), ops::gelu(x, GeluApprox::tanh).item());
}

// Runs gelu or bias_gelu forward and backward (with upstream gradient dy) and returns {y, dx, dbias}.
std::vector<Tensor> gelu_with_grads(const Tensor& x0, const Tensor& bias0, const Tensor& dy, GeluApprox approx) {
  Tensor x = x0.clone().set_requires_grad();
  Tensor bias = bias0.defined() ? bias0.clone().set_requires_grad() : Tensor();
  const Tensor y = bias.defined() ? ops::bias_gelu(x, bias, approx) : ops::gelu(x, approx);
  tape().backward(y, dy);
  return {y, x.grad(), bias.defined() ? bias.grad() : Tensor()};
}

// The fast float32 kernels against the reference kernel evaluated in float64 on the same float32
// inputs, i.e. against the exactly rounded answer. Tolerance: the fast kernels' exp is good to
// ~2 ulp and A&S 7.1.26 to 1.5e-7 absolute in erf; with a division and a few products that is
// under 1e-6 relative (8 ulp); the absolute floor covers outputs near zero (the left tail, where
// the A&S error is absolute: 1.5e-7 |x| / 2 <= 1e-6 for |x| <= 12). Gradients sum two terms that
// can cancel, hence the looser relative bound there.
TEST(Gelu, FastMatchesReferenceOnOddShapes) {
  Rng rng(7);
  for (int64_t rows : {1, 3, 17, 63, 130}) {
    for (int64_t cols : {1, 3, 17, 63, 130, 517}) {  // 130 x 517 is large enough to run threaded
      for (GeluApprox approx : {GeluApprox::tanh, GeluApprox::erf}) {
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "(" << rows << ", " << cols << ") "
                                            << kernels::gelu_approx_name(approx) << (with_bias ? " +bias" : ""));
          const Tensor x = randn({rows, cols}, rng, 3.0), dy = randn({rows, cols}, rng);
          const Tensor bias = with_bias ? randn({cols}, rng) : Tensor();
          const auto fast = gelu_with_grads(x, bias, dy, approx);
          const auto exact = gelu_with_grads(x.to(DType::f64), with_bias ? bias.to(DType::f64) : Tensor(),
                                             dy.to(DType::f64), approx);
          EXPECT_TRUE(testing::all_close(fast[0], exact[0].to(DType::f32), 1e-6, 1e-6));
          EXPECT_TRUE(testing::all_close(fast[1], exact[1].to(DType::f32), 4e-6, 1e-6));
          if (with_bias) {  // a column sum over `rows` float terms: float rounding grows with rows
            EXPECT_TRUE(testing::all_close(fast[2], exact[2].to(DType::f32), 1e-5, 1e-5));
          }
          // And the float32 reference kernel, whose own rounding (1 + tanh u cancels as u -> -inf,
          // 1 - tanh^2 u as |u| grows) costs it a few ulp of 1 times |x| in the tails.
          kernels::ReferenceKernelsGuard reference;
          const auto ref = gelu_with_grads(x, bias, dy, approx);
          EXPECT_TRUE(testing::all_close(fast[0], ref[0], 1e-5, 5e-6));
          EXPECT_TRUE(testing::all_close(fast[1], ref[1], 1e-5, 2e-5));
        }
      }
    }
  }
}

TEST(Gelu, LargeInputsSaturateAndNanPropagates) {
  const Tensor x = Tensor::from_vector({-1e4, -50.0, 50.0, 1e4, std::nan("")}, {5});
  for (GeluApprox approx : {GeluApprox::tanh, GeluApprox::erf}) {
    for (bool reference : {false, true}) {
      std::optional<kernels::ReferenceKernelsGuard> guard;
      if (reference) guard.emplace();
      const Tensor y = ops::gelu(x, approx);
      SCOPED_TRACE(std::string(kernels::gelu_approx_name(approx)) + (reference ? " reference" : " fast"));
      EXPECT_NEAR(y.at(0), 0.0, 1e-30);
      EXPECT_NEAR(y.at(1), 0.0, 1e-30);
      EXPECT_EQ(y.at(2), 50.0);
      EXPECT_EQ(y.at(3), 1e4);
      EXPECT_TRUE(std::isnan(y.at(4)));
    }
  }
}

TEST(BiasGelu, EqualsAddThenGelu) {
  Rng rng(3);
  const Tensor x = randn({2, 3, 5}, rng, 1.0, DType::f64), bias = randn({5}, rng, 1.0, DType::f64);
  const Tensor dy = randn({2, 3, 5}, rng, 1.0, DType::f64);
  for (GeluApprox approx : {GeluApprox::tanh, GeluApprox::erf}) {
    const auto fused = gelu_with_grads(x, bias, dy, approx);
    Tensor x2 = x.clone().set_requires_grad(), b2 = bias.clone().set_requires_grad();
    const Tensor y2 = ops::gelu(ops::add(x2, b2), approx);
    tape().backward(y2, dy);
    EXPECT_TRUE(testing::all_close(fused[0], y2, 1e-15, 1e-15));
    EXPECT_TRUE(testing::all_close(fused[1], x2.grad(), 1e-15, 1e-15));
    EXPECT_TRUE(testing::all_close(fused[2], b2.grad(), 1e-14, 1e-14));
  }
}

// gelu_linear recomputes GELU's output in its backward instead of keeping it: the same kernels
// in the same order, so in float32 on the fast path it must agree bit for bit with gelu then
// linear, forward and every gradient, on odd sizes.
TEST(GeluLinear, EqualsGeluThenLinearBitForBit) {
  for (GeluApprox approx : {GeluApprox::tanh, GeluApprox::erf}) {
    for (const auto& [rows, in, out] : {std::array<int64_t, 3>{1, 1, 1}, {3, 17, 5}, {17, 63, 3}, {130, 68, 17}}) {
      Rng rng(rows + in + out);
      const Tensor h = randn({rows, in}, rng, 2.0), w = randn({out, in}, rng, 0.3), b = randn({out}, rng);
      const Tensor dy = randn({rows, out}, rng);
      Tensor h1 = h.clone().set_requires_grad(), w1 = w.clone().set_requires_grad(), b1 = b.clone().set_requires_grad();
      const Tensor fused = ops::gelu_linear(h1, w1, b1, approx);
      tape().backward(fused, dy);
      Tensor h2 = h.clone().set_requires_grad(), w2 = w.clone().set_requires_grad(), b2 = b.clone().set_requires_grad();
      const Tensor plain = ops::linear(ops::gelu(h2, approx), w2, b2);
      tape().backward(plain, dy);
      EXPECT_EQ(fused.to_vector(), plain.to_vector()) << rows << " x " << in << " -> " << out;
      EXPECT_EQ(h1.grad().to_vector(), h2.grad().to_vector());
      EXPECT_EQ(w1.grad().to_vector(), w2.grad().to_vector());
      EXPECT_EQ(b1.grad().to_vector(), b2.grad().to_vector());
    }
  }
}

TEST(BiasGelu, RejectsABiasThatDoesNotMatchTheLastAxis) {
  const Tensor x = Tensor::zeros({2, 3}), bias = Tensor::zeros({2});
  testing::expect_error([&] { ops::bias_gelu(x, bias); },
                        "bias_gelu: bias (2,) f32 does not match the last axis of x (2, 3) f32");
  EXPECT_THROW(ops::bias_gelu(x, Tensor::zeros({3}, DType::f64)), Error);  // dtype mismatch
}

TEST(Activation, RejectsTokenIds) {
  const Tensor ids = Tensor::from_ids({1, 2}, {2});
  testing::expect_error([&] { ops::gelu(ids); }, "gelu: needs a floating-point tensor (f32 or f64), got (2,) i32");
  EXPECT_THROW(ops::relu(ids), Error);
}

TEST(Relu, ValuesAndGradientIncludingZero) {
  for (bool reference : {false, true}) {
    std::optional<kernels::ReferenceKernelsGuard> guard;
    if (reference) guard.emplace();
    Tensor x = Tensor::from_vector({-2.0, -0.0, 0.0, 0.5, 3.0, std::nan("")}, {6}).set_requires_grad();
    const Tensor y = ops::relu(x);
    const std::vector<double> v = y.to_vector();
    EXPECT_EQ(v[0], 0.0);
    EXPECT_EQ(v[1], 0.0);
    EXPECT_EQ(v[2], 0.0);
    EXPECT_EQ(v[3], 0.5);
    EXPECT_EQ(v[4], 3.0);
    EXPECT_TRUE(std::isnan(v[5]));
    tape().backward(y, Tensor::from_vector({10, 20, 30, 40, 50, 60}, {6}));
    // Gradient 0 at x == 0 (the subgradient PyTorch picks) and wherever x <= 0; NaN is not > 0.
    EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{0, 0, 0, 40, 50, 0}));
  }
}

TEST(Relu, FastMatchesReferenceOnOddSizes) {
  Rng rng(11);
  for (int64_t n : {1, 3, 17, 63, 130, 300001}) {  // the last runs threaded
    const Tensor x = randn({n}, rng), dy = randn({n}, rng);
    Tensor a = x.clone().set_requires_grad(), b = x.clone().set_requires_grad();
    const Tensor ya = ops::relu(a);
    tape().backward(ya, dy);
    kernels::ReferenceKernelsGuard reference;
    const Tensor yb = ops::relu(b);
    tape().backward(yb, dy);
    EXPECT_TRUE(testing::all_close(ya, yb, 0, 0));  // a select: exact
    EXPECT_TRUE(testing::all_close(a.grad(), b.grad(), 0, 0));
  }
}

// The relu op case puts five inputs exactly on the kink: the gradcheck must notice and step off them.
TEST(Relu, GradcheckCaseExercisesTheKink) {
  for (const OpCase& c : op_cases()) {
    if (c.name != "relu") continue;
    const GradcheckReport report = run_op_case(c);
    ASSERT_EQ(report.tensors.size(), 1u);
    EXPECT_TRUE(report.passed()) << report.to_string();
    EXPECT_EQ(report.tensors[0].shifted, 5);
    return;
  }
  FAIL() << "no op case named relu";
}

}  // namespace
}  // namespace tf
