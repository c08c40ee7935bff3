// Differential attention: lambda against its formula computed by hand, the op against the two
// softmax maps written out here in double (causal, padded, grouped, windowed, odd sizes), the fast
// float32 path against that on odd lengths, lambda = 0 against plain attention, decoding against
// the full forward, and the refusals.
#include "framework/ops/differential_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/ops/shape.h"
#include "framework/random.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

using ops::differential_attention;
using testing::all_close;

// (A1 - lambda A2) V in double, one (b, h, i) row at a time, straight from Ye et al. 2024 eq. 1:
// softmax over the keys j that query i sees (causal: j <= i; padding; window: i - j < w).
Tensor written_out(const Tensor& q1, const Tensor& k1, const Tensor& q2, const Tensor& k2, const Tensor& v,
                   double lambda, bool causal, const std::vector<int>& keep, int64_t window) {
  const int64_t B = q1.dim(0), H = q1.dim(1), T = q1.dim(2), D = q1.dim(3), G = k1.dim(1), Dv = v.dim(3);
  const std::vector<double> Q1 = q1.to_vector(), K1 = k1.to_vector(), Q2 = q2.to_vector(), K2 = k2.to_vector(),
                            V = v.to_vector();
  std::vector<double> out(B * H * T * Dv, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const int64_t kv = b * G + h / (H / G), row = (b * H + h) * T + i;
        for (int map = 0; map < 2; ++map) {
          const std::vector<double>& Q = map == 0 ? Q1 : Q2;
          const std::vector<double>& K = map == 0 ? K1 : K2;
          std::vector<double> w(T, 0.0);
          double total = 0;
          for (int64_t j = 0; j < T; ++j) {
            const bool visible = (!causal || j <= i) && (keep.empty() || keep[b * T + j]) &&
                                 (window == 0 || std::abs(i - j) < window);
            if (!visible) continue;
            double s = 0;
            for (int64_t c = 0; c < D; ++c) s += Q[row * D + c] * K[(kv * T + j) * D + c];
            total += w[j] = std::exp(s / std::sqrt(static_cast<double>(D)));
          }
          const double sign = map == 0 ? 1.0 : -lambda;
          for (int64_t j = 0; j < T && total > 0; ++j)
            for (int64_t c = 0; c < Dv; ++c) out[row * Dv + c] += sign * w[j] / total * V[(kv * T + j) * Dv + c];
        }
      }
  return Tensor::from_vector(out, {B, H, T, Dv}, DType::f64);
}

struct Inputs {
  Tensor q1, k1, q2, k2, v;
};

Inputs random_inputs(int64_t B, int64_t H, int64_t G, int64_t T, int64_t D, int64_t Dv, DType dtype, uint64_t seed) {
  Rng rng(seed);
  return {randn({B, H, T, D}, rng, 1.0, dtype), randn({B, G, T, D}, rng, 1.0, dtype), randn({B, H, T, D}, rng, 1.0, dtype),
          randn({B, G, T, D}, rng, 1.0, dtype), randn({B, G, T, Dv}, rng, 1.0, dtype)};
}

TEST(DifferentialLambda, IsTheReparameterisationOfEquationTwo) {
  const Tensor q1 = Tensor::from_vector({0.1, 0.2}, {2}, DType::f64), k1 = Tensor::from_vector({0.3, -0.4}, {2}, DType::f64);
  const Tensor q2 = Tensor::from_vector({-0.5, 0.6}, {2}, DType::f64), k2 = Tensor::from_vector({0.7, 0.8}, {2}, DType::f64);
  // exp(0.03 - 0.08) - exp(-0.35 + 0.48) + 0.2
  const double expected = std::exp(-0.05) - std::exp(0.13) + 0.2;
  EXPECT_NEAR(ops::differential_lambda(q1, k1, q2, k2, 0.2).item(), expected, 1e-15);
  // All four at zero: exp(0) - exp(0) cancels, lambda = lambda_init (the paper's starting point).
  const Tensor z = Tensor::zeros({3}, DType::f64);
  EXPECT_EQ(ops::differential_lambda(z, z, z, z, 0.8).item(), 0.8);
}

