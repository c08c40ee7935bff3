// attention: against the textbook formula written as naive loops here, fast kernel against the
// reference kernel on odd sizes (forward and backward), and the invariants masks and scale promise.
#include "framework/ops/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "framework/autograd/tape.h"
#include "framework/kernels/mode.h"
#include "framework/random.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

using ops::AttentionOptions;
using testing::all_close;

// Sizes of one problem: q (B, H, T_q, D), k (B, H_kv, T_k, D), v (B, H_kv, T_k, D).
struct Sizes {
  int64_t batch, heads, kv_heads, q_len, kv_len, head_dim;
};

struct Inputs {
  Tensor q, k, v;
};

Inputs random_inputs(const Sizes& s, uint64_t seed, DType dtype = DType::f64) {
  Rng rng(seed);
  return {randn({s.batch, s.heads, s.q_len, s.head_dim}, rng, 1.0, dtype),
          randn({s.batch, s.kv_heads, s.kv_len, s.head_dim}, rng, 1.0, dtype),
          randn({s.batch, s.kv_heads, s.kv_len, s.head_dim}, rng, 1.0, dtype)};
}

// The textbook formula (Vaswani et al. eq. 1) as separate naive steps, in double: scores, mask to
// -inf, softmax, dropout, weighted sum of values. Rows with no visible key are defined as 0.
struct Textbook {
  Tensor out, weights;
};

Textbook textbook_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  const int64_t B = q.dim(0), H = q.dim(1), Tq = q.dim(2), D = q.dim(3), Hkv = k.dim(1), Tk = k.dim(2);
  const double scale = o.scale != 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(D));
  const std::vector<double> Q = q.to_vector(), K = k.to_vector(), V = v.to_vector();
  std::vector<double> pad(B * Tk, 1.0);
  if (o.key_padding.defined()) pad = o.key_padding.to_vector();
  std::vector<double> weights(B * H * Tq * Tk, 0.0), out(B * H * Tq * D, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = h / (H / Hkv);
      for (int64_t i = 0; i < Tq; ++i) {
        std::vector<double> s(Tk);
        for (int64_t j = 0; j < Tk; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < D; ++c)
            dot += Q[((b * H + h) * Tq + i) * D + c] * K[((b * Hkv + kvh) * Tk + j) * D + c];
          const bool masked = (o.causal && j > i + (Tk - Tq)) || pad[b * Tk + j] == 0;
          s[j] = masked ? -std::numeric_limits<double>::infinity() : scale * dot;
        }
        double max = -std::numeric_limits<double>::infinity(), sum = 0;
        for (double x : s) max = std::max(max, x);
        if (std::isinf(max)) continue;  // no visible key
        for (double x : s) sum += std::exp(x - max);
        const int64_t row = (b * H + h) * Tq + i;
        for (int64_t j = 0; j < Tk; ++j) {
          const double p = std::exp(s[j] - max) / sum;
          weights[row * Tk + j] = p;
          double kept = p;
          if (o.dropout > 0) kept = uniform_at(o.dropout_seed, row * Tk + j) < o.dropout ? 0.0 : p / (1 - o.dropout);
          for (int64_t c = 0; c < D; ++c) out[row * D + c] += kept * V[((b * Hkv + kvh) * Tk + j) * D + c];
        }
      }
    }
  }
  return {Tensor::from_vector(out, {B, H, Tq, D}, DType::f64),
          Tensor::from_vector(weights, {B, H, Tq, Tk}, DType::f64)};
}

// Entry b pads keys according to a pattern that gives every kind of row: entry 0 pads its tail,
// entry 1 pads key 0 (so under causality its query 0 sees nothing), further entries pad nothing.
Tensor padding_mask(int64_t batch, int64_t kv_len, DType dtype = DType::f64) {
  std::vector<double> m(batch * kv_len, 1.0);
  for (int64_t j = kv_len - kv_len / 3; j < kv_len && kv_len > 1; ++j) m[j] = 0;
  if (batch > 1) m[kv_len] = 0;
  return Tensor::from_vector(m, {batch, kv_len}, dtype);
}

