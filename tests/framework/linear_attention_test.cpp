// Linear attention: the kernel product against hand-computed values, the chunked kernel against the
// pairwise reference on odd sizes and across chunk boundaries, the op against the paper's formula
// written out here, the parallel form against the recurrent one (decoding), and float32 against
// float64 forward and backward.
#include "framework/ops/linear_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/linear_attention.h"
#include "framework/kernels/mode.h"
#include "framework/kernels/reference/linear_attention.h"
#include "framework/random.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

using kernels::ProductOrder;
using ops::linear_attention;
using testing::all_close;

TEST(KernelProduct, HandComputedValues) {
  // T = 2, A = C = 1: a = (1, 2), b = (3, 4), c = (5, 6).
  const double a[] = {1, 2}, b[] = {3, 4}, c[] = {5, 6};
  double out[2];
  kernels::kernel_product_reference<double>({ProductOrder::causal, 2, 1, 1, a, b, c, out});
  EXPECT_EQ(out[0], 1 * 3 * 5);                  // j = 0
  EXPECT_EQ(out[1], 2 * 3 * 5 + 2 * 4 * 6);      // j = 0, 1
  kernels::kernel_product_reference<double>({ProductOrder::anticausal, 2, 1, 1, a, b, c, out});
  EXPECT_EQ(out[0], 1 * 3 * 5 + 1 * 4 * 6);      // j = 0, 1
  EXPECT_EQ(out[1], 2 * 4 * 6);                  // j = 1
  kernels::kernel_product_reference<double>({ProductOrder::full, 2, 1, 1, a, b, c, out});
  EXPECT_EQ(out[0], 39);
  EXPECT_EQ(out[1], 78);
}

template <class T>
std::vector<T> random_vector(Rng& rng, int64_t n) {
  const std::vector<double> v = randn({n}, rng, 1.0, DType::f64).to_vector();
  return std::vector<T>(v.begin(), v.end());
}

TEST(KernelProduct, ChunkedEqualsReferenceOnOddSizes) {
  Rng rng(7);
  for (ProductOrder order : {ProductOrder::causal, ProductOrder::anticausal, ProductOrder::full})
    for (int64_t seq_len : {1, 3, 17, 63, 64, 65, 130})
      for (auto [A, C] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {5, 3}, {33, 17}}) {
        const auto a = random_vector<double>(rng, seq_len * A), b = random_vector<double>(rng, seq_len * A);
        const auto c = random_vector<double>(rng, seq_len * C);
        std::vector<double> expected(seq_len * C), got(seq_len * C);
        kernels::kernel_product_reference<double>({order, seq_len, A, C, a.data(), b.data(), c.data(), expected.data()});
        kernels::kernel_product_chunked<double>({order, seq_len, A, C, a.data(), b.data(), c.data(), got.data()});
        for (int64_t i = 0; i < seq_len * C; ++i)
          ASSERT_NEAR(got[i], expected[i], 1e-12 * (1 + std::abs(expected[i])))
              << "order " << static_cast<int>(order) << " T " << seq_len << " A " << A << " C " << C << " at " << i;
        // float32: the same sums, rounded differently
        const std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), cf(c.begin(), c.end());
        std::vector<float> gotf(seq_len * C);
        kernels::kernel_product_chunked<float>({order, seq_len, A, C, af.data(), bf.data(), cf.data(), gotf.data()});
        for (int64_t i = 0; i < seq_len * C; ++i)
          ASSERT_NEAR(gotf[i], expected[i], 1e-4 * std::sqrt(static_cast<double>(seq_len * A)) * (1 + std::abs(expected[i])));
      }
}

// The paper's eq. 6-7 written out, one query at a time, in double.
Tensor linear_attention_by_formula(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double eps) {
  const int64_t BH = q.dim(0) * q.dim(1), T = q.dim(2), D = q.dim(3), Dv = v.dim(3);
  const std::vector<double> qv = q.to_vector(), kv = k.to_vector(), vv = v.to_vector();
  auto phi = [](double x) { return x > 0 ? x + 1 : std::exp(x); };
  std::vector<double> out(BH * T * Dv);
  for (int64_t s = 0; s < BH; ++s)
    for (int64_t i = 0; i < T; ++i) {
      double den = 0;
      std::vector<double> num(Dv, 0.0);
      for (int64_t j = 0; j < (causal ? i + 1 : T); ++j) {
        double w = 0;
        for (int64_t d = 0; d < D; ++d) w += phi(qv[(s * T + i) * D + d]) * phi(kv[(s * T + j) * D + d]);
        den += w;
        for (int64_t e = 0; e < Dv; ++e) num[e] += w * vv[(s * T + j) * Dv + e];
      }
      for (int64_t e = 0; e < Dv; ++e) out[(s * T + i) * Dv + e] = num[e] / (den + eps);
    }
  return Tensor::from_vector(out, v.shape(), DType::f64);
}

