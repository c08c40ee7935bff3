// The selective scan and the causal convolution of a Mamba block: hand-computed values, the scan
// against the recurrence written out step by step here (also at a length where the channels split
// into blocks of one), float32 against float64 on odd lengths, decoding in chunks against the whole
// sequence, gradients the same at any thread count, and the refusals.
#include "framework/ops/selective_scan.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/ops/causal_conv.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/pointwise.h"
#include "framework/ops/shape.h"
#include "framework/random.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

using testing::all_close;

// h_t = exp(delta_t A) h_{t-1} + delta_t B_t x_t, y_t = C_t . h_t + D x_t, one (b, e) at a time.
Tensor recurrence(const Tensor& x, const Tensor& delta, const Tensor& a, const Tensor& b, const Tensor& c,
                  const Tensor& d) {
  const int64_t B = x.dim(0), T = x.dim(1), E = x.dim(2), N = a.dim(1);
  const std::vector<double> X = x.to_vector(), Dl = delta.to_vector(), A = a.to_vector(), Bm = b.to_vector(),
                            Cm = c.to_vector(), Ds = d.defined() ? d.to_vector() : std::vector<double>(E, 0.0);
  std::vector<double> y(B * T * E);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t e = 0; e < E; ++e) {
      std::vector<double> h(N, 0.0);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t r = bi * T + t;
        double out = Ds[e] * X[r * E + e];
        for (int64_t n = 0; n < N; ++n) {
          h[n] = std::exp(Dl[r * E + e] * A[e * N + n]) * h[n] + Dl[r * E + e] * Bm[r * N + n] * X[r * E + e];
          out += Cm[r * N + n] * h[n];
        }
        y[r * E + e] = out;
      }
    }
  return Tensor::from_vector(y, x.shape(), DType::f64);
}

struct ScanInputs {
  Tensor x, delta, a, b, c, d;
};

// As a Mamba block makes them: delta > 0 (softplus), A < 0 (minus exp).
ScanInputs random_scan(int64_t B, int64_t T, int64_t E, int64_t N, DType dtype, uint64_t seed) {
  Rng rng(seed);
  NoGradGuard no_grad;
  return {randn({B, T, E}, rng, 1.0, dtype), ops::softplus(randn({B, T, E}, rng, 1.0, dtype)),
          ops::scale(ops::exp(randn({E, N}, rng, 0.5, dtype)), -1.0), randn({B, T, N}, rng, 1.0, dtype),
          randn({B, T, N}, rng, 1.0, dtype), randn({E}, rng, 1.0, dtype)};
}

TEST(SelectiveScan, HandComputedValues) {
  // T = 2, E = N = 1: x = (1, 2), delta = (0.5, 1), A = -1, B = (1, 1), C = (2, 3), D = 0.5.
  // h_0 = 0.5 * 1 * 1 = 0.5, y_0 = 2 * 0.5 + 0.5 * 1 = 1.5;
  // h_1 = exp(-1) * 0.5 + 1 * 1 * 2, y_1 = 3 h_1 + 0.5 * 2 = 7 + 1.5 / e.
  auto t = [](std::vector<double> v, Shape s) { return Tensor::from_vector(v, s, DType::f64); };
  const Tensor y = ops::selective_scan(t({1, 2}, {1, 2, 1}), t({0.5, 1}, {1, 2, 1}), t({-1}, {1, 1}),
                                       t({1, 1}, {1, 2, 1}), t({2, 3}, {1, 2, 1}), t({0.5}, {1}));
  EXPECT_DOUBLE_EQ(y.at(0), 1.5);
  EXPECT_DOUBLE_EQ(y.at(1), 7 + 1.5 / std::exp(1.0));
}

TEST(SelectiveScan, EqualsTheRecurrenceStepByStep) {
  struct Case {
    int64_t B, T, E, N;
    bool skip;
  };
  // The last is long enough that each task takes one channel (a 4 MiB history per block).
  for (const Case& c : {Case{2, 9, 5, 3, true}, Case{1, 1, 2, 4, true}, Case{3, 17, 40, 2, false},
                        Case{1, 40000, 3, 16, true}}) {
    const ScanInputs in = random_scan(c.B, c.T, c.E, c.N, DType::f64, 7);
    const Tensor d = c.skip ? in.d : Tensor();
    EXPECT_TRUE(all_close(ops::selective_scan(in.x, in.delta, in.a, in.b, in.c, d),
                          recurrence(in.x, in.delta, in.a, in.b, in.c, d), 0, 1e-12))
        << "B " << c.B << " T " << c.T << " E " << c.E;
  }
}

TEST(SelectiveScan, Float32MatchesFloat64OnOddLengths) {
  for (const int64_t T : {1, 3, 17, 63, 130}) {
    const ScanInputs in = random_scan(2, T, 7, 5, DType::f64, 3 + T);
    auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
    const Tensor y32 = ops::selective_scan(f32(in.x), f32(in.delta), f32(in.a), f32(in.b), f32(in.c), f32(in.d));
    EXPECT_TRUE(all_close(y32.to(DType::f64), ops::selective_scan(in.x, in.delta, in.a, in.b, in.c, in.d), 1e-4, 1e-5))
        << "T = " << T;
  }
}

