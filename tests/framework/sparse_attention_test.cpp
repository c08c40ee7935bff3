// Sparse attention patterns (Note [attention variants]): Longformer's global tokens and BigBird's
// random blocks on top of a sliding window. Both kernels and decoding against naive loops whose
// visibility rule is written here from the docs (docs/models.md); the tiled kernel's block skipping
// never drops a block that holds a visible key.
#include <gtest/gtest.h>

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
using testing::all_close;

// Query position p sees key j (docs/models.md): causally allowed, and in p's window, or j or p among
// the first g positions, or j's block among the r blocks drawn for p's block: block
// floor(uniform_at(seed, qb r + k) * choices) for k < r, choices = qb + 1 (causal) or all blocks.
bool sees(const AttentionVariant& v, bool causal, int64_t T, int64_t p, int64_t j) {
  if (causal && j > p) return false;
  const bool in_window = causal ? p - j < v.window : (j > p - v.window && j < p + v.window);
  if (in_window || j < v.global_tokens || p < v.global_tokens) return true;
  const int64_t bs = v.sparse_block, qb = p / bs, choices = causal ? qb + 1 : (T + bs - 1) / bs;
  for (int64_t k = 0; k < v.random_blocks; ++k)
    if (static_cast<int64_t>(uniform_at(v.random_seed, qb * v.random_blocks + k) * choices) == j / bs) return true;
  return false;
}

struct SparseCase {
  const char* name;
  int64_t batch, heads, kv_heads, len, head_dim;
  bool causal;
  AttentionVariant variant;
};

TEST(SparseAttention, BothKernelsMatchNaiveLoops) {
  const std::vector<SparseCase> cases = {
      {"longformer_causal_T40_flash", 1, 2, 2, 40, 4, true, {.window = 4, .global_tokens = 3}},
      {"longformer_bidirectional_T9", 2, 2, 1, 9, 3, false, {.window = 2, .global_tokens = 1}},
      {"bigbird_causal_T130_flash", 1, 2, 1, 130, 8,
       true, {.window = 8, .global_tokens = 2, .random_blocks = 2, .sparse_block = 16, .random_seed = 5}},
      {"bigbird_bidirectional_T70_GQA", 1, 4, 2, 70, 5,
       false, {.window = 5, .global_tokens = 1, .random_blocks = 1, .sparse_block = 8, .random_seed = 9}},
      {"bigbird_random_only_T33", 2, 2, 2, 33, 4,
       true, {.window = 3, .random_blocks = 3, .sparse_block = 4, .random_seed = 1}},
  };
  for (const SparseCase& c : cases) {
    SCOPED_TRACE(c.name);
    Rng rng(31);
    const Tensor q = randn({c.batch, c.heads, c.len, c.head_dim}, rng, 1.0, DType::f64);
    const Tensor k = randn({c.batch, c.kv_heads, c.len, c.head_dim}, rng, 1.0, DType::f64);
    const Tensor v = randn({c.batch, c.kv_heads, c.len, c.head_dim}, rng, 1.0, DType::f64);
    const Tensor truth = testing::naive_attention_rows(
        q, k, v, [&](int64_t, int64_t p, int64_t j) { return sees(c.variant, c.causal, c.len, p, j); },
        [](int64_t, int64_t, int64_t) { return 0.0; });
    const ops::AttentionOptions o{.causal = c.causal, .variant = c.variant};
    EXPECT_TRUE(all_close(ops::attention(q, k, v, o), truth, 1e-12, 1e-12)) << "float64";
    EXPECT_TRUE(all_close(ops::attention(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), o), truth, 1e-5, 1e-5))
        << "float32";
  }
}

// block_allowed may say true for an empty block, never false for a block holding a visible pair.
TEST(SparseAttention, BlockSkippingNeverDropsAVisibleKey) {
  for (bool causal : {true, false}) {
    const int64_t T = 200;
    const AttentionVariant var{.window = 7, .global_tokens = 2, .random_blocks = 2, .sparse_block = 16, .random_seed = 3};
    const kernels::AttentionMask mask = kernels::AttentionMask::of(var, causal);
    kernels::AttentionDims d;
    d.q_len = d.kv_len = T;
    int64_t skipped = 0;
    for (int64_t bq : {13, 64})
      for (int64_t i0 = 0; i0 < T; i0 += bq)
        for (int64_t j0 = 0; j0 < T; j0 += 17) {
          const int64_t i1 = std::min(T, i0 + bq), j1 = std::min(T, j0 + 17);
          bool any = false;
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = j0; j < j1; ++j) any = any || sees(var, causal, T, i, j);
          const bool allowed = mask.block_allowed(d, i0, i1, j0, j1);
          EXPECT_TRUE(!any || allowed) << "rows " << i0 << ".." << i1 << " keys " << j0 << ".." << j1;
          skipped += !allowed;
        }
    EXPECT_GT(skipped, 0) << "some blocks are empty and skipped";
  }
}

// Decoding one position at a time over a cache gives the rows of the full attention.
TEST(SparseAttention, AppendMatchesTheFullAttentionRows) {
  const NoGradGuard no_grad;
  const AttentionVariant var{.window = 2, .global_tokens = 2, .random_blocks = 1, .sparse_block = 3, .random_seed = 4};
  Rng rng(32);
  const int64_t H = 4, G = 2, T = 14, D = 4;
  const Tensor q = randn({1, H, T, D}, rng), k = randn({1, G, T, D}, rng), v = randn({1, G, T, D}, rng);
  const std::vector<double> full = ops::attention(q, k, v, {.causal = true, .variant = var}).to_vector();
  ops::KvBuffers cache{Tensor::zeros({1, G, T, D}), Tensor::zeros({1, G, T, D}), 0};
  for (int64_t t = 0; t < T; ++t) {
    auto column = [&](const Tensor& x) {
      std::vector<double> all = x.to_vector(), one;
      for (int64_t h = 0; h < x.dim(1); ++h) one.insert(one.end(), all.begin() + (h * T + t) * D, all.begin() + (h * T + t + 1) * D);
      return Tensor::from_vector(one, {1, x.dim(1), 1, D}, DType::f32);
    };
    const std::vector<double> step = ops::attention_append(column(q), column(k), column(v), cache, var).to_vector();
    ++cache.length;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t c = 0; c < D; ++c) EXPECT_NEAR(step[h * D + c], full[(h * T + t) * D + c], 1e-5) << t << " " << h;
  }
}

}  // namespace
}  // namespace tf
