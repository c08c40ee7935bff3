// Attention variants (Note [attention variants]): ALiBi's slopes against the paper's values, both
// kernels against naive loops written here from the definitions, closed forms that follow from the
// math (a window hides what lies outside it; with zero queries ALiBi's weights are the normalised
// exp(-m |p - j|)), and decoding over a cache against the full computation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/ops/attention.h"
#include "framework/ops/attention_cache.h"
#include "framework/random.h"
#include "naive_attention.h"
#include "support/compare.h"

namespace tf {
namespace {

using kernels::AttentionVariant;
using ops::AttentionOptions;
using testing::all_close;

TEST(AlibiSlopes, ArePressEtAlsGeometricSequences) {
  // H = 8: 1/2, 1/4, ..., 1/256 (the paper's section 3).
  for (int64_t h = 0; h < 8; ++h) EXPECT_EQ(kernels::alibi_slope(h, 8), std::ldexp(1.0, -static_cast<int>(h + 1)));
  // H = 6 is not a power of two: the 4 slopes of 4 heads (1/4, 1/16, 1/64, 1/256), then every other
  // slope of 8 heads (1/2, 1/8), as the paper's code builds them.
  const double six[] = {1.0 / 4, 1.0 / 16, 1.0 / 64, 1.0 / 256, 1.0 / 2, 1.0 / 8};
  for (int64_t h = 0; h < 6; ++h) EXPECT_EQ(kernels::alibi_slope(h, 6), six[h]) << "head " << h;
  EXPECT_EQ(kernels::alibi_slope(0, 1), 1.0 / 256);  // one head: 2^-8
  // H = 3: 2 heads' slopes (1/16, 1/256), then the first of 4 heads' (1/4).
  EXPECT_EQ(kernels::alibi_slope(2, 3), 1.0 / 4);
  // H = 16: 2^(-1/2), 2^(-1), ..., 2^(-8), ratio 2^(-1/2).
  for (int64_t h = 0; h < 16; ++h)
    EXPECT_DOUBLE_EQ(kernels::alibi_slope(h, 16), std::pow(2.0, -0.5 * static_cast<double>(h + 1))) << "head " << h;
  // H = 12: the 8 slopes of 8 heads (1/2 .. 1/256), then every other slope of 16 heads:
  // 2^(-1/2), 2^(-3/2), 2^(-5/2), 2^(-7/2).
  const double twelve[] = {1.0 / 2, 1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32, 1.0 / 64, 1.0 / 128, 1.0 / 256,
                           std::sqrt(0.5), std::sqrt(0.5) / 2, std::sqrt(0.5) / 4, std::sqrt(0.5) / 8};
  for (int64_t h = 0; h < 12; ++h) EXPECT_DOUBLE_EQ(kernels::alibi_slope(h, 12), twelve[h]) << "head " << h;
}

// softmax(scale q.k - m_h |p - j|) V over keys p - w < j (< p + w unless causal), written from the
// definitions in double, one (b, h, i) row at a time. Rows with no visible key are 0.
Tensor naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, const AttentionVariant& var) {
  const int64_t H = q.dim(1);
  return testing::naive_attention_rows(
      q, k, v,
      [&](int64_t, int64_t p, int64_t j) {
        return (!causal || j <= p) && (var.window == 0 || (j > p - var.window && j < p + var.window));
      },
      [&](int64_t h, int64_t p, int64_t j) {
        return var.alibi ? -kernels::alibi_slope(h, H) * std::abs(static_cast<double>(p - j)) : 0.0;
      });
}

struct VariantCase {
  const char* name;
  int64_t batch, heads, kv_heads, q_len, kv_len, head_dim;
  bool causal;
  AttentionVariant variant;
};

void PrintTo(const VariantCase& c, std::ostream* out) { *out << c.name; }

class AttentionVariantCases : public ::testing::TestWithParam<VariantCase> {};

// Float64 runs the reference kernel; float32 the fast ones (materialised for short rows, flash for
// T >= 16), whose rounding on N(0, 1) inputs with D <= 8 stays near 1e-6 (as in attention_test.cpp).
TEST_P(AttentionVariantCases, BothKernelsMatchNaiveLoops) {
  const VariantCase& c = GetParam();
  Rng rng(17);
  const Tensor q = randn({c.batch, c.heads, c.q_len, c.head_dim}, rng, 1.0, DType::f64);
  const Tensor k = randn({c.batch, c.kv_heads, c.kv_len, c.head_dim}, rng, 1.0, DType::f64);
  const Tensor v = randn({c.batch, c.kv_heads, c.kv_len, c.head_dim}, rng, 1.0, DType::f64);
  const Tensor truth = naive_attention(q, k, v, c.causal, c.variant);
  const AttentionOptions o{.causal = c.causal, .variant = c.variant};
  EXPECT_TRUE(all_close(ops::attention(q, k, v, o), truth, 1e-12, 1e-12)) << "float64";
  const Tensor out32 = ops::attention(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), o);
  EXPECT_TRUE(all_close(out32, truth, 1e-5, 1e-5)) << "float32";
}

