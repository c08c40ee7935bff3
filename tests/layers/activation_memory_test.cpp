// What a transformer block keeps for its backward, counted in bytes by the storage pool: exactly
// the tensors some backward reads (Note [gradient slots] in framework/autograd/tape.h), and none
// of the activations no backward reads (the fused QKV projection, the two residual branches).
#include <gtest/gtest.h>

#include "framework/autograd/tape.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"
#include "framework/storage_pool.h"
#include "layers/block.h"
#include "model_fixtures.h"
#include "support/compare.h"

namespace tf::layers {
namespace {

constexpr int64_t B = 2, T = 5, C = 12, H = 3;

TransformerBlock make_block() {
  TransformerBlock::Options o;
  o.attn.d_model = C;
  o.attn.n_heads = H;
  o.attn.causal = true;
  o.mlp.d_model = C;  // d_ff = 4 C
  o.pre_norm = true;
  Init init{Rng(1)};
  return TransformerBlock(o, init);
}

size_t live_bytes() { return storage_pool::stats().live_bytes; }

class ActivationMemory : public ::testing::Test {
 protected:
  void TearDown() override { tape().clear(); }
};

// Pre-LN block, float32: what each backward reads, in units of one (B, T, C) activation:
//   ln_1: its input (the caller's x, not counted) and output 1; the attention: q, k, v 3 and its
//   output 1; the output projection: the merged heads 1; ln_2: its input (the first residual
//   sum) 1 and output 1; the MLP's GELU + projection (ops::gelu_linear): GELU's input 4, its
//   output being recomputed. With the block's own output: 13 units. Plus per row: the two layer
//   norms' mean and 1 / std (4 B T floats) and the attention's log-sum-exp (B H T).
TEST_F(ActivationMemory, ABlockKeepsWhatItsBackwardsReadAndNothingElse) {
  const TransformerBlock block = make_block();
  const Tensor x = testing::random_normal({B, T, C}, 3).to(DType::f32).set_requires_grad();
  Context training;
  training.training = true;
  const size_t before = live_bytes();
  Tensor y = block.forward(x, Tensor(), training);
  const size_t unit = B * T * C * sizeof(float);
  const size_t row_stats = (4 * B * T + B * H * T) * sizeof(float);
  EXPECT_EQ(live_bytes() - before, 13 * unit + row_stats)
      << "in units of (B, T, C): " << static_cast<double>(live_bytes() - before - row_stats) / unit;

  backward(ops::sum(y));  // the gradients are left in x and the parameters; every activation is freed
  y = Tensor();
  ParamList params;
  block.parameters(params, "");
  size_t param_bytes = 0;
  for (const auto& p : params) param_bytes += p.tensor.nbytes();
  EXPECT_EQ(live_bytes() - before, unit + param_bytes) << "only the gradients of x and the parameters should remain";
}

// train.recompute blocks (Note [recomputed blocks] in layers/block.cpp): until backward the block
// keeps nothing but its output (x is the caller's); backward runs it again and leaves the same
// gradients, bit for bit, as the block that kept its activations, and nothing else behind.
TEST_F(ActivationMemory, ARecomputedBlockKeepsOnlyItsOutputAndGivesTheSameGradients) {
  const TransformerBlock block = make_block();
  ParamList params;
  block.parameters(params, "");
  // kept: bytes held between forward and backward; left: bytes after backward besides the gradients.
  auto gradients = [&](bool recompute, size_t* kept, size_t* left) {
    const Tensor x = testing::random_normal({B, T, C}, 3).to(DType::f32).set_requires_grad();
    Rng rng(5);
    Context training{.training = true, .rng = &rng, .recompute = recompute};
    const size_t before = live_bytes();
    Tensor y = block.forward(x, Tensor(), training);
    *kept = live_bytes() - before;
    backward(ops::sum(ops::mul(y, y)));
    y = Tensor();
    size_t gradient_bytes = x.grad().nbytes();
    for (const auto& p : params) gradient_bytes += p.tensor.grad().nbytes();
    *left = live_bytes() - before - gradient_bytes;
    std::vector<Tensor> out{x.grad()};
    for (const auto& p : params) {
      out.push_back(p.tensor.grad().clone());
      Tensor(p.tensor).zero_grad();
    }
    return out;
  };
  size_t kept_plain = 0, kept_recomputed = 0, left_plain = 1, left_recomputed = 1;
  const std::vector<Tensor> plain = gradients(false, &kept_plain, &left_plain);
  const std::vector<Tensor> recomputed = gradients(true, &kept_recomputed, &left_recomputed);
  EXPECT_EQ(kept_recomputed, B * T * C * sizeof(float));
  EXPECT_GT(kept_plain, 13 * kept_recomputed);
  ASSERT_EQ(plain.size(), recomputed.size());
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(tf::testing::all_close(plain[i], recomputed[i], 0, 0)) << (i == 0 ? "x" : params[i - 1].name);
  EXPECT_EQ(tape().size(), 0u);
  EXPECT_EQ(left_plain, 0u);
  EXPECT_EQ(left_recomputed, 0u) << "the replay left activations behind";
}

// Without recording, each activation dies with its last use: only the output remains.
TEST_F(ActivationMemory, InferenceKeepsOnlyTheOutput) {
  const TransformerBlock block = make_block();
  const Tensor x = testing::random_normal({B, T, C}, 3).to(DType::f32);
  const NoGradGuard no_grad;
  const size_t before = live_bytes();
  const Tensor y = block.forward(x, Tensor(), Context{});
  EXPECT_EQ(live_bytes() - before, B * T * C * sizeof(float));
}

}  // namespace
}  // namespace tf::layers