struct TextbookCase {
  std::string name;
  Sizes sizes;
  bool causal, padded;
  double dropout;
};

void PrintTo(const TextbookCase& c, std::ostream* out) { *out << c.name; }

class AttentionTextbook : public ::testing::TestWithParam<TextbookCase> {};

TEST_P(AttentionTextbook, MatchesNaiveLoopsInDoubleAndFloat) {
  const TextbookCase& c = GetParam();
  const Inputs in = random_inputs(c.sizes, 11);
  AttentionOptions o{.causal = c.causal, .dropout = c.dropout, .dropout_seed = 99};
  if (c.padded) o.key_padding = padding_mask(c.sizes.batch, c.sizes.kv_len);
  const Textbook truth = textbook_attention(in.q, in.k, in.v, o);

  Tensor weights;
  const Tensor out = ops::attention(in.q, in.k, in.v, o, &weights);  // float64: reference kernel
  EXPECT_TRUE(all_close(out, truth.out, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(weights, truth.weights, 1e-12, 1e-12));

  // float32: the fast kernel. Inputs are N(0, 1) and D <= 5 here, so scores carry float rounding
  // of ~1e-6 and outputs (weighted sums of at most 6 values) ~1e-6: 1e-5 leaves a 10x margin.
  AttentionOptions of = o;
  if (c.padded) of.key_padding = padding_mask(c.sizes.batch, c.sizes.kv_len, DType::f32);
  Tensor weights_f;
  const Tensor out_f = ops::attention(in.q.to(DType::f32), in.k.to(DType::f32), in.v.to(DType::f32), of, &weights_f);
  EXPECT_TRUE(all_close(out_f, truth.out, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(weights_f, truth.weights, 1e-5, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AttentionTextbook,
    ::testing::Values(TextbookCase{"plain", {2, 2, 2, 4, 4, 3}, false, false, 0},
                      TextbookCase{"causal", {2, 2, 2, 5, 5, 3}, true, false, 0},
                      TextbookCase{"padding", {2, 2, 2, 5, 5, 3}, false, true, 0},
                      TextbookCase{"causal_padding_empty_rows", {3, 2, 2, 5, 5, 3}, true, true, 0},
                      TextbookCase{"grouped_query_H4_Hkv2", {2, 4, 2, 3, 5, 3}, true, true, 0},
                      TextbookCase{"causal_Tq3_Tk5", {1, 2, 1, 3, 5, 2}, true, false, 0},
                      TextbookCase{"causal_Tq5_Tk3_empty_rows", {1, 2, 2, 5, 3, 2}, true, false, 0},
                      TextbookCase{"dropout_seeded", {2, 4, 2, 5, 5, 3}, true, true, 0.4},
                      TextbookCase{"T1_D1", {2, 1, 1, 1, 1, 1}, true, false, 0},
                      TextbookCase{"T3_D3", {1, 3, 3, 3, 3, 3}, false, false, 0},
                      TextbookCase{"T5_D1", {1, 2, 1, 5, 5, 1}, true, true, 0}),
    [](const auto& info) { return info.param.name; });

// Output, weights and the three gradients of one run under a fixed upstream gradient dout.
struct Result {
  Tensor out, weights, dq, dk, dv;
};

Result run_with_grads(const Inputs& in, const AttentionOptions& o, const Tensor& dout) {
  Inputs x{in.q.clone().set_requires_grad(), in.k.clone().set_requires_grad(), in.v.clone().set_requires_grad()};
  Result r;
  r.out = ops::attention(x.q, x.k, x.v, o, &r.weights);
  tape().backward(r.out, dout);
  r.dq = x.q.grad(), r.dk = x.k.grad(), r.dv = x.v.grad();
  return r;
}

enum class Masks { none, causal, causal_padding };

// Fast float32 kernel against the reference kernel run in float64 on the same (float-representable)
// inputs, forward and backward, on odd sizes with grouped heads (H = 4, H_kv = 2).
//
// Tolerances from float32 rounding (unit roundoff u = 6e-8): a score is a D-term dot product of
// N(0, 1) values scaled by 1/sqrt(D), error ~ sqrt(D) u |score| <= 1e-6 for D <= 64; softmax turns
// that into a relative error of the same size on each probability, and an output element, a convex
// combination of N(0, 1) values, inherits ~1e-6 absolute. Gradients sum over up to T_k = 130
// (dQ) or H/H_kv * T_q = 260 (dK, dV) terms of size ~|dout| |v|, so their absolute error grows to
// ~sqrt(260) * 1e-6 ~ 2e-5 on values of size ~1-10. We allow 1e-4 relative plus 1e-4 absolute
// (outputs, weights: 2e-5 absolute), 25 times the largest error observed over these
// 60 cases (4e-6, a gradient element).
class AttentionFastVsReference
    : public ::testing::TestWithParam<std::tuple<int64_t /* T */, int64_t /* D */, Masks>> {};

TEST_P(AttentionFastVsReference, ForwardAndBackwardAgree) {
  const auto [T, D, masks] = GetParam();
  const Sizes s{2, 4, 2, T, T, D};
  const Inputs in64 = random_inputs(s, 5 + T * 100 + D);
  // Round inputs to float first so both kernels see the same numbers.
  const Inputs in32{in64.q.to(DType::f32), in64.k.to(DType::f32), in64.v.to(DType::f32)};
  const Inputs in{in32.q.to(DType::f64), in32.k.to(DType::f64), in32.v.to(DType::f64)};
  Rng rng(3);
  const Tensor dout32 = randn({s.batch, s.heads, T, D}, rng);
  AttentionOptions o{.causal = masks != Masks::none};
  AttentionOptions o32 = o;
  if (masks == Masks::causal_padding) {
    o.key_padding = padding_mask(s.batch, T);
    o32.key_padding = padding_mask(s.batch, T, DType::f32);
  }
  const Result ref = run_with_grads(in, o, dout32.to(DType::f64));
  const Result fast = run_with_grads(in32, o32, dout32);
  EXPECT_TRUE(all_close(fast.out, ref.out, 1e-4, 2e-5)) << "out";
  EXPECT_TRUE(all_close(fast.weights, ref.weights, 1e-4, 2e-5)) << "weights";
  EXPECT_TRUE(all_close(fast.dq, ref.dq, 1e-4, 1e-4)) << "dq";
  EXPECT_TRUE(all_close(fast.dk, ref.dk, 1e-4, 1e-4)) << "dk";
  EXPECT_TRUE(all_close(fast.dv, ref.dv, 1e-4, 1e-4)) << "dv";
}

std::string odd_size_name(const ::testing::TestParamInfo<AttentionFastVsReference::ParamType>& info) {
  const char* masks[] = {"nomask", "causal", "causal_padding"};
  const auto [T, D, m] = info.param;
  return "T" + std::to_string(T) + "_D" + std::to_string(D) + "_" + masks[static_cast<int>(m)];
}

INSTANTIATE_TEST_SUITE_P(OddSizes, AttentionFastVsReference,
                         ::testing::Combine(::testing::Values<int64_t>(1, 3, 17, 63, 130),
                                            ::testing::Values<int64_t>(1, 3, 17, 64),
                                            ::testing::Values(Masks::none, Masks::causal, Masks::causal_padding)),
                         odd_size_name);

TEST(AttentionFastVsReferenceDropout, Agrees) {
  const Sizes s{2, 4, 2, 17, 17, 8};
  const Inputs in32 = random_inputs(s, 21, DType::f32);
  const Inputs in{in32.q.to(DType::f64), in32.k.to(DType::f64), in32.v.to(DType::f64)};
  Rng rng(4);
  const Tensor dout32 = randn({s.batch, s.heads, s.q_len, s.head_dim}, rng);
  const AttentionOptions o{.causal = true, .dropout = 0.25, .dropout_seed = 1234};
  const Result ref = run_with_grads(in, o, dout32.to(DType::f64));
  const Result fast = run_with_grads(in32, o, dout32);
  EXPECT_TRUE(all_close(fast.out, ref.out, 1e-4, 2e-5));
  EXPECT_TRUE(all_close(fast.weights, ref.weights, 1e-4, 2e-5));
  EXPECT_TRUE(all_close(fast.dq, ref.dq, 1e-4, 1e-4));
  EXPECT_TRUE(all_close(fast.dk, ref.dk, 1e-4, 1e-4));
  EXPECT_TRUE(all_close(fast.dv, ref.dv, 1e-4, 1e-4));
}

}  // namespace
void PrintTo(DType d, std::ostream* out) { *out << dtype_name(d); }
namespace {

// Both kernels: float32 takes the fast one, float64 the reference one.
class AttentionBothKernels : public ::testing::TestWithParam<DType> {};

TEST_P(AttentionBothKernels, WeightRowsSumToOneAndVanishAtMaskedKeys) {
  const DType dt = GetParam();
  const Sizes s{3, 2, 1, 6, 6, 4};
  const Inputs in = random_inputs(s, 8, dt);
  const Tensor pad = padding_mask(s.batch, s.kv_len, dt);
  Tensor w;
  ops::attention(in.q, in.k, in.v, {.causal = true, .key_padding = pad}, &w);
  const std::vector<double> wv = w.to_vector(), pv = pad.to_vector();
  int64_t empty_rows = 0;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.q_len; ++i) {
        double sum = 0;
        bool any_visible = false;
        for (int64_t j = 0; j < s.kv_len; ++j) {
          const double p = wv[((b * s.heads + h) * s.q_len + i) * s.kv_len + j];
          const bool visible = j <= i && pv[b * s.kv_len + j] == 1;
          any_visible = any_visible || visible;
          if (!visible) {
            EXPECT_EQ(p, 0.0) << "b " << b << " h " << h << " i " << i << " j " << j;
          }
          EXPECT_GE(p, 0.0);
          sum += p;
        }
        // float32: a sum of <= 6 probabilities rounded to ~6e-8 each.
        EXPECT_NEAR(sum, any_visible ? 1.0 : 0.0, 1e-6) << "b " << b << " h " << h << " i " << i;
        empty_rows += !any_visible;
      }
  EXPECT_EQ(empty_rows, s.heads);  // entry 1, query 0 in each head: the padding pattern's empty row
}

TEST_P(AttentionBothKernels, EmptyRowsGiveZeroOutputAndZeroGradientWithoutNaN) {
  const DType dt = GetParam();
  const Sizes s{1, 2, 1, 5, 3, 3};  // causal with T_q > T_k: queries 0 and 1 see no key
  const Inputs in = random_inputs(s, 9, dt);
  Rng rng(1);
  const Result r = run_with_grads(in, {.causal = true}, randn({1, 2, 5, 3}, rng, 1.0, dt));
  for (const Tensor& t : {r.out, r.weights, r.dq, r.dk, r.dv})
    for (double x : t.to_vector()) ASSERT_TRUE(std::isfinite(x));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t c = 0; c < 3; ++c) {
        EXPECT_EQ(r.out.at((h * 5 + i) * 3 + c), 0.0);
        EXPECT_EQ(r.dq.at((h * 5 + i) * 3 + c), 0.0);
      }
  EXPECT_NE(r.out.at((0 * 5 + 2) * 3), 0.0);  // query 2 sees key 0
}

TEST_P(AttentionBothKernels, NoKeysAtAllGivesZerosAndNoQueriesGivesAnEmptyResult) {
  const DType dt = GetParam();
  Rng rng(10);
  const Inputs no_keys = random_inputs({2, 2, 1, 3, 0, 4}, 10, dt);  // T_k = 0
  const Result r = run_with_grads(no_keys, {}, randn({2, 2, 3, 4}, rng, 1.0, dt));
  EXPECT_TRUE(all_close(r.out, Tensor::zeros({2, 2, 3, 4}, dt), 0, 0));
  EXPECT_TRUE(all_close(r.dq, Tensor::zeros({2, 2, 3, 4}, dt), 0, 0));
  const Inputs no_queries = random_inputs({2, 2, 1, 0, 3, 4}, 10, dt);  // T_q = 0
  EXPECT_EQ(ops::attention(no_queries.q, no_queries.k, no_queries.v, {.causal = true}).shape(), Shape({2, 2, 0, 4}));
}

TEST_P(AttentionBothKernels, CausalOutputsIgnoreLaterKeysAndValues) {
  const DType dt = GetParam();
  const Sizes s{2, 4, 2, 7, 7, 5};
  const Inputs in = random_inputs(s, 12, dt);
  const Tensor out = ops::attention(in.q, in.k, in.v, {.causal = true});
  const int64_t t = 3;
  Inputs changed{in.q, in.k.clone(), in.v.clone()};
  for (Tensor* x : {&changed.k, &changed.v}) {  // overwrite positions > t with other values
    const int64_t rows = x->numel() / (s.kv_len * s.head_dim);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = t + 1; j < s.kv_len; ++j)
        for (int64_t c = 0; c < s.head_dim; ++c) {
          const int64_t e = (r * s.kv_len + j) * s.head_dim + c;
          dispatch(dt, [&](auto zero) { x->data<decltype(zero)>()[e] = 100.0 + e; });
        }
  }
  const Tensor out2 = ops::attention(changed.q, changed.k, changed.v, {.causal = true});
  const std::vector<double> a = out.to_vector(), b = out2.to_vector();
  bool later_changed = false;
  for (size_t e = 0; e < a.size(); ++e) {
    const int64_t i = (e / s.head_dim) % s.q_len;
    if (i <= t) {
      EXPECT_EQ(a[e], b[e]) << "output at position " << i << " changed";  // masked P is exactly 0
    } else {
      later_changed = later_changed || a[e] != b[e];
    }
  }
  EXPECT_TRUE(later_changed);  // the edit was real
}

TEST_P(AttentionBothKernels, PaddedKeysAndValuesChangeNothing) {
  const DType dt = GetParam();
  const Sizes s{2, 2, 2, 6, 6, 3};
  const Inputs in = random_inputs(s, 13, dt);
  const Tensor pad = padding_mask(s.batch, s.kv_len, dt);
  const std::vector<double> pv = pad.to_vector();
  Rng rng(2);
  const Tensor dout = randn({2, 2, 6, 3}, rng, 1.0, dt);
  const AttentionOptions o{.key_padding = pad};
  const Result r = run_with_grads(in, o, dout);
  Inputs changed{in.q, in.k.clone(), in.v.clone()};
  for (Tensor* x : {&changed.k, &changed.v})
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.kv_heads; ++h)
        for (int64_t j = 0; j < s.kv_len; ++j)
          if (pv[b * s.kv_len + j] == 0)
            for (int64_t c = 0; c < s.head_dim; ++c)
              dispatch(dt, [&](auto zero) {
                x->data<decltype(zero)>()[((b * s.kv_heads + h) * s.kv_len + j) * s.head_dim + c] = -50.0 - c;
              });
  const Result r2 = run_with_grads(changed, o, dout);
  EXPECT_TRUE(all_close(r2.out, r.out, 0, 0));
  EXPECT_TRUE(all_close(r2.weights, r.weights, 0, 0));
  EXPECT_TRUE(all_close(r2.dq, r.dq, 0, 0));
  EXPECT_TRUE(all_close(r2.dk, r.dk, 0, 0));
  EXPECT_TRUE(all_close(r2.dv, r.dv, 0, 0));
  // and padded keys and values receive no gradient
  for (const Tensor& g : {r.dk, r.dv})
    for (int64_t e = 0; e < g.numel(); ++e) {
      const int64_t j = (e / s.head_dim) % s.kv_len, b = e / (s.kv_heads * s.kv_len * s.head_dim);
      if (pv[b * s.kv_len + j] == 0) {
        EXPECT_EQ(g.at(e), 0.0);
      }
    }
}

