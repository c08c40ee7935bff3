// Ring attention (framework/ops/ring_attention.h) on 2 and 4 ranks against single-process attention
// of the whole sequence, which every rank also computes: outputs and the gradients of q, k and v,
// row by row at the positions the rank holds. float64 to 1e-12; float32 through the fast kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/dist/comm.h"
#include "framework/ops/attention.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"
#include "framework/ops/ring_attention.h"
#include "framework/random.h"

namespace tf::ops {
namespace {

// Rows `positions` of the T axis of a (B, H, T, D) tensor: (B, H, |positions|, D).
Tensor rows_of(const Tensor& full, const std::vector<int64_t>& positions) {
  const int64_t b = full.dim(0), h = full.dim(1), t = full.dim(2), d = full.dim(3);
  const int64_t n = static_cast<int64_t>(positions.size());
  Tensor part = Tensor::empty({b, h, n, d}, full.dtype());
  dispatch(full.dtype(), [&](auto zero) {
    using T = decltype(zero);
    for (int64_t bh = 0; bh < b * h; ++bh)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t e = 0; e < d; ++e)
          part.data<T>()[(bh * n + i) * d + e] = full.data<T>()[(bh * t + positions[i]) * d + e];
  });
  return part;
}

double max_relative_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double worst = 0, scale = 1e-30;
  for (int64_t i = 0; i < a.numel(); ++i) scale = std::max(scale, std::abs(b.at(i)));
  for (int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, std::abs(a.at(i) - b.at(i)) / scale);
  return worst;
}

struct Case {
  bool causal;
  RingLayout layout;
  int64_t batch, heads, kv_heads, chunk, head_dim, value_dim;
  DType dtype;
  double tolerance;
  kernels::AttentionVariant variant = {};
};

void check_case(const Case& c) {
  dist::Comm& comm = dist::Comm::world();
  const int ranks = comm.size(), rank = comm.rank();
  const int64_t seq = c.chunk * ring_chunks_per_rank(c.layout) * ranks;
  SCOPED_TRACE(::testing::Message() << (c.causal ? "causal" : "bidirectional") << ", "
                                    << (c.layout == RingLayout::zigzag ? "zigzag" : "contiguous") << ", T = " << seq
                                    << ", " << ranks << " ranks");
  Rng rng(1234);  // the same on every rank
  const Tensor q = randn({c.batch, c.heads, seq, c.head_dim}, rng, 1.0, c.dtype);
  const Tensor k = randn({c.batch, c.kv_heads, seq, c.head_dim}, rng, 1.0, c.dtype);
  const Tensor v = randn({c.batch, c.kv_heads, seq, c.value_dim}, rng, 1.0, c.dtype);
  const Tensor weight = randn({c.batch, c.heads, seq, c.value_dim}, rng, 1.0, c.dtype);  // loss = sum(out * weight)

  // Single process, whole sequence.
  Tensor fq = q.clone().set_requires_grad(), fk = k.clone().set_requires_grad(), fv = v.clone().set_requires_grad();
  const Tensor full_out = attention(fq, fk, fv, {.causal = c.causal, .variant = c.variant});
  backward(sum(mul(full_out, weight)));

  // This rank's rows, through the ring.
  const std::vector<int64_t> mine = ring_positions(c.layout, rank, ranks, seq);
  Tensor lq = rows_of(q, mine).set_requires_grad(), lk = rows_of(k, mine).set_requires_grad(),
         lv = rows_of(v, mine).set_requires_grad();
  const Tensor out = ring_attention(lq, lk, lv, {.causal = c.causal, .layout = c.layout, .variant = c.variant}, comm);
  backward(sum(mul(out, rows_of(weight, mine))));

  EXPECT_LE(max_relative_difference(out, rows_of(full_out, mine)), c.tolerance) << "output";
  EXPECT_LE(max_relative_difference(lq.grad(), rows_of(fq.grad(), mine)), c.tolerance) << "dq";
  EXPECT_LE(max_relative_difference(lk.grad(), rows_of(fk.grad(), mine)), c.tolerance) << "dk";
  EXPECT_LE(max_relative_difference(lv.grad(), rows_of(fv.grad(), mine)), c.tolerance) << "dv";
}

