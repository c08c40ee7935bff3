// split_heads and merge_heads against the chains of shape ops they replace (split + reshape +
// transpose, transpose + reshape), forward and backward, on odd sizes and on one large enough for
// the threaded copy; and their errors. (Gradients against finite differences: the op cases.)
#include <gtest/gtest.h>

#include <vector>

#include "framework/autograd/tape.h"
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

TEST(SplitHeads, Errors) {
  const Tensor x = Tensor::zeros({2, 3, 12});
  testing::expect_error([&] { ops::split_heads(x, {2, 1, 1}, 4); },
                        "split_heads: (2, 3, 12) f32 is not (B, T, 4 x 4) for 3 groups of heads");
  testing::expect_error([&] { ops::split_heads(x, {2, 0}, 4); }, "split_heads: head counts must be positive, got 0");
  testing::expect_error([&] { ops::merge_heads(x); }, "merge_heads: expected (B, H, T, D), got (2, 3, 12) f32");
}

}  // namespace
}  // namespace tf