// Decoding from a carried state gives the whole sequence's rows exactly: the same loop, the same h.
TEST(SelectiveScan, DecodingInChunksEqualsTheWholeSequence) {
  const int64_t B = 2, T = 11, E = 6, N = 4;
  const ScanInputs in = random_scan(B, T, E, N, DType::f64, 5);
  const Tensor full = ops::selective_scan(in.x, in.delta, in.a, in.b, in.c, in.d);
  const Tensor state = Tensor::zeros({B, E, N}, DType::f64);
  NoGradGuard no_grad;
  const std::vector<int64_t> chunks{4, 1, 1, 3, 2};
  std::vector<std::pmr::vector<Tensor>> parts;
  for (const Tensor* t : {&in.x, &in.delta, &in.b, &in.c, &full}) parts.push_back(ops::split(*t, chunks, 1));
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Tensor y = ops::selective_scan_append(parts[0][i], parts[1][i], in.a, parts[2][i], parts[3][i], in.d, state);
    EXPECT_TRUE(all_close(y, parts[4][i], 0, 0)) << "chunk " << i;
  }
}

// Each task writes its own share of dB, dC, dA and dD, summed in a fixed order afterwards.
TEST(SelectiveScan, GradientsAreTheSameAtAnyThreadCount) {
  const ScanInputs base = random_scan(3, 33, 70, 4, DType::f32, 9);
  std::vector<std::vector<double>> first;
  for (const int threads : {1, 2, 3}) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<Tensor> in{base.x.clone(), base.delta.clone(), base.a.clone(), base.b.clone(), base.c.clone(),
                           base.d.clone()};
    for (Tensor& t : in) t.set_requires_grad();
    const Tensor y = ops::selective_scan(in[0], in[1], in[2], in[3], in[4], in[5]);
    tape().backward(y, Tensor::full(y.shape(), 1.0, DType::f32));
    omp_set_num_threads(before);
    for (size_t i = 0; i < in.size(); ++i) {
      if (threads == 1) first.push_back(in[i].grad().to_vector());
      else EXPECT_EQ(in[i].grad().to_vector(), first[i]) << "input " << i << " at " << threads << " threads";
    }
  }
}

TEST(SelectiveScan, RefusesMismatchedShapes) {
  const ScanInputs in = random_scan(1, 4, 3, 2, DType::f64, 1);
  testing::expect_error([&] { ops::selective_scan(in.x, in.b, in.a, in.b, in.c, in.d); },
                        "x and delta must be (B, T, E) alike");
  testing::expect_error([&] { ops::selective_scan(in.x, in.delta, in.b, in.b, in.c, in.d); }, "a must be (E, N)");
  testing::expect_error([&] { ops::selective_scan(in.x, in.delta, in.a, in.x, in.c, in.d); },
                        "b and c must be (B, T, N) = (1, 4, 2)");
  NoGradGuard no_grad;
  testing::expect_error(
      [&] { ops::selective_scan_append(in.x, in.delta, in.a, in.b, in.c, in.d, Tensor::zeros({1, 3, 3}, DType::f64)); },
      "the state must be (B, E, N) = (1, 3, 2)");
}

TEST(CausalConv1d, HandComputedValues) {
  // One channel, taps (1, 2, 3) on x = (1, 10, 100): y_t = 3 x_t + 2 x_{t-1} + 1 x_{t-2} + bias 0.5.
  const Tensor x = Tensor::from_vector({1, 10, 100}, {1, 3, 1}, DType::f64);
  const Tensor w = Tensor::from_vector({1, 2, 3}, {1, 3}, DType::f64), bias = Tensor::from_vector({0.5}, {1}, DType::f64);
  const Tensor y = ops::causal_conv1d(x, w, bias);
  EXPECT_EQ(y.to_vector(), (std::vector<double>{3.5, 32.5, 321.5}));
}

TEST(CausalConv1d, DecodingInChunksEqualsTheWholeSequence) {
  Rng rng(2);
  const int64_t B = 2, T = 9, C = 5, K = 4;
  const Tensor x = randn({B, T, C}, rng, 1.0, DType::f64), w = randn({C, K}, rng, 1.0, DType::f64);
  const Tensor bias = randn({C}, rng, 1.0, DType::f64);
  const Tensor full = ops::causal_conv1d(x, w, bias);
  const Tensor state = Tensor::zeros({B, K - 1, C}, DType::f64);
  NoGradGuard no_grad;
  const std::vector<int64_t> chunks{2, 1, 4, 1, 1};
  const auto xs = ops::split(x, chunks, 1), ys = ops::split(full, chunks, 1);
  for (size_t i = 0; i < chunks.size(); ++i)
    EXPECT_TRUE(all_close(ops::causal_conv1d_append(xs[i], w, bias, state), ys[i], 0, 0)) << "chunk " << i;
  testing::expect_error([&] { ops::causal_conv1d_append(xs[0], w, bias, Tensor::zeros({B, K, C}, DType::f64)); },
                        "the state must be (B, K - 1, C) = (2, 3, 5)");
}

TEST(Pointwise, ValuesAtKnownPoints) {
  const Tensor x = Tensor::from_vector({0.0, 1.0, -30.0, 25.0}, {4}, DType::f64);
  const std::vector<double> e = ops::exp(x).to_vector(), s = ops::silu(x).to_vector(), p = ops::softplus(x).to_vector();
  EXPECT_DOUBLE_EQ(e[1], std::exp(1.0));
  EXPECT_DOUBLE_EQ(s[0], 0.0);
  EXPECT_DOUBLE_EQ(s[1], 1.0 / (1.0 + std::exp(-1.0)));
  EXPECT_DOUBLE_EQ(p[0], std::log(2.0));
  EXPECT_NEAR(p[2], std::exp(-30.0), 1e-25);  // log(1 + e^-30), not 0
  EXPECT_DOUBLE_EQ(p[3], 25.0);               // past the threshold, x itself (off by e^-25)
}

}  // namespace
}  // namespace tf