TEST_P(AttentionBothKernels, DoubledQueriesWithHalvedScaleGiveTheSameResult) {
  const DType dt = GetParam();
  const Sizes s{2, 2, 1, 5, 7, 4};
  const Inputs in = random_inputs(s, 14, dt);
  const double scale = 1.0 / std::sqrt(4.0);
  const Tensor base = ops::attention(in.q, in.k, in.v, {.causal = true});  // default scale 1/sqrt(D)
  const Tensor explicit_scale = ops::attention(in.q, in.k, in.v, {.causal = true, .scale = scale});
  Tensor q2 = in.q.clone();
  dispatch(dt, [&](auto zero) {
    for (int64_t e = 0; e < q2.numel(); ++e) q2.data<decltype(zero)>()[e] *= 2;
  });
  const Tensor doubled = ops::attention(q2, in.k, in.v, {.causal = true, .scale = scale / 2});
  // Scaling by powers of two is exact in floating point, so even float32 agrees to rounding noise.
  EXPECT_TRUE(all_close(explicit_scale, base, 0, 0));
  EXPECT_TRUE(all_close(doubled, base, 1e-6, 1e-7));
  const Tensor other = ops::attention(in.q, in.k, in.v, {.causal = true, .scale = scale * 3});
  EXPECT_FALSE(all_close(other, base, 1e-3, 1e-3));  // the scale does matter
}

