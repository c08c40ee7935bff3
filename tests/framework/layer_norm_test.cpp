// Layer norm: rows normalised to mean 0 and variance 1, a hand-computed row, the affine part, the
// backward's invariants, the fast float32 kernel against the reference on odd shapes, stability
// far from zero mean, and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "framework/autograd/tape.h"
#include "framework/kernels/mode.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/layer_norm.h"
#include "framework/ops/shape.h"
#include "framework/random.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

// Row means and (biased) variances of a (R, C) tensor, by hand in double.
void row_stats(const Tensor& t, std::vector<double>& mean, std::vector<double>& var) {
  const int64_t c = t.dim(-1), rows = t.numel() / c;
  mean.assign(rows, 0);
  var.assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < c; ++j) mean[r] += t.at(r * c + j) / c;
    for (int64_t j = 0; j < c; ++j) var[r] += (t.at(r * c + j) - mean[r]) * (t.at(r * c + j) - mean[r]) / c;
  }
}

// Rows with different offsets and spreads, (R, C): row r has mean 3r - 4 and standard deviation
// 0.5 + r exactly (random values standardised per row), so |mean| / std <= 8 and no row is
// accidentally near-constant, which would make float32 results ill-conditioned (a rounding error
// in the mean is amplified by rstd). A row of one channel has variance 0 whatever it holds.
Tensor uneven_rows(int64_t rows, int64_t c, Rng& rng, DType dtype) {
  Tensor x = randn({rows, c}, rng, 1.0, DType::f64);
  std::vector<double> mean, var;
  row_stats(x, mean, var);
  double* p = x.data<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const double z = c > 1 ? (p[r * c + j] - mean[r]) / std::sqrt(var[r]) : 0.0;
      p[r * c + j] = 3.0 * r - 4.0 + (0.5 + r) * z;
    }
  return x.to(dtype);
}

TEST(LayerNorm, RowsHaveMeanZeroAndVarianceOne) {
  for (DType dtype : {DType::f64, DType::f32}) {
    for (bool reference : {false, true}) {
      std::optional<kernels::ReferenceKernelsGuard> guard;
      if (reference) guard.emplace();
      Rng rng(1);
      const Tensor x = uneven_rows(5, 64, rng, dtype);
      std::vector<double> mx, vx, my, vy;
      row_stats(x, mx, vx);
      row_stats(ops::layer_norm(x, Tensor(), Tensor(), 0.0), my, vy);
      // float32: a few ulp of the O(1) outputs, summed over 64 channels.
      const double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
      for (int r = 0; r < 5; ++r) {
        EXPECT_NEAR(my[r], 0.0, tol) << dtype_name(dtype) << " row " << r;
        EXPECT_NEAR(vy[r], 1.0, tol) << dtype_name(dtype) << " row " << r;
      }
      // With eps the variance is var / (var + eps), not 1: eps sits inside the square root.
      row_stats(ops::layer_norm(x, Tensor(), Tensor(), 0.5), my, vy);
      for (int r = 0; r < 5; ++r) EXPECT_NEAR(vy[r], vx[r] / (vx[r] + 0.5), tol) << dtype_name(dtype) << " row " << r;
    }
  }
}

TEST(LayerNorm, HandComputedRowWithAffine) {
  // x = (1, 2, 3, 4): mean 2.5, biased variance 1.25.
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {1, 4}, DType::f64);
  const Tensor w = Tensor::from_vector({1, 2, -1, 0.5}, {4}, DType::f64);
  const Tensor b = Tensor::from_vector({0, 1, 0, -2}, {4}, DType::f64);
  const double eps = 1e-5, s = 1 / std::sqrt(1.25 + eps);
  const Tensor y = ops::layer_norm(x, w, b, eps);
  const std::vector<double> expected = {-1.5 * s, 2 * -0.5 * s + 1, -0.5 * s, 0.5 * 1.5 * s - 2};
  EXPECT_TRUE(testing::all_close(y, Tensor::from_vector(expected, {1, 4}, DType::f64), 1e-15, 1e-15));
}

