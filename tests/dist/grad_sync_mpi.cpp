// GradientSync (train/grad_sync.h) under mpirun with small buckets, so that most start during
// backward (Note [final gradients]): every rank ends with the sum of every rank's gradient, added in
// rank order, bit for bit as one process computes it from each rank's batch in turn; with the
// blocks recomputed during backward too (Note [recomputed blocks] in layers/block.cpp), whose node
// holds the block's parameters until its replay has added to their gradients. A bucket started
// before its gradients were final would carry a partial sum.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/dist/comm.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"
#include "layers/block.h"
#include "train/grad_sync.h"

namespace tf::train {
namespace {

constexpr int64_t B = 2, T = 7, C = 16, kBlocks = 3;

struct Stack {
  std::vector<layers::TransformerBlock> blocks;
  std::vector<Tensor> params;  // in model order
  Stack() {
    layers::TransformerBlock::Options o;
    o.attn.d_model = C;
    o.attn.n_heads = 2;
    o.attn.causal = true;
    o.mlp.d_model = C;
    layers::Init init{Rng(11)};
    for (int64_t i = 0; i < kBlocks; ++i) blocks.emplace_back(o, init);
    layers::ParamList list;
    for (const auto& b : blocks) b.parameters(list, "");
    for (const auto& p : list) params.push_back(p.tensor);
  }
  // The batch rank r draws: its own numbers.
  static Tensor batch(int r) {
    Rng rng(100 + static_cast<uint64_t>(r));
    Tensor x = Tensor::empty({B, T, C}, DType::f32);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(rng.normal());
    return x;
  }
  void backward_of(const Tensor& x, bool recompute) const {
    layers::Context ctx{.training = true, .recompute = recompute};
    Tensor h = x;
    for (int64_t i = 0; i < kBlocks; ++i) h = blocks[static_cast<size_t>(i)].forward(h, Tensor(), ctx.in_block(i));
    tf::backward(ops::sum(ops::mul(h, h)));
  }
  void zero_grads() const {
    for (Tensor p : params) p.zero_grad();
  }
};

class GradSync : public ::testing::TestWithParam<bool> {};

TEST_P(GradSync, BucketsStartedDuringBackwardSumEveryRanksGradientInRankOrder) {
  const bool recompute = GetParam();
  dist::Comm& comm = dist::Comm::world();
  const Stack stack;
  // What one process adds: rank 0's gradient, then rank 1's, ... (float32, in that order).
  std::vector<std::vector<float>> expected(stack.params.size());
  for (int r = 0; r < comm.size(); ++r) {
    stack.zero_grads();
    stack.backward_of(Stack::batch(r), false);
    for (size_t i = 0; i < stack.params.size(); ++i) {
      const Tensor g = stack.params[i].grad();
      if (r == 0) expected[i].assign(g.data<float>(), g.data<float>() + g.numel());
      else
        for (int64_t j = 0; j < g.numel(); ++j) expected[i][static_cast<size_t>(j)] += g.data<float>()[j];
    }
  }
  stack.zero_grads();
  GradientSync sync(stack.params, comm, {.bucket_bytes = 2048, .fixed_order = true});
  sync.begin_micro(0, 1);
  stack.backward_of(Stack::batch(comm.rank()), recompute);
  sync.end_micro(0, 1);
  for (size_t i = 0; i < stack.params.size(); ++i) {
    const Tensor g = stack.params[i].grad();
    ASSERT_EQ(static_cast<size_t>(g.numel()), expected[i].size());
    EXPECT_EQ(std::memcmp(g.data<float>(), expected[i].data(), expected[i].size() * sizeof(float)), 0)
        << "parameter " << i << " of " << stack.params.size();
  }
  EXPECT_GE(sync.bucket_count(), 6);
  EXPECT_GT(sync.stats().buckets_during_backward, sync.bucket_count() / 2) << "buckets should start during backward";
}

INSTANTIATE_TEST_SUITE_P(Blocks, GradSync, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "recomputed" : "kept"; });

}  // namespace
}  // namespace tf::train