TEST(RingAttention, Float64MatchesSingleProcessAttention) {
  for (bool causal : {true, false})
    for (RingLayout layout : {RingLayout::zigzag, RingLayout::contiguous}) {
      check_case({causal, layout, 2, 4, 2, 5, 8, 8, DType::f64, 1e-12});   // grouped-query, odd chunk
      check_case({causal, layout, 1, 3, 3, 1, 4, 6, DType::f64, 1e-12});   // one position per chunk, D_v != D
    }
}

TEST(RingAttention, Float32ThroughTheFastKernels) {
  for (bool causal : {true, false}) check_case({causal, RingLayout::zigzag, 1, 2, 2, 67, 16, 16, DType::f32, 2e-5});
}

// Every option of Note [variant options] through the ring: those whose row says `ring` give the
// single-process result (windows narrower than a chunk and wider, so that some chunk pairs are
// skipped whole and others cut), the others are refused by name. A new row without a case here fails.
TEST(RingAttention, EveryAttentionVariantMatchesOrIsRefused) {
  using kernels::AttentionVariant;
  const std::vector<AttentionVariant> variants = {
      {.window = 3},
      {.window = 11},
      {.alibi = true},
      {.logit_softcap = 0.7},
      {.window = 6, .alibi = true, .logit_softcap = 1.5},
      {.window = 3, .global_tokens = 1},
      {.window = 3, .random_blocks = 1, .sparse_block = 2, .random_seed = 5},
      {.relative_buckets = 4, .relative_max_distance = 8},
  };
  for (const kernels::VariantOption& option : kernels::kVariantOptions) {
    bool covered = false;
    for (const AttentionVariant& v : variants) covered |= option.used(v);
    EXPECT_TRUE(covered) << option.key << " has no case";
  }
  for (const AttentionVariant& v : variants) {
    const std::vector<std::string> refused = kernels::variant_keys_used(v, true);
    SCOPED_TRACE(::testing::Message() << "variant using " << kernels::variant_keys_used(v).front());
    for (bool causal : {true, false})
      for (RingLayout layout : {RingLayout::zigzag, RingLayout::contiguous}) {
        const Case c{causal, layout, 1, 4, 2, 5, 4, 4, DType::f64, 1e-12, v};
        if (refused.empty()) {
          check_case(c);
        } else {
          const int64_t local = c.chunk * ring_chunks_per_rank(layout);
          Tensor q = Tensor::zeros({1, 4, local, 4}, DType::f64), k = Tensor::zeros({1, 2, local, 4}, DType::f64);
          EXPECT_THROW(ring_attention(q, k, k, {.causal = causal, .layout = layout, .variant = v}, dist::Comm::world()),
                       Error);
        }
      }
    if (refused.empty()) check_case({true, RingLayout::zigzag, 1, 2, 2, 67, 16, 16, DType::f32, 2e-5, v});
  }
}

// The work each rank does (Note [ring attention]): zigzag gives every rank the same share of a causal
// mask; contiguous chunks give rank r a share proportional to 2r + 1.
TEST(RingAttention, ZigzagBalancesTheCausalWork) {
  dist::Comm& comm = dist::Comm::world();
  const int n = comm.size();
  const int64_t seq = 64 * 2 * n;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ring_visible_pairs(RingLayout::zigzag, true, r, n, seq), ring_visible_pairs(RingLayout::zigzag, true, 0, n, seq));
    const int64_t c = seq / n;  // contiguous: r full blocks and one diagonal
    EXPECT_EQ(ring_visible_pairs(RingLayout::contiguous, true, r, n, seq), r * c * c + c * (c + 1) / 2);
    EXPECT_EQ(ring_visible_pairs(RingLayout::contiguous, false, r, n, seq), seq * c);
  }
  int64_t total = 0;
  for (int r = 0; r < n; ++r) total += ring_visible_pairs(RingLayout::zigzag, true, r, n, seq);
  EXPECT_EQ(total, seq * (seq + 1) / 2);  // every causal pair once
}

}  // namespace
}  // namespace tf::ops