TEST(LayerNorm, AffineIsAppliedAfterNormalising) {
  Rng rng(2);
  const Tensor x = randn({2, 3, 7}, rng), w = randn({7}, rng), b = randn({7}, rng);
  const Tensor plain = ops::layer_norm(x, Tensor(), Tensor());
  const Tensor with_w = ops::layer_norm(x, w, Tensor()), with_b = ops::layer_norm(x, Tensor(), b);
  const Tensor both = ops::layer_norm(x, w, b);
  // Within a few float ulp of the O(1) operands: the kernel may fuse the multiply-add.
  for (int64_t i = 0; i < x.numel(); ++i) {
    EXPECT_NEAR(with_w.at(i), plain.at(i) * w.at(i % 7), 1e-6);
    EXPECT_NEAR(with_b.at(i), plain.at(i) + b.at(i % 7), 1e-6);
    EXPECT_NEAR(both.at(i), plain.at(i) * w.at(i % 7) + b.at(i % 7), 1e-6);
  }
}

TEST(LayerNorm, SingleChannelGivesTheBias) {
  const Tensor x = Tensor::from_vector({3, -7}, {2, 1});
  const Tensor y = ops::layer_norm(x, Tensor::full({1}, 2.0), Tensor::full({1}, 0.25));
  EXPECT_EQ(y.to_vector(), (std::vector<double>{0.25, 0.25}));  // x - mean = 0 in a row of one
}

// With eps = 0 and no weight, dx is orthogonal, per row, to 1 and to xhat: normalisation removes
// exactly those two directions (Note [layer norm backward]; with eps > 0 the xhat direction is
// only damped, by the factor eps / (var + eps)).
TEST(LayerNorm, InputGradientIsOrthogonalToOnesAndXhat) {
  Rng rng(3);
  Tensor x = uneven_rows(4, 9, rng, DType::f64).set_requires_grad();
  const Tensor y = ops::layer_norm(x, Tensor(), Tensor(), 0.0);
  tape().backward(y, randn({4, 9}, rng, 1.0, DType::f64));
  for (int64_t r = 0; r < 4; ++r) {
    double dot_one = 0, dot_xhat = 0;
    for (int64_t j = 0; j < 9; ++j) {
      dot_one += x.grad().at(r * 9 + j);
      dot_xhat += x.grad().at(r * 9 + j) * y.at(r * 9 + j);
    }
    EXPECT_NEAR(dot_one, 0.0, 1e-12) << "row " << r;
    EXPECT_NEAR(dot_xhat, 0.0, 1e-12) << "row " << r;
  }
}

// Runs layer norm forward and backward and returns {y, dx, dweight, dbias}.
std::vector<Tensor> layer_norm_with_grads(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& dy) {
  Tensor x = x0.clone().set_requires_grad();
  Tensor w = w0.defined() ? w0.clone().set_requires_grad() : Tensor();
  Tensor b = b0.defined() ? b0.clone().set_requires_grad() : Tensor();
  const Tensor y = ops::layer_norm(x, w, b);
  tape().backward(y, dy);
  return {y, x.grad(), w.defined() ? w.grad() : Tensor(), b.defined() ? b.grad() : Tensor()};
}

Tensor to_f64(const Tensor& t) { return t.defined() ? t.to(DType::f64) : Tensor(); }

