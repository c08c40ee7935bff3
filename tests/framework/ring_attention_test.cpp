// Ring attention (framework/ops/ring_attention.h) in one process: the layouts' positions and work,
// and the op on one rank, where it must be ops::attention. tests/dist/ring_attention_mpi.cpp runs it
// on 2 and 4 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
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

TEST(RingLayouts, EveryPositionBelongsToExactlyOneRank) {
  for (RingLayout layout : {RingLayout::zigzag, RingLayout::contiguous})
    for (int ranks : {1, 2, 3, 4, 8}) {
      const int64_t seq = 6 * ranks * ring_chunks_per_rank(layout);
      std::vector<int64_t> all;
      for (int r = 0; r < ranks; ++r) {
        const std::vector<int64_t> mine = ring_positions(layout, r, ranks, seq);
        EXPECT_EQ(static_cast<int64_t>(mine.size()), seq / ranks);
        EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
        all.insert(all.end(), mine.begin(), mine.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<int64_t> expected(static_cast<size_t>(seq));
      std::iota(expected.begin(), expected.end(), 0);
      EXPECT_EQ(all, expected);
    }
  // Zigzag on 2 ranks, T = 8: chunks of 2; rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2.
  EXPECT_EQ(ring_positions(RingLayout::zigzag, 0, 2, 8), (std::vector<int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(ring_positions(RingLayout::zigzag, 1, 2, 8), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_THROW(ring_positions(RingLayout::zigzag, 0, 2, 6), InputError);
}

// Under a causal mask every (query, key <= query) pair is computed once, by the query's rank:
// zigzag shares them equally; contiguous chunks load rank r with r full blocks and one triangle.
TEST(RingLayouts, CausalWorkPerRank) {
  for (int ranks : {2, 3, 4, 8}) {
    const int64_t seq = 10 * 2 * ranks, c = seq / ranks;
    int64_t total = 0;
    for (int r = 0; r < ranks; ++r) {
      const int64_t zigzag = ring_visible_pairs(RingLayout::zigzag, true, r, ranks, seq);
      EXPECT_EQ(zigzag, ring_visible_pairs(RingLayout::zigzag, true, 0, ranks, seq));
      EXPECT_EQ(ring_visible_pairs(RingLayout::contiguous, true, r, ranks, seq), r * c * c + c * (c + 1) / 2);
      EXPECT_EQ(ring_visible_pairs(RingLayout::zigzag, false, r, ranks, seq), seq * c);
      total += zigzag;
    }
    EXPECT_EQ(total, seq * (seq + 1) / 2);
  }
}

// One rank: a single block, merged into nothing, is attention itself (outputs and gradients).
TEST(RingAttention, OnOneRankIsAttention) {
  dist::Comm& comm = dist::Comm::world();
  ASSERT_EQ(comm.size(), 1);
  for (bool causal : {true, false})
    for (RingLayout layout : {RingLayout::zigzag, RingLayout::contiguous}) {
      Rng rng(5);
      const Tensor q0 = randn({2, 4, 10, 6}, rng, 1.0, DType::f64), k0 = randn({2, 2, 10, 6}, rng, 1.0, DType::f64),
                   v0 = randn({2, 2, 10, 3}, rng, 1.0, DType::f64), w = randn({2, 4, 10, 3}, rng, 1.0, DType::f64);
      Tensor q = q0.clone().set_requires_grad(), k = k0.clone().set_requires_grad(), v = v0.clone().set_requires_grad();
      Tensor rq = q0.clone().set_requires_grad(), rk = k0.clone().set_requires_grad(),
             rv = v0.clone().set_requires_grad();
      const Tensor expected = attention(q, k, v, {.causal = causal});
      backward(sum(mul(expected, w)));
      const Tensor got = ring_attention(rq, rk, rv, {.causal = causal, .layout = layout}, comm);
      backward(sum(mul(got, w)));
      for (auto [a, b] : {std::pair{got, expected}, {rq.grad(), q.grad()}, {rk.grad(), k.grad()}, {rv.grad(), v.grad()}})
        for (int64_t i = 0; i < a.numel(); ++i) ASSERT_NEAR(a.at(i), b.at(i), 1e-12 * (1 + std::abs(b.at(i)))) << i;
    }
}

}  // namespace
}  // namespace tf::ops
