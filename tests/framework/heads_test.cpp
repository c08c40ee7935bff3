// split_heads and merge_heads against the chains of shape ops they replace (split + reshape +
// transpose, transpose + reshape), forward and backward, on odd sizes and on one large enough for
// the threaded copy; attention_qkv against split_heads + attention + merge_heads; and their errors.
// (Gradients against finite differences: the op cases.)
#include <gtest/gtest.h>

#include <vector>

#include "framework/autograd/tape.h"
#include "framework/ops/attention.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/heads.h"
#include "framework/ops/reduce.h"
#include "framework/ops/shape.h"
#include "framework/random.h"
#include "support/errors.h"

namespace tf {
namespace {

struct HeadsCase {
  int64_t batch, seq;
  std::vector<int64_t> heads;
  int64_t head_dim;
};

// The same chain as the attention layer used before split_heads existed.
std::vector<Tensor> split_heads_by_shape_ops(const Tensor& x, const HeadsCase& c) {
  std::vector<int64_t> widths;
  for (int64_t h : c.heads) widths.push_back(h * c.head_dim);
  std::vector<Tensor> out;
  const auto parts = ops::split(x, widths, -1);
  for (size_t g = 0; g < parts.size(); ++g)
    out.push_back(ops::transpose(ops::reshape(parts[g], {c.batch, c.seq, c.heads[g], c.head_dim}), 1, 2));
  return out;
}

// Copies are exact: forward values and the gradient of sum(w_g * out_g) with random weights, used
// groups chosen by `use`, must equal the shape-op chain's bit for bit.
void check_split_heads(const HeadsCase& c, const std::vector<bool>& use) {
  Rng rng(7);
  int64_t total = 0;
  for (int64_t h : c.heads) total += h;
  Tensor x = randn({c.batch, c.seq, total * c.head_dim}, rng).set_requires_grad();
  std::vector<Tensor> weights;
  for (int64_t h : c.heads) weights.push_back(randn({c.batch, h, c.seq, c.head_dim}, rng));
  auto loss_and_grad = [&](std::span<const Tensor> outs) {
    Tensor loss = Tensor::full({}, 0.0);
    for (size_t g = 0; g < outs.size(); ++g)
      if (use[g]) loss = ops::add(loss, ops::sum(ops::mul(outs[g], weights[g])));
    backward(loss);
    const Tensor grad = x.grad().clone();
    x.zero_grad();
    return grad;
  };
  const auto fused = ops::split_heads(x, c.heads, c.head_dim);
  const std::vector<Tensor> chain = split_heads_by_shape_ops(x, c);
  ASSERT_EQ(fused.size(), chain.size());
  for (size_t g = 0; g < fused.size(); ++g) {
    ASSERT_EQ(fused[g].shape(), chain[g].shape());
    EXPECT_EQ(fused[g].to_vector(), chain[g].to_vector()) << "group " << g;
  }
  const Tensor fused_grad = loss_and_grad(fused);
  tape().clear();
  const std::vector<Tensor> chain_again = split_heads_by_shape_ops(x, c);
  EXPECT_EQ(fused_grad.to_vector(), loss_and_grad(chain_again).to_vector());
}

TEST(SplitHeads, MatchesSplitReshapeTransposeOnOddSizes) {
  check_split_heads({1, 1, {1, 1, 1}, 1}, {true, true, true});
  check_split_heads({3, 17, {3, 1, 1}, 5}, {true, true, true});   // grouped-query: 3 query heads, 1 kv
  check_split_heads({2, 3, {2, 2, 2}, 3}, {true, false, true});   // an unused group gets zeros
  check_split_heads({2, 130, {4, 2, 2}, 64}, {true, true, true});  // large enough to be threaded
}

TEST(MergeHeads, MatchesTransposeReshape) {
  Rng rng(3);
  for (const Shape& shape : {Shape{1, 1, 1, 1}, Shape{3, 5, 17, 3}, Shape{2, 6, 130, 64}}) {
    Tensor x = randn(shape, rng).set_requires_grad();
    const Tensor w = randn({shape[0], shape[2], shape[1] * shape[3]}, rng);
    const Tensor fused = ops::merge_heads(x);
    backward(ops::sum(ops::mul(fused, w)));
    const std::vector<double> fused_grad = x.grad().to_vector();
    x.zero_grad();
    const Tensor chain = ops::reshape(ops::transpose(x, 1, 2), {shape[0], shape[2], shape[1] * shape[3]});
    EXPECT_EQ(fused.to_vector(), chain.to_vector()) << shape;
    backward(ops::sum(ops::mul(chain, w)));
    EXPECT_EQ(fused_grad, x.grad().to_vector()) << shape;
    x.zero_grad();
  }
}

struct QkvCase {
  int64_t batch, seq, heads, kv_heads, head_dim;
  ops::AttentionOptions options;
};

// attention_qkv reads the heads in place (float32, where the tiled kernel runs) and otherwise is the
// composition; either way its output and the gradients of qkv and of T5's table must be the
// composition's bit for bit (the same kernel, the same arithmetic in the same order). Odd sizes,
// grouped heads, padding, dropout and the T5 bias; T = 3 takes the composition inside the op.
TEST(AttentionQkv, MatchesSplitAttentionMergeBitForBit) {
  const Tensor pad = Tensor::from_vector(std::vector<double>(2 * 63, 1.0), {2, 63}, DType::f32);
  std::vector<double> left_padded(3 * 17, 1.0);
  left_padded[17] = left_padded[18] = 0;
  const Tensor pad17 = Tensor::from_vector(left_padded, {3, 17}, DType::f32);
  const std::vector<QkvCase> cases = {
      {3, 17, 4, 2, 8, {.causal = true, .key_padding = pad17}},
      {2, 63, 6, 1, 33, {.causal = true}},
      {2, 63, 4, 4, 16, {.key_padding = pad}},
      {2, 130, 4, 2, 32, {.causal = true, .dropout = 0.2, .dropout_seed = 5}},
      {2, 63, 4, 2, 16, {.causal = true, .variant = {.relative_buckets = 8, .relative_max_distance = 32}}},
      {1, 200, 4, 1, 16, {.causal = true}},  // one (batch, kv head) pair: dQ in chunk partial sums
      {2, 3, 2, 1, 4, {.causal = true}},     // too short for the tiled kernel: the composition
  };
  Rng rng(11);
  for (const QkvCase& c : cases) {
    const int64_t width = (c.heads + 2 * c.kv_heads) * c.head_dim;
    Tensor qkv = randn({c.batch, c.seq, width}, rng).set_requires_grad();
    ops::AttentionOptions o = c.options;
    if (o.variant.relative_buckets > 0)
      o.relative_bias = randn({c.heads, o.variant.relative_buckets}, rng).set_requires_grad();
    const Tensor w = randn({c.batch, c.seq, c.heads * c.head_dim}, rng);
    auto run = [&](bool fused) {  // output, d qkv, d relative_bias
      const size_t nodes_before = tape().size();
      const Tensor out = fused ? ops::attention_qkv(qkv, c.heads, c.kv_heads, o) : [&] {
        const auto parts = ops::split_heads(qkv, {c.heads, c.kv_heads, c.kv_heads}, c.head_dim);
        return ops::merge_heads(ops::attention(parts[0], parts[1], parts[2], o));
      }();
      // In place (T >= 16 here: the tiled kernel's shapes) one node; the composition three.
      if (fused) EXPECT_EQ(tape().size() - nodes_before, c.seq >= 16 ? 1u : 3u) << "T " << c.seq;
      backward(ops::sum(ops::mul(out, w)));
      std::vector<std::vector<double>> r{out.to_vector(), qkv.grad().to_vector()};
      qkv.zero_grad();
      if (o.relative_bias.defined()) {
        r.push_back(o.relative_bias.grad().to_vector());
        o.relative_bias.zero_grad();
      }
      return r;
    };
    const auto fused = run(true), composed = run(false);
    ASSERT_EQ(fused.size(), composed.size());
    const char* names[] = {"out", "d qkv", "d relative_bias"};
    for (size_t i = 0; i < fused.size(); ++i)
      EXPECT_EQ(fused[i], composed[i]) << names[i] << ", B " << c.batch << " T " << c.seq << " D " << c.head_dim;
  }
}

TEST(AttentionQkv, Errors) {
  testing::expect_error([] { ops::attention_qkv(Tensor::zeros({2, 3, 13}), 2, 1); },
                        "attention_qkv: expected (B, T, (H + 2 H_kv) D) for H = 2, H_kv = 1, got (2, 3, 13) f32");
  testing::expect_error([] { ops::attention_qkv(Tensor::zeros({2, 3, 16}), 2, 0); }, "attention_qkv: expected");
}

TEST(SplitHeads, Errors) {
  const Tensor x = Tensor::zeros({2, 3, 12});
  testing::expect_error([&] { ops::split_heads(x, {2, 1, 1}, 4); },
                        "split_heads: (2, 3, 12) f32 is not (B, T, 4 x 4) for 3 groups of heads");
  testing::expect_error([&] { ops::split_heads(x, {2, 0}, 4); }, "split_heads: head counts must be positive, got 0");
  testing::expect_error([&] { ops::merge_heads(x); }, "merge_heads: expected (B, H, T, D), got (2, 3, 12) f32");
}

}  // namespace
}  // namespace tf