INSTANTIATE_TEST_SUITE_P(
    , AttentionVariantCases,
    ::testing::Values(VariantCase{"window3_causal", 2, 2, 2, 9, 9, 4, true, {.window = 3}},
                      VariantCase{"window3_bidirectional", 2, 2, 1, 9, 9, 4, false, {.window = 3}},
                      VariantCase{"window1_causal_sees_itself", 1, 2, 2, 5, 5, 3, true, {.window = 1}},
                      VariantCase{"window5_Tq3_Tk11", 1, 4, 2, 3, 11, 4, true, {.window = 5}},
                      VariantCase{"window17_T130_flash", 1, 2, 1, 130, 130, 8, true, {.window = 17}},
                      VariantCase{"window40_T130_bidirectional_flash", 1, 2, 2, 130, 130, 8, false, {.window = 40}},
                      VariantCase{"alibi_causal_H4", 2, 4, 2, 7, 7, 4, true, {.alibi = true}},
                      VariantCase{"alibi_bidirectional_H3", 1, 3, 3, 6, 6, 3, false, {.alibi = true}},
                      VariantCase{"alibi_Tq2_Tk9_H6_G2", 1, 6, 2, 2, 9, 4, true, {.alibi = true}},
                      VariantCase{"alibi_T130_flash", 1, 4, 2, 130, 130, 8, true, {.alibi = true}},
                      VariantCase{"alibi_window_T70_flash", 2, 4, 1, 70, 70, 5, true, {.window = 20, .alibi = true}}),
    [](const auto& info) { return std::string(info.param.name); });

// A query at position p with window w depends on keys and values p - w + 1 .. p only: changing all
// others (including future ones, without a causal mask hiding them: w ahead is the bidirectional
// window, and here the queries look back only) leaves its output alone, on both kernels.
TEST(AttentionWindow, KeysOutsideTheWindowChangeNothing) {
  for (DType dt : {DType::f64, DType::f32}) {
    Rng rng(5);
    const int64_t T = 40, w = 4;
    const Tensor q = randn({1, 2, T, 8}, rng, 1.0, dt), k = randn({1, 2, T, 8}, rng, 1.0, dt),
                 v = randn({1, 2, T, 8}, rng, 1.0, dt);
    const AttentionOptions o{.causal = true, .variant = {.window = w}};
    const Tensor out = ops::attention(q, k, v, o);
    // Replace every key and value except those of positions 20 - w + 1 .. 20.
    Tensor k2 = randn(k.shape(), rng, 1.0, dt), v2 = randn(v.shape(), rng, 1.0, dt);
    const int64_t row = 8 * dtype_size(dt);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t j = 20 - w + 1; j <= 20; ++j) {
        std::memcpy(static_cast<std::byte*>(k2.raw_data()) + (h * T + j) * row,
                    static_cast<const std::byte*>(k.raw_data()) + (h * T + j) * row, row);
        std::memcpy(static_cast<std::byte*>(v2.raw_data()) + (h * T + j) * row,
                    static_cast<const std::byte*>(v.raw_data()) + (h * T + j) * row, row);
      }
    const std::vector<double> a = out.to_vector(), b = ops::attention(q, k2, v2, o).to_vector();
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t c = 0; c < 8; ++c)
        EXPECT_EQ(a[(h * T + 20) * 8 + c], b[(h * T + 20) * 8 + c]) << dtype_name(dt) << " head " << h;
  }
}

