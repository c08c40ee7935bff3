// Float64 finite-difference checks of every layer: the input gradient and every parameter's
// gradient, with parameters moved off their initial values (see model_fixtures.h).
#include <gtest/gtest.h>

#include <cstdio>

#include "framework/gradcheck.h"
#include "layers/block.h"
#include "layers/embedding.h"
#include "layers/feed_forward.h"
#include "layers/layer_norm.h"
#include "model_fixtures.h"

namespace tf::layers {
namespace {

using testing::attention_options;
using testing::names_of;
using testing::perturb;
using testing::tensors_of;

Init f64_init(uint64_t seed) { return Init{Rng(seed), DType::f64}; }

// x (requires grad) followed by the layer's parameters, as gradcheck inputs.
struct Checked {
  std::vector<Tensor> inputs;
  std::vector<std::string> names;
};
Checked with_input(const Tensor& x, const ParamList& params) {
  Checked c{{x}, {"x"}};
  for (const auto& p : params) c.inputs.push_back(p.tensor), c.names.push_back(p.name);
  return c;
}

// Runs gradcheck and prints the worst relative error (collected for the closing note).
void expect_gradients(const char* what, const GradcheckFn& f, const Checked& c) {
  const GradcheckReport r = gradcheck(f, c.inputs, c.names);
  std::printf("[gradcheck] %-44s worst rel err %.2e\n", what, r.max_rel_error());
  EXPECT_TRUE(r.passed()) << what << "\n" << r.to_string();
  for (const auto& t : r.tensors) EXPECT_EQ(t.shifted, 0) << what << ": " << t.name << " sat on a kink";
}

Tensor input(const Shape& shape, uint64_t seed) { return testing::random_normal(shape, seed).set_requires_grad(); }

TEST(LayerGradcheck, Linear) {
  Init init = f64_init(1);
  const Linear layer({5, 4, true}, init);
  ParamList params;
  layer.parameters(params, "");
  perturb(params, 2);
  expect_gradients("Linear (2, 3, 5) -> 4", [&](const auto& in) { return layer.forward(in[0]); },
                   with_input(input({2, 3, 5}, 3), params));
}

TEST(LayerGradcheck, LinearWithoutBias) {
  Init init = f64_init(1);
  const Linear layer({3, 6, false}, init);
  ParamList params;
  layer.parameters(params, "");
  ASSERT_EQ(params.size(), 1u);
  expect_gradients("Linear (4, 3) -> 6, no bias", [&](const auto& in) { return layer.forward(in[0]); },
                   with_input(input({4, 3}, 3), params));
}

TEST(LayerGradcheck, EmbeddingWeight) {
  Init init = f64_init(1);
  const Embedding layer({7, 4}, init);
  // Ids repeat (3 twice, 0 three times): those rows must receive the sum of their uses' gradients.
  const Tensor ids = Tensor::from_ids({3, 0, 6, 0, 3, 0}, {2, 3});
  ParamList params;
  layer.parameters(params, "");
  expect_gradients("Embedding (7, 4), ids (2, 3)", [&](const auto&) { return layer.forward(ids); },
                   {tensors_of(params), names_of(params)});
}

TEST(LayerGradcheck, LayerNorm) {
  Init init = f64_init(1);
  const LayerNorm layer({6, 1e-5}, init);
  ParamList params;
  layer.parameters(params, "");
  perturb(params, 2);
  expect_gradients("LayerNorm (2, 3, 6)", [&](const auto& in) { return layer.forward(in[0]); },
                   with_input(input({2, 3, 6}, 3), params));
}

TEST(LayerGradcheck, FeedForwardBothGelus) {
  for (auto gelu : {ops::GeluApprox::tanh, ops::GeluApprox::erf}) {
    Init init = f64_init(1);
    FeedForward::Options o;
    o.d_model = 4;
    o.d_ff = 10;
    o.gelu = gelu;
    const FeedForward layer(o, init);
    ParamList params;
    layer.parameters(params, "");
    perturb(params, 2);
    expect_gradients(gelu == ops::GeluApprox::tanh ? "FeedForward 4 -> 10 -> 4 (tanh GELU)" : "FeedForward 4 -> 10 -> 4 (erf GELU)",
                     [&](const auto& in) { return layer.forward(in[0]); }, with_input(input({2, 3, 4}, 3), params));
  }
}

struct AttentionCase {
  const char* name;
  MultiHeadAttention::Options options;
  bool padding;
};

TEST(LayerGradcheck, MultiHeadAttention) {
  const AttentionCase cases[] = {
      {"MultiHeadAttention (bidirectional)", attention_options(2, 0, false, false), false},
      {"MultiHeadAttention (causal)", attention_options(2, 0, true, false), false},
      {"MultiHeadAttention (key padding)", attention_options(2, 0, false, false), true},
      {"MultiHeadAttention (GQA H=4 G=2, causal)", attention_options(4, 2, true, false), false},
      {"MultiHeadAttention (GQA H=2 G=1, padding)", attention_options(2, 1, false, false), true},
      {"MultiHeadAttention (rope, causal)", attention_options(2, 0, true, true), false},
      {"MultiHeadAttention (rope, GQA, padding)", attention_options(4, 2, false, true), true},
  };
  const Tensor padding = testing::padding_2x5();
  for (const auto& c : cases) {
    Init init = f64_init(1);
    const MultiHeadAttention layer(c.options, init);
    ParamList params;
    layer.parameters(params, "");
    perturb(params, 2);
    const Tensor pad = c.padding ? padding : Tensor();
    expect_gradients(c.name, [&](const auto& in) { return layer.forward(in[0], pad, Context{}); },
                     with_input(input({2, 5, 8}, 3), params));
  }
}

TEST(LayerGradcheck, MultiHeadAttentionRopeWithPositionOffset) {
  Init init = f64_init(1);
  MultiHeadAttention::Options options = attention_options(2, 0, true, true);
  options.rope_options.position_offset = 7;
  const MultiHeadAttention layer(options, init);
  ParamList params;
  layer.parameters(params, "");
  perturb(params, 2);
  expect_gradients("MultiHeadAttention (rope, offset 7)",
                   [&](const auto& in) { return layer.forward(in[0], Tensor(), Context{}); },
                   with_input(input({1, 4, 8}, 3), params));
}

TransformerBlock::Options block_options(bool pre_norm, bool causal) {
  TransformerBlock::Options o;
  o.attn.d_model = o.mlp.d_model = 8;
  o.attn.n_heads = 2;
  o.attn.causal = causal;
  o.mlp.gelu = pre_norm ? ops::GeluApprox::tanh : ops::GeluApprox::erf;
  o.pre_norm = pre_norm;
  return o;
}

TEST(LayerGradcheck, TransformerBlockPreAndPostNorm) {
  const Tensor padding = testing::padding_2x5();
  for (bool pre_norm : {true, false}) {
    Init init = f64_init(1);
    const TransformerBlock block(block_options(pre_norm, pre_norm), init);
    ParamList params;
    block.parameters(params, "");
    perturb(params, 2);
    const Tensor pad = pre_norm ? Tensor() : padding;  // GPT-like causal, or BERT-like padded
    expect_gradients(pre_norm ? "TransformerBlock (pre-LN, causal)" : "TransformerBlock (post-LN, key padding)",
                     [&](const auto& in) { return block.forward(in[0], pad, Context{}); },
                     with_input(input({2, 5, 8}, 3), params));
  }
}

// Dropout in training mode is a fixed mask for a fixed seed, so it has exact gradients: every
// evaluation restarts the context's generator, so all evaluations draw the same masks.
TEST(LayerGradcheck, TransformerBlockWithDropoutInTraining) {
  for (bool pre_norm : {true, false}) {
    TransformerBlock::Options o = block_options(pre_norm, pre_norm);
    o.dropout = 0.2;
    o.attn.attn_dropout = 0.3;
    Init init = f64_init(1);
    const TransformerBlock block(o, init);
    ParamList params;
    block.parameters(params, "");
    perturb(params, 2);
    expect_gradients(pre_norm ? "TransformerBlock (pre-LN, dropout, training)" : "TransformerBlock (post-LN, dropout, training)",
                     [&](const auto& in) {
                       Rng rng(99);
                       Context ctx{.training = true, .rng = &rng};
                       return block.forward(in[0], Tensor(), ctx);
                     },
                     with_input(input({2, 5, 8}, 3), params));
  }
}

}  // namespace
}  // namespace tf::layers