// The fast kernel against the reference kernel in float64 on the same float32 inputs. Tolerances:
// y is an O(1)-to-O(10) value (|weight| * |xhat| + |bias|) from float sums over C channels;
// measured worst error 1.1e-6 at |y| ~ 10 (C = 768), about one ulp, so 2e-6 relative plus 4e-6
// absolute leaves a few ulp of room. dx is rstd times a difference of such terms, so its rounding
// error scales with rstd: 4e-6 * rstd absolute (rstd ~ 2 here, but 1 / sqrt(eps) ~ 316 for one
// channel, where the exact dx is 0 and the float one is rounding residue). dweight and dbias add
// R rows of terms: up to ~R ulp of a term where they cancel toward 0 (130 * 4e-7 ~ 5e-5);
// measured 1.2e-5 at magnitude ~40.
TEST(LayerNorm, FastMatchesReferenceOnOddShapes) {
  Rng rng(4);
  for (int64_t rows : {1, 3, 17, 63, 130}) {
    for (int64_t c : {1, 3, 17, 63, 130, 768}) {
      for (int affine = 0; affine < 4; ++affine) {
        SCOPED_TRACE(::testing::Message() << "(" << rows << ", " << c << ") weight " << (affine & 1) << " bias "
                                          << (affine >> 1));
        const Tensor x = uneven_rows(rows, c, rng, DType::f32), dy = randn({rows, c}, rng);
        const Tensor w = affine & 1 ? randn({c}, rng) : Tensor(), b = affine & 2 ? randn({c}, rng) : Tensor();
        const auto fast = layer_norm_with_grads(x, w, b, dy);
        const auto exact = layer_norm_with_grads(to_f64(x), to_f64(w), to_f64(b), to_f64(dy));
        std::vector<double> mean, var;
        row_stats(x, mean, var);
        double max_rstd = 0;
        for (double v : var) max_rstd = std::max(max_rstd, 1 / std::sqrt(v + 1e-5));
        EXPECT_TRUE(testing::all_close(fast[0], exact[0].to(DType::f32), 2e-6, 4e-6));
        EXPECT_TRUE(testing::all_close(fast[1], exact[1].to(DType::f32), 2e-6, 4e-6 * max_rstd));
        if (w.defined()) {
          EXPECT_TRUE(testing::all_close(fast[2], exact[2].to(DType::f32), 2e-6, 5e-5));
        }
        if (b.defined()) {
          EXPECT_TRUE(testing::all_close(fast[3], exact[3].to(DType::f32), 2e-6, 5e-5));
        }
        // The float32 reference kernel sums serially: its statistics carry up to C ulp of the row's
        // largest |x|, i.e. C * 6e-8 * (1 + |mean| / std) <= C * 5.4e-7 of one standard deviation.
        kernels::ReferenceKernelsGuard reference;
        const auto ref = layer_norm_with_grads(x, w, b, dy);
        const double serial = 8e-6 + 5.4e-7 * static_cast<double>(c);
        EXPECT_TRUE(testing::all_close(fast[0], ref[0], 4e-6, serial));
        EXPECT_TRUE(testing::all_close(fast[1], ref[1], 4e-6, serial * max_rstd));
      }
    }
  }
}

// add_layer_norm against the unfused ops it replaces, ops::add then ops::layer_norm, forward and
// backward, with a gradient reaching h directly as well (the residual stream) and one reaching n.
// Returns {h, n, dx, da, dweight, dbias}.
std::vector<Tensor> residual_norm_with_grads(bool fused, const Tensor& x0, const Tensor& a0, const Tensor& w0,
                                             const Tensor& b0, const Tensor& dh, const Tensor& dn) {
  Tensor x = x0.clone().set_requires_grad(), a = a0.clone().set_requires_grad();
  Tensor w = w0.clone().set_requires_grad(), b = b0.clone().set_requires_grad();
  Tensor h, n;
  if (fused) {
    const ops::ResidualNorm r = ops::add_layer_norm(x, a, w, b);
    h = r.sum, n = r.normed;
  } else {
    h = ops::add(x, a);
    n = ops::layer_norm(h, w, b);
  }
  // loss = sum(h dh) + sum(n dn): backward from a root whose gradient is (dh, dn).
  const Tensor both = ops::concat({h, n}, 0);
  tape().backward(both, ops::concat({dh, dn}, 0).detach());
  return {h, n, x.grad(), a.grad(), w.grad(), b.grad()};
}