TEST(DifferentialAttention, EqualsTheTwoMapsWrittenOut) {
  struct Case {
    const char* name;
    int64_t B, H, G, T, D, Dv;
    bool causal;
    std::vector<int> keep;
    int64_t window;
  };
  const Case cases[] = {{"causal", 2, 2, 2, 5, 3, 6, true, {}, 0},
                        {"grouped, odd sizes", 1, 3, 1, 17, 3, 5, true, {}, 0},
                        {"bidirectional, padded", 2, 2, 1, 4, 2, 4, false, {1, 1, 0, 1, 1, 1, 1, 0}, 0},
                        {"causal, window 3", 1, 2, 2, 9, 4, 8, true, {}, 3},
                        {"one position", 1, 1, 1, 1, 2, 4, true, {}, 0}};
  for (const Case& c : cases) {
    const Inputs in = random_inputs(c.B, c.H, c.G, c.T, c.D, c.Dv, DType::f64, 11);
    const Tensor lambda = Tensor::scalar(0.37, DType::f64);
    ops::AttentionOptions o{.causal = c.causal, .variant = {.window = c.window}};
    if (!c.keep.empty())
      o.key_padding = Tensor::from_vector(std::vector<double>(c.keep.begin(), c.keep.end()), {c.B, c.T}, DType::f64);
    const Tensor expected = written_out(in.q1, in.k1, in.q2, in.k2, in.v, 0.37, c.causal, c.keep, c.window);
    Tensor weights;
    const Tensor out = differential_attention(in.q1, in.k1, in.q2, in.k2, in.v, lambda, o, &weights);
    EXPECT_TRUE(all_close(out, expected, 0, 1e-12)) << c.name;
    // The weights it reports are the ones it applied: out = (A1 - lambda A2) V, per head.
    if (c.G == c.H) {  // then row r of the output reads value rows of head r / T
      std::vector<double> applied(out.numel(), 0.0);
      const std::vector<double> W = weights.to_vector(), V = in.v.to_vector();
      for (int64_t r = 0; r < c.B * c.H * c.T; ++r)
        for (int64_t j = 0; j < c.T; ++j)
          for (int64_t e = 0; e < c.Dv; ++e)
            applied[r * c.Dv + e] += W[r * c.T + j] * V[(r / c.T * c.T + j) * c.Dv + e];
      EXPECT_TRUE(all_close(Tensor::from_vector(applied, out.shape(), DType::f64), expected, 0, 1e-12)) << c.name;
    }
  }
}

// float32 takes the flash kernel twice; odd lengths cross its block edges unevenly.
TEST(DifferentialAttention, Float32MatchesTheWrittenOutMapsOnOddLengths) {
  for (const int64_t T : {1, 3, 17, 63, 130}) {
    const Inputs in = random_inputs(1, 4, 2, T, 8, 16, DType::f32, 5 + T);
    const Tensor out = differential_attention(in.q1, in.k1, in.q2, in.k2, in.v, Tensor::scalar(0.6), {.causal = true});
    const Tensor expected = written_out(in.q1, in.k1, in.q2, in.k2, in.v, 0.6, true, {}, 0);
    EXPECT_TRUE(all_close(out.to(DType::f64), expected, 0, 2e-5)) << "T = " << T;
  }
}

TEST(DifferentialAttention, LambdaZeroIsTheFirstMapAlone) {
  const Inputs in = random_inputs(2, 2, 1, 6, 3, 6, DType::f64, 3);
  const Tensor out = differential_attention(in.q1, in.k1, in.q2, in.k2, in.v, Tensor::scalar(0.0, DType::f64),
                                            {.causal = true});
  EXPECT_TRUE(all_close(out, ops::attention(in.q1, in.k1, in.v, {.causal = true}), 0, 0));
}

// Decoding appends to two key buffers and one value buffer; its rows are the full forward's.
TEST(DifferentialAttention, DecodingEqualsTheFullForward) {
  const int64_t B = 2, H = 2, G = 1, T = 7, D = 3, Dv = 6, L = 10;
  const Inputs in = random_inputs(B, H, G, T, D, Dv, DType::f64, 9);
  const Tensor lambda = Tensor::scalar(0.45, DType::f64);
  const Tensor full = differential_attention(in.q1, in.k1, in.q2, in.k2, in.v, lambda, {.causal = true});
  ops::KvBuffers cache{.keys = Tensor::zeros({B, G, L, D}, DType::f64), .values = Tensor::zeros({B, G, L, Dv}, DType::f64),
                       .second_keys = Tensor::zeros({B, G, L, D}, DType::f64)};
  NoGradGuard no_grad;
  int64_t start = 0;
  for (const int64_t chunk : {3, 1, 2, 1}) {
    auto rows = [&](const Tensor& t) {  // rows start .. start + chunk - 1 of axis 2
      std::vector<int64_t> sizes{chunk};
      if (start > 0) sizes.insert(sizes.begin(), start);
      if (start + chunk < T) sizes.push_back(T - start - chunk);
      return ops::split(t, sizes, 2)[start > 0 ? 1 : 0];
    };
    const Tensor out = ops::differential_attention_append(rows(in.q1), rows(in.k1), rows(in.q2), rows(in.k2),
                                                          rows(in.v), lambda, cache);
    EXPECT_TRUE(all_close(out, rows(full), 0, 1e-14)) << "rows from " << start;
    start += chunk;
    cache.length = start;
  }
}

TEST(DifferentialAttention, RefusesWhatItDoesNotSupport) {
  const Inputs in = random_inputs(1, 2, 1, 4, 2, 4, DType::f64, 1);
  const Tensor lambda = Tensor::scalar(0.5, DType::f64);
  testing::expect_error([&] { differential_attention(in.q1, in.k1, in.k1, in.k2, in.v, lambda); },
                        "the two maps' queries and keys must match in shape");
  testing::expect_error([&] { differential_attention(in.q1, in.k1, in.q2, in.k2, in.v, in.v); },
                        "lambda must be a scalar");
  testing::expect_error(
      [&] { differential_attention(in.q1, in.k1, in.q2, in.k2, in.v, lambda, {.dropout = 0.1}); },
      "attention dropout and T5's bias table are not supported");
  const Tensor z = Tensor::zeros({2}, DType::f64);
  testing::expect_error([&] { ops::differential_lambda(z, z, z, Tensor::zeros({3}, DType::f64), 0.5); },
                        "the four vectors must be (D) each");
}

}  // namespace
}  // namespace tf