TEST_P(AttentionBothKernels, DropoutIsSeededAndLeavesWeightsAlone) {
  const DType dt = GetParam();
  const Inputs in = random_inputs({2, 2, 2, 6, 6, 4}, 15, dt);
  Tensor w0, w1, w2;
  const Tensor plain = ops::attention(in.q, in.k, in.v, {}, &w0);
  const Tensor a = ops::attention(in.q, in.k, in.v, {.dropout = 0.5, .dropout_seed = 1}, &w1);
  const Tensor b = ops::attention(in.q, in.k, in.v, {.dropout = 0.5, .dropout_seed = 1}, &w2);
  const Tensor c = ops::attention(in.q, in.k, in.v, {.dropout = 0.5, .dropout_seed = 2});
  EXPECT_TRUE(all_close(a, b, 0, 0));
  EXPECT_FALSE(all_close(a, c, 1e-3, 1e-3));
  EXPECT_FALSE(all_close(a, plain, 1e-3, 1e-3));
  EXPECT_TRUE(all_close(w1, w0, 0, 0));  // weights_out is before dropout
}

// A key padding mask of all ones hides nothing: the output and all gradients equal the unmasked
// run's exactly (ops::attention drops such a mask before the kernels), causal or not, at a size the
// materialised kernel takes (T = 6) and one the flash kernel takes (T = 40). A mask with a single
// zero is not dropped: the last key then changes nothing.
TEST_P(AttentionBothKernels, AllOnesPaddingMaskIsNoMask) {
  const DType dt = GetParam();
  for (int64_t t : {6, 40}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "T " << t << (causal ? " causal" : ""));
      const Sizes s{2, 2, 2, t, t, 8};
      const Inputs in = random_inputs(s, 17, dt);
      Rng rng(3);
      const Tensor dout = randn({2, 2, t, 8}, rng, 1.0, dt);
      const Result plain = run_with_grads(in, {.causal = causal}, dout);
      const Result ones = run_with_grads(in, {.causal = causal, .key_padding = Tensor::full({2, t}, 1.0, dt)}, dout);
      EXPECT_TRUE(all_close(ones.out, plain.out, 0, 0));
      EXPECT_TRUE(all_close(ones.dq, plain.dq, 0, 0));
      EXPECT_TRUE(all_close(ones.dk, plain.dk, 0, 0));
      EXPECT_TRUE(all_close(ones.dv, plain.dv, 0, 0));
      if (causal) continue;  // under a causal mask the last key changes only the last query's row
      Tensor one_zero = Tensor::full({2, t}, 1.0, dt);
      dispatch(dt, [&](auto zero) { one_zero.data<decltype(zero)>()[t - 1] = 0; });  // batch 0, last key
      const Result masked = run_with_grads(in, {.key_padding = one_zero}, dout);
      EXPECT_FALSE(all_close(masked.out, plain.out, 0, 1e-6));
    }
  }
}