TEST(LinearAttention, EqualsThePapersFormula) {
  Rng rng(11);
  for (bool causal : {true, false}) {
    const Tensor q = randn({2, 3, 17, 5}, rng, 1.0, DType::f64), k = randn({2, 3, 17, 5}, rng, 1.0, DType::f64);
    const Tensor v = randn({2, 3, 17, 3}, rng, 1.0, DType::f64);
    const Tensor expected = linear_attention_by_formula(q, k, v, causal, 1e-6);
    EXPECT_TRUE(all_close(linear_attention(q, k, v, {.causal = causal}), expected, 1e-13, 1e-13)) << causal;
    // float32 takes the chunked kernel
    const Tensor got = linear_attention(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), {.causal = causal});
    EXPECT_TRUE(all_close(got.to(DType::f64), expected, 1e-5, 1e-5)) << causal;
  }
}

TEST(LinearAttention, ConstantValuesComeBackUnchanged) {
  // Every output is a weighted mean of the values (positive weights summing to den / (den + eps)).
  Rng rng(3);
  const Tensor q = randn({1, 2, 9, 4}, rng, 1.0, DType::f64), k = randn({1, 2, 9, 4}, rng, 1.0, DType::f64);
  const Tensor v = Tensor::full({1, 2, 9, 2}, 0.75, DType::f64);
  EXPECT_TRUE(all_close(linear_attention(q, k, v, {.eps = 0.0}), v, 1e-14, 0));
}

// Positions [begin, end) of axis 2 of (B, H, T, X), as a new tensor.
Tensor positions(const Tensor& x, int64_t begin, int64_t end) {
  const int64_t outer = x.dim(0) * x.dim(1), T = x.dim(2), X = x.dim(3);
  const std::vector<double> all = x.to_vector();
  std::vector<double> part;
  for (int64_t s = 0; s < outer; ++s)
    part.insert(part.end(), all.begin() + (s * T + begin) * X, all.begin() + (s * T + end) * X);
  return Tensor::from_vector(part, {x.dim(0), x.dim(1), end - begin, X}, x.dtype());
}

TEST(LinearAttention, ParallelFormEqualsTheRecurrentForm) {
  // Decoding one position at a time (a (D, Dv + 1) state per head, O(1) per token) and in chunks of 5
  // gives the rows of one causal pass over the whole sequence (float64, 1e-12), across the chunked
  // kernel's 64-position chunks.
  Rng rng(5);
  const int64_t T = 70;
  const Tensor q = randn({2, 2, T, 4}, rng, 1.0, DType::f64), k = randn({2, 2, T, 4}, rng, 1.0, DType::f64);
  const Tensor v = randn({2, 2, T, 3}, rng, 1.0, DType::f64);
  const Tensor whole = linear_attention(q, k, v);
  for (int64_t step : {1, 5}) {
    Tensor state = ops::linear_attention_state(q, v);
    EXPECT_EQ(state.shape(), Shape({2, 2, 4, 4}));
    for (int64_t t = 0; t < T; t += step) {
      const int64_t end = std::min(T, t + step);
      const Tensor out = ops::linear_attention_append(positions(q, t, end), positions(k, t, end),
                                                      positions(v, t, end), state);
      ASSERT_TRUE(all_close(out, positions(whole, t, end), 1e-12, 1e-12)) << "step " << step << " at " << t;
    }
  }
}

TEST(LinearAttention, Float32GradientsMatchFloat64) {
  // The float32 backward (chunked, three products) against the float64 one (pairwise reference),
  // for a sequence of three chunks; the float64 backward itself is gradient-checked (op cases).
  Rng rng(9);
  for (bool causal : {true, false}) {
    const Tensor q = randn({1, 2, 150, 8}, rng, 1.0, DType::f64), k = randn({1, 2, 150, 8}, rng, 1.0, DType::f64);
    const Tensor v = randn({1, 2, 150, 6}, rng, 1.0, DType::f64), w = randn({1, 2, 150, 6}, rng, 1.0, DType::f64);
    std::vector<Tensor> grads[2];
    for (DType dtype : {DType::f64, DType::f32}) {
      Tensor qq = q.to(dtype).clone().set_requires_grad(), kk = k.to(dtype).clone().set_requires_grad();
      Tensor vv = v.to(dtype).clone().set_requires_grad();
      tape().backward(linear_attention(qq, kk, vv, {.causal = causal}), w.to(dtype));
      grads[dtype == DType::f32] = {qq.grad().to(DType::f64), kk.grad().to(DType::f64), vv.grad().to(DType::f64)};
    }
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(all_close(grads[1][i], grads[0][i], 1e-4, 1e-5)) << "input " << i << " causal " << causal;
  }
}

TEST(LinearAttention, RefusesMismatchedShapes) {
  const Tensor q = Tensor::zeros({1, 2, 3, 4}), v = Tensor::zeros({1, 2, 3, 5});
  testing::expect_error([&] { linear_attention(q, Tensor::zeros({1, 2, 3, 2}), v); },
                        "keys must be shaped like the queries");
  testing::expect_error([&] { linear_attention(q, q, Tensor::zeros({1, 2, 4, 5})); }, "values must be (B, H, T, Dv)");
  Tensor state = Tensor::zeros({1, 2, 4, 5});
  testing::expect_error([&] { ops::linear_attention_append(q, q, v, state); }, "the state must be (B, H, D, Dv + 1)");
}

}  // namespace
}  // namespace tf