// With all-zero queries every score is the bias alone, so the weights of query p are
// exp(-m |p - j|) / sum_j' exp(-m |p - j'|): a geometric sequence in the distance, known exactly.
TEST(AttentionAlibi, ZeroQueriesGiveTheBiasSoftmax) {
  for (DType dt : {DType::f64, DType::f32}) {
    Rng rng(9);
    const int64_t H = 4, T = 6;
    const Tensor q = Tensor::zeros({1, H, T, 3}, dt), k = randn({1, H, T, 3}, rng, 1.0, dt),
                 v = randn({1, H, T, 3}, rng, 1.0, dt);
    Tensor weights;
    ops::attention(q, k, v, {.causal = true, .variant = {.alibi = true}}, &weights);
    std::vector<double> want(H * T * T, 0.0);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t p = 0; p < T; ++p) {
        const double r = std::exp2(-8.0 * static_cast<double>(h + 1) / H);  // the slope, from the paper
        double total = 0;
        for (int64_t j = 0; j <= p; ++j) total += std::exp(-r * static_cast<double>(p - j));
        for (int64_t j = 0; j <= p; ++j) want[(h * T + p) * T + j] = std::exp(-r * static_cast<double>(p - j)) / total;
      }
    EXPECT_TRUE(all_close(weights, Tensor::from_vector(want, {1, H, T, T}, DType::f64), 1e-6, 1e-7)) << dtype_name(dt);
  }
}

// Decoding: queries of the last positions over a cache filled chunk by chunk give the rows of one
// attention over the whole sequence, with the variant's bias for each absolute head and position.
TEST(AttentionAppend, VariantsMatchTheFullAttentionRows) {
  const NoGradGuard no_grad;
  for (const AttentionVariant& var : {AttentionVariant{.window = 3}, AttentionVariant{.alibi = true},
                                      AttentionVariant{.window = 2, .alibi = true, .logit_softcap = 0.6}}) {
    for (DType dt : {DType::f64, DType::f32}) {
      Rng rng(13);
      const int64_t H = 6, G = 2, T = 9, D = 4;
      const Tensor q = randn({1, H, T, D}, rng, 1.0, dt), k = randn({1, G, T, D}, rng, 1.0, dt),
                   v = randn({1, G, T, D}, rng, 1.0, dt);
      const std::vector<double> full = ops::attention(q, k, v, {.causal = true, .variant = var}).to_vector();
      ops::KvBuffers cache{Tensor::zeros({1, G, T, D}, dt), Tensor::zeros({1, G, T, D}, dt), 0};
      for (int64_t t = 0; t < T; ++t) {  // one position at a time
        auto column = [&](const Tensor& x) {
          std::vector<double> all = x.to_vector(), one;
          for (int64_t h = 0; h < x.dim(1); ++h) one.insert(one.end(), all.begin() + (h * T + t) * D, all.begin() + (h * T + t + 1) * D);
          return Tensor::from_vector(one, {1, x.dim(1), 1, D}, dt);
        };
        const std::vector<double> step = ops::attention_append(column(q), column(k), column(v), cache, var).to_vector();
        cache.length += 1;
        for (int64_t h = 0; h < H; ++h)
          for (int64_t c = 0; c < D; ++c)
            EXPECT_NEAR(step[h * D + c], full[(h * T + t) * D + c], dt == DType::f64 ? 1e-12 : 1e-5)
                << "window " << var.window << " alibi " << var.alibi << " position " << t << " head " << h;
      }
    }
  }
}

}  // namespace
}  // namespace tf