// Both run the same float32 kernels' arithmetic up to where the add happens: the fused forward
// adds x + a exactly as ops::add does (one rounding) and then normalises the same row with the
// same code, so h, n, dweight and dbias must agree bit for bit; dx = da differs only in that the
// fused kernel adds dh into the norm's dx in the kernel while the tape adds the two
// contributions in the other order, which rounds identically (float addition commutes). Checked
// on odd shapes, fast float32 and reference kernels, and in float64.
TEST(LayerNorm, AddLayerNormMatchesAddThenLayerNorm) {
  Rng rng(6);
  for (DType dtype : {DType::f32, DType::f64}) {
    for (bool reference : {false, true}) {
      std::optional<kernels::ReferenceKernelsGuard> guard;
      if (reference) guard.emplace();
      for (int64_t rows : {1, 3, 17, 130}) {
        for (int64_t c : {1, 3, 17, 63, 130}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << (reference ? " reference" : " fast") << " ("
                                            << rows << ", " << c << ")");
          const Tensor x = uneven_rows(rows, c, rng, dtype), a = randn({rows, c}, rng, 1.0, dtype);
          const Tensor w = randn({c}, rng, 1.0, dtype), b = randn({c}, rng, 1.0, dtype);
          const Tensor dh = randn({rows, c}, rng, 1.0, dtype), dn = randn({rows, c}, rng, 1.0, dtype);
          const auto fused = residual_norm_with_grads(true, x, a, w, b, dh, dn);
          const auto unfused = residual_norm_with_grads(false, x, a, w, b, dh, dn);
          const char* names[] = {"h", "n", "dx", "da", "dweight", "dbias"};
          for (int i = 0; i < 6; ++i)
            EXPECT_TRUE(testing::all_close(fused[i], unfused[i], 0, 0)) << names[i];
        }
      }
    }
  }
}

// The gradient of a tensor used as both summands is twice dh (the copy for x and the adopted
// tensor for a must not alias), checked against the unfused ops.
TEST(LayerNorm, AddLayerNormOfATensorWithItself) {
  Rng rng(7);
  Tensor x = randn({5, 9}, rng).set_requires_grad();
  const Tensor w = randn({9}, rng), b = randn({9}, rng), dn = randn({5, 9}, rng);
  const ops::ResidualNorm r = ops::add_layer_norm(x, x, w, b);
  tape().backward(ops::concat({r.sum, r.normed}, 0), ops::concat({dn, dn}, 0).detach());
  const Tensor fused = x.grad().clone();
  x.zero_grad();
  const Tensor h = ops::add(x, x);
  tape().backward(ops::concat({h, ops::layer_norm(h, w, b)}, 0), ops::concat({dn, dn}, 0).detach());
  EXPECT_TRUE(testing::all_close(fused, x.grad(), 0, 1e-6));
}

// Rows around 1e4 with unit spread: a one-pass variance, E[x^2] - mean^2 ~ 1e8 - 1e8 in float
// (ulp 8), would lose the variance (~1) entirely; the two-pass kernels keep it. What remains is the
// rounding of the mean itself, ulp(1e4) / 2 ~ 5e-4 of one standard deviation.
TEST(LayerNorm, StableFarFromZeroMean) {
  Rng rng(5);
  Tensor x = randn({8, 256}, rng, 1.0, DType::f64);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] += 1e4;
  const Tensor x32 = x.to(DType::f32);
  const Tensor exact = ops::layer_norm(x32.to(DType::f64), Tensor(), Tensor()).to(DType::f32);
  EXPECT_TRUE(testing::all_close(ops::layer_norm(x32, Tensor(), Tensor()), exact, 0, 2e-3));
  kernels::ReferenceKernelsGuard reference;
  EXPECT_TRUE(testing::all_close(ops::layer_norm(x32, Tensor(), Tensor()), exact, 0, 2e-3));
}

TEST(LayerNorm, ErrorsNameTheShapes) {
  const Tensor x = Tensor::zeros({2, 5});
  testing::expect_error([&] { ops::layer_norm(x, Tensor::zeros({4}), Tensor()); },
                        "layer_norm: weight (4,) f32 does not match the last axis of x (2, 5) f32 (expected (5,))");
  testing::expect_error([&] { ops::layer_norm(x, Tensor(), Tensor::zeros({5, 1})); },
                        "layer_norm: bias (5, 1) f32 does not match");
  EXPECT_THROW(ops::layer_norm(x, Tensor::zeros({5}, DType::f64), Tensor()), Error);  // dtype
  EXPECT_THROW(ops::layer_norm(Tensor::scalar(1.0), Tensor(), Tensor()), Error);       // rank 0
  EXPECT_THROW(ops::layer_norm(Tensor::zeros({3, 0}), Tensor(), Tensor()), Error);      // empty axis
  EXPECT_THROW(ops::layer_norm(x, Tensor(), Tensor(), -1.0), Error);                     // eps
  EXPECT_THROW(ops::layer_norm(Tensor::from_ids({1, 2}, {2}), Tensor(), Tensor()), Error);
}

}  // namespace
}  // namespace tf
