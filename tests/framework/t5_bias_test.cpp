// T5's relative position bias (Note [attention variants]): buckets against a table computed by
// hand from the paper's definition, both fast float32 kernels (materialised and flash) and the
// decoding path against naive loops in double, forward and every gradient, the table's included.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/ops/attention.h"
#include "framework/ops/attention_cache.h"
#include "framework/random.h"
#include "naive_attention.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

using kernels::AttentionVariant;
using kernels::t5_bucket;
using testing::all_close;

TEST(T5Buckets, MatchAHandComputedTable) {
  // 32 buckets, max distance 128, bidirectional: 16 per direction, 8 exact, then
  // 8 + floor(ln(n / 8) / ln(16) * 8): n = 12 -> 8 + floor(1.17) = 9, 16 -> 10, 32 -> 12, 64 -> 14,
  // 127 -> 8 + floor(7.98) = 15, and beyond; keys after the query (n < 0) add 16.
  const std::vector<std::pair<int64_t, int64_t>> bidirectional = {
      {0, 0}, {1, 1}, {7, 7}, {8, 8}, {12, 9}, {16, 10}, {31, 11}, {32, 12}, {64, 14}, {127, 15}, {128, 15},
      {5000, 15}, {-1, 17}, {-7, 23}, {-16, 26}, {-128, 31}};
  for (auto [n, bucket] : bidirectional) EXPECT_EQ(t5_bucket(n, true, 32, 128), bucket) << "n = " << n;
  // Causal: all 32 buckets for n >= 0, 16 exact, then 16 + floor(ln(n / 16) / ln(8) * 16):
  // 32 -> 21, 64 -> 26, 128 -> 31 (32 clamped); n < 0 counts as 0.
  const std::vector<std::pair<int64_t, int64_t>> causal = {{-5, 0}, {0, 0}, {15, 15}, {16, 16}, {32, 21},
                                                           {64, 26}, {100, 30}, {128, 31}, {1000, 31}};
  for (auto [n, bucket] : causal) EXPECT_EQ(t5_bucket(n, false, 32, 128), bucket) << "n = " << n;
  // ln(100 / 16) / ln(8) * 16 = 14.1 -> 30.
  EXPECT_EQ(16 + static_cast<int64_t>(std::log(100.0 / 16) / std::log(8.0) * 16), 30);
}

// softmax(scale q.k + table[h, bucket(p - j)]) V over the visible keys, in double, with padding.
Tensor naive_t5(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& table, bool causal,
                const AttentionVariant& var, const std::vector<int>& keep) {
  const int64_t Tk = k.dim(2);
  const std::vector<double> W = table.to_vector();
  return testing::naive_attention_rows(
      q, k, v,
      [&](int64_t b, int64_t p, int64_t j) { return !(causal && j > p) && (keep.empty() || keep[b * Tk + j]); },
      [&](int64_t h, int64_t p, int64_t j) {
        return W[h * var.relative_buckets + t5_bucket(p - j, !causal, var.relative_buckets, var.relative_max_distance)];
      });
}

struct T5Case {
  const char* name;
  int64_t batch, heads, kv_heads, q_len, kv_len, head_dim, buckets, max_distance;
  bool causal, padded;
};