// A query row of NaN gives a NaN output row, not the zeros of a masked row: the row maximum skipped
// NaN, and a row of only NaN looked empty. On every kernel: reference (float64), materialised (T = 5)
// and flash (T = 40) in float32; other rows stay finite.
TEST_P(AttentionBothKernels, NanQueriesGiveNanOutputsNotZeros) {
  const DType dt = GetParam();
  for (int64_t T : {5, 40}) {
    const Inputs in = random_inputs({1, 2, 1, T, T, 4}, 9, dt);
    Tensor q = in.q.clone();
    for (int64_t c = 0; c < 4; ++c) {  // row (head 1, query 3)
      if (dt == DType::f64) q.data<double>()[(1 * T + 3) * 4 + c] = std::numeric_limits<double>::quiet_NaN();
      else q.data<float>()[(1 * T + 3) * 4 + c] = std::numeric_limits<float>::quiet_NaN();
    }
    const std::vector<double> out = ops::attention(q, in.k, in.v, {.causal = true}).to_vector();
    for (int64_t i = 0; i < T; ++i)
      for (int64_t c = 0; c < 4; ++c) {
        const double x = out[(1 * T + i) * 4 + c];
        if (i == 3) EXPECT_TRUE(std::isnan(x)) << "T " << T << " element " << c << " = " << x;
        else EXPECT_TRUE(std::isfinite(x)) << "T " << T << " row " << i;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AttentionBothKernels, ::testing::Values(DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(AttentionErrors, NameTheShapesAndValues) {
  const Inputs in = random_inputs({1, 4, 2, 3, 3, 2}, 1);
  EXPECT_THROW(ops::attention(in.q, in.k, in.v.view({1, 2, 2, 3})), Error);  // v does not match k
  EXPECT_THROW(ops::attention(in.q, in.k.view({1, 3, 2, 2}), in.v.view({1, 3, 2, 2})), Error);  // 4 % 3
  EXPECT_THROW(ops::attention(in.q.view({4, 3, 2}), in.k, in.v), Error);                     // rank
  EXPECT_THROW(ops::attention(in.q, in.k, in.v, {.dropout = 1.0}), Error);
  EXPECT_THROW(ops::attention(in.q, in.k, in.v, {.key_padding = Tensor::full({1, 4}, 1.0)}), Error);
  // A key_padding value of 2 is refused.
  testing::expect_error(
      [&] { ops::attention(in.q, in.k, in.v, {.key_padding = Tensor::from_vector({1, 2, 1}, {1, 3})}); }, "got 2");
  testing::expect_error([&] { ops::attention(in.q, in.k.view({1, 3, 2, 2}), in.v.view({1, 3, 2, 2})); }, "H = 4");
}

TEST(AttentionKernels, ReferenceForcedOnFloatMatchesDouble) {
  // The float32 reference kernel (selected by ReferenceKernelsGuard) is the fast kernel's fallback.
  const Sizes s{1, 2, 2, 9, 9, 5};
  const Inputs in = random_inputs(s, 17);
  const AttentionOptions o{.causal = true};
  const Tensor truth = ops::attention(in.q, in.k, in.v, o);
  kernels::ReferenceKernelsGuard reference;
  const Tensor ref32 = ops::attention(in.q.to(DType::f32), in.k.to(DType::f32), in.v.to(DType::f32), o);
  EXPECT_TRUE(all_close(ref32, truth, 1e-5, 1e-5));
}

}  // namespace
}  // namespace tf