// Output and the gradients of q, k, v and the table, float32 fast kernels against float64.
TEST(T5Bias, FastKernelsMatchNaiveLoopsAndFloat64Gradients) {
  const std::vector<T5Case> cases = {
      {"materialised_causal", 2, 3, 1, 7, 7, 4, 8, 16, true, false},
      {"materialised_bidirectional_padded", 2, 2, 2, 9, 9, 3, 6, 8, false, true},
      {"flash_causal_T70_GQA", 1, 4, 2, 70, 70, 8, 32, 128, true, false},
      {"flash_bidirectional_T130_padded", 2, 2, 1, 130, 130, 5, 16, 64, false, true},
      {"causal_Tq3_Tk17", 1, 2, 2, 3, 17, 4, 8, 8, true, false},
  };
  for (const T5Case& c : cases) {
    SCOPED_TRACE(c.name);
    Rng rng(21);
    const Tensor q = randn({c.batch, c.heads, c.q_len, c.head_dim}, rng, 1.0, DType::f64);
    const Tensor k = randn({c.batch, c.kv_heads, c.kv_len, c.head_dim}, rng, 1.0, DType::f64);
    const Tensor v = randn({c.batch, c.kv_heads, c.kv_len, c.head_dim}, rng, 1.0, DType::f64);
    const Tensor table = randn({c.heads, c.buckets}, rng, 1.0, DType::f64);
    const Tensor dout = randn({c.batch, c.heads, c.q_len, c.head_dim}, rng, 1.0, DType::f64);
    std::vector<int> keep;
    std::vector<double> padding;
    if (c.padded) {
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t j = 0; j < c.kv_len; ++j) keep.push_back(b == 1 && j >= c.kv_len - 3 ? 0 : 1);
      padding.assign(keep.begin(), keep.end());
    }
    const AttentionVariant var{.relative_buckets = c.buckets, .relative_max_distance = c.max_distance};
    EXPECT_TRUE(all_close(ops::attention(q, k, v,
                                         {.causal = c.causal,
                                          .key_padding = c.padded ? Tensor::from_vector(padding, {c.batch, c.kv_len},
                                                                                        DType::f64)
                                                                  : Tensor(),
                                          .variant = var, .relative_bias = table}),
                          naive_t5(q, k, v, table, c.causal, var, keep), 1e-12, 1e-12))
        << "float64 reference";
    // The gradients of one forward + backward in a dtype.
    auto run = [&](DType dtype) {
      std::vector<Tensor> in = {q.to(dtype), k.to(dtype), v.to(dtype), table.to(dtype)};
      for (Tensor& t : in) t.set_requires_grad();
      const Tensor pad = c.padded ? Tensor::from_vector(padding, {c.batch, c.kv_len}, dtype) : Tensor();
      const Tensor out = ops::attention(in[0], in[1], in[2],
                                        {.causal = c.causal, .key_padding = pad, .variant = var, .relative_bias = in[3]});
      tape().backward(out, dout.to(dtype));
      return std::vector<Tensor>{out, in[0].grad(), in[1].grad(), in[2].grad(), in[3].grad()};
    };
    const auto want = run(DType::f64), got = run(DType::f32);
    const char* names[] = {"out", "dq", "dk", "dv", "dtable"};
    // Sums of up to T_k products of O(1) terms; the table's gradient sums up to B H T_q T_k of them
    // by bucket (~1e4 at T = 130), so its float32 rounding is larger.
    for (size_t e = 0; e < want.size(); ++e)
      EXPECT_TRUE(all_close(got[e], want[e], e == 4 ? 1e-4 : 2e-5, e == 4 ? 1e-4 : 2e-5)) << names[e];
  }
}

// Decoding (ops::attention_append) gives the rows of the full attention with the same table.
TEST(T5Bias, AppendMatchesTheFullAttentionRows) {
  NoGradGuard no_grad;
  Rng rng(22);
  const int64_t H = 4, G = 2, T = 9, D = 4;
  const AttentionVariant var{.relative_buckets = 8, .relative_max_distance = 8};
  const Tensor q = randn({1, H, T, D}, rng), k = randn({1, G, T, D}, rng), v = randn({1, G, T, D}, rng);
  const Tensor table = randn({H, 8}, rng);
  const Tensor full = ops::attention(q, k, v, {.causal = true, .variant = var, .relative_bias = table});
  ops::KvBuffers cache{Tensor::zeros({1, G, T, D}), Tensor::zeros({1, G, T, D}), 0};
  const std::vector<double> want = full.to_vector();
  for (int64_t t = 0; t < T; ++t) {
    auto row = [&](const Tensor& x) {  // (1, heads, 1, D): position t
      const std::vector<double> all = x.to_vector();
      std::vector<double> r;
      for (int64_t h = 0; h < x.dim(1); ++h) r.insert(r.end(), all.begin() + (h * T + t) * D, all.begin() + (h * T + t + 1) * D);
      return Tensor::from_vector(r, {1, x.dim(1), 1, D}, DType::f32);
    };
    const Tensor got = ops::attention_append(row(q), row(k), row(v), cache, var, table);
    const std::vector<double> g = got.to_vector();
    for (int64_t h = 0; h < H; ++h)
      for (int64_t c = 0; c < D; ++c)
        EXPECT_NEAR(g[h * D + c], want[(h * T + t) * D + c], 2e-6) << "position " << t << " head " << h;
    ++cache.length;
  }
}

// Every op that takes the table checks it the same way, naming itself.
TEST(T5Bias, AWrongTableIsRefusedByEveryOp) {
  NoGradGuard no_grad;
  Rng rng(23);
  const AttentionVariant var{.relative_buckets = 8, .relative_max_distance = 8};
  const Tensor q = randn({1, 2, 1, 4}, rng), kv = randn({1, 2, 1, 4}, rng), wrong = randn({2, 6}, rng);
  testing::expect_error([&] { ops::attention(q, kv, kv, {.causal = true, .variant = var, .relative_bias = wrong}); },
                        "attention: relative_bias must be (H, buckets) = (2, 8)");
  const ops::KvBuffers cache{Tensor::zeros({1, 2, 3, 4}), Tensor::zeros({1, 2, 3, 4}), 0};
  testing::expect_error([&] { ops::attention_append(q, kv, kv, cache, var, wrong); },
                        "attention_append: relative_bias must be (H, buckets) = (2, 8)");
  testing::expect_error([&] { ops::attention_append(q, kv, kv, cache, {}, randn({2, 8}, rng)); },
                        "attention_append: a relative_bias table needs variant.relative_buckets > 0");
}

}  // namespace
}  // namespace tf
