// Whole-model invariants, in float64: GPT is causal (bit for bit), BERT ignores what sits in padded
// positions, only position encodings break permutation symmetry, and attention weights on request
// change nothing. And what a config states: its parameters listed without building the model, its
// errors naming their keys as data.
#include <gtest/gtest.h>

#include <string>

#include "framework/autograd/tape.h"
#include "layers/models/model.h"
#include "model_fixtures.h"
#include "support/compare.h"

namespace tf::layers {
namespace {

using namespace testing;
using tf::testing::all_close;
using tf::testing::max_abs_diff;

constexpr int64_t kVocab = 11;

// logits[:, 0:t] of (B, T, V) logits, as a new tensor.
Tensor first_positions(const Tensor& logits, int64_t t) {
  const int64_t B = logits.dim(0), T = logits.dim(1), V = logits.dim(2);
  const std::vector<double> v = logits.to_vector();
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b) out.insert(out.end(), v.begin() + b * T * V, v.begin() + (b * T + t) * V);
  return Tensor::from_vector(out, {B, t, V}, DType::f64);
}

class PerPosition : public ::testing::TestWithParam<PositionEncoding> {
 protected:
  ModelConfig config(Architecture arch) const { return tiny_config(arch, GetParam()); }
};

TEST_P(PerPosition, GptLogitsAtOrBeforeTIgnoreLaterTokens) {
  Init init{Rng(3), DType::f64};
  const Gpt model(config(Architecture::gpt), init);
  perturb(model.parameters(), 4);
  const int64_t T = 6;
  const Tensor ids = random_ids({2, T}, kVocab, 1);
  const Tensor logits = model.logits(ids, Tensor(), Context{});
  for (int64_t t = 0; t + 1 < T; ++t) {
    // Replace every token after position t (in both sequences) by a different one.
    Tensor changed = ids.clone();
    int32_t* c = changed.data<int32_t>();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t s = t + 1; s < T; ++s) c[b * T + s] = (c[b * T + s] + 1 + static_cast<int32_t>(s)) % kVocab;
    const Tensor after = model.logits(changed, Tensor(), Context{});
    EXPECT_TRUE(all_close(first_positions(after, t + 1), first_positions(logits, t + 1), 0, 0)) << "t = " << t;
    // The change is visible right after t, so the comparison above is not vacuous.
    EXPECT_GT(max_abs_diff(first_positions(after, t + 2), first_positions(logits, t + 2)), 1e-6) << "t = " << t;
  }
}

TEST_P(PerPosition, BertIgnoresTheContentsOfPaddedPositions) {
  Init init{Rng(3), DType::f64};
  const Bert model(config(Architecture::bert), init);
  perturb(model.parameters(), 4);
  const Tensor padding = padding_2x5();  // entry 1 pads positions 3 and 4 (flat 8, 9)
  const Tensor ids = random_ids({2, 5}, kVocab, 1);
  const Tensor logits = model.logits(ids, padding, Context{});
  const Tensor targets = ignore_positions(random_ids({2, 5}, kVocab, 2), {2, 8, 9});
  const double loss = model.loss(ids, targets, padding, Context{}).item();
  for (int32_t fill : {0, 4, 10}) {
    Tensor changed = ids.clone();
    changed.data<int32_t>()[8] = fill;
    changed.data<int32_t>()[9] = (fill + 3) % kVocab;
    const std::vector<double> a = model.logits(changed, padding, Context{}).to_vector(), b = logits.to_vector();
    for (int64_t bt = 0; bt < 10; ++bt) {
      if (padding.at(bt) == 0) continue;
      for (int64_t v = 0; v < kVocab; ++v) ASSERT_EQ(a[bt * kVocab + v], b[bt * kVocab + v]) << "position " << bt;
    }
    EXPECT_EQ(model.loss(changed, targets, padding, Context{}).item(), loss);
  }
  // Control: without the mask the same change reaches the real positions.
  Tensor changed = ids.clone();
  changed.data<int32_t>()[8] = (ids.data<int32_t>()[8] + 1) % kVocab;
  EXPECT_GT(max_abs_diff(first_positions(model.logits(changed, Tensor(), Context{}), 3),
                         first_positions(model.logits(ids, Tensor(), Context{}), 3)),
            1e-6);
}

// ids[:, perm[t]]: permute_positions (model_fixtures.h) for token ids.
Tensor permute_ids(const Tensor& ids, const std::vector<int64_t>& perm) {
  const int64_t B = ids.dim(0), T = ids.dim(1);
  std::vector<int32_t> out(B * T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) out[b * T + t] = ids.data<int32_t>()[b * T + perm[t]];
  return Tensor::from_ids(out, ids.shape());
}

// A bidirectional model is blind to order without a position encoding (attention and every
// position-wise layer commute with a permutation of positions); each encoding breaks that.
TEST_P(PerPosition, BertPermutationEquivariantOnlyWithoutPositions) {
  Init init{Rng(3), DType::f64};
  const Bert model(config(Architecture::bert), init);
  perturb(model.parameters(), 4);
  const std::vector<int64_t> perm = {3, 0, 4, 1, 2};
  const Tensor ids = random_ids({2, 5}, kVocab, 1);
  const Tensor permuted_then_run = model.logits(permute_ids(ids, perm), Tensor(), Context{});
  const Tensor run_then_permuted = permute_positions(model.logits(ids, Tensor(), Context{}), perm);
  const double diff = max_abs_diff(permuted_then_run, run_then_permuted);
  if (GetParam() == PositionEncoding::none)
    EXPECT_LT(diff, 1e-12);
  else
    EXPECT_GT(diff, 1e-2) << position_encoding_name(GetParam()) << " left the model permutation-equivariant";
}

TEST_P(PerPosition, AttentionWeightsOnRequestChangeNoModelOutput) {
  for (auto arch : {Architecture::gpt, Architecture::bert}) {
    Init init{Rng(3), DType::f64};
    const auto model = build_model(config(arch), init);
    const Tensor ids = random_ids({2, 5}, kVocab, 1);
    const Tensor padding = arch == Architecture::bert ? padding_2x5() : Tensor();
    std::vector<Tensor> weights;
    Context ctx;
    ctx.attention_weights = &weights;
    EXPECT_TRUE(all_close(model->logits(ids, padding, ctx), model->logits(ids, padding, Context{}), 0, 0));
    ASSERT_EQ(weights.size(), 2u);  // one per layer
    for (const Tensor& P : weights) {
      ASSERT_EQ(P.shape(), (Shape{2, 2, 5, 5}));
      for (int64_t row = 0; row < 2 * 2 * 5; ++row) {
        double sum = 0;
        for (int64_t j = 0; j < 5; ++j) sum += P.at(row * 5 + j);
        EXPECT_NEAR(sum, 1.0, 1e-12) << arch_name(arch) << " row " << row;
      }
    }
  }
}

// A masked-LM batch can have no prediction at all (short sequences, 15% masking): the loss is 0
// (the mean over no rows, as documented for cross-entropy) and backward runs, leaving zero gradients.
TEST(BertLoss, NoTargetGivesZeroLossAndZeroGradients) {
  Init init{Rng(3), DType::f64};
  const Bert model(tiny_config(Architecture::bert, PositionEncoding::learned), init);
  const Tensor ids = random_ids({2, 5}, kVocab, 1);
  const Tensor loss = model.loss(ids, ignore_positions(ids, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), padding_2x5(), Context{});
  EXPECT_EQ(loss.item(), 0.0);
  if (loss.requires_grad()) tape().backward(loss);
  for (const auto& p : model.parameters())
    if (p.tensor.grad().defined()) {
      EXPECT_EQ(max_abs_diff(p.tensor.grad(), Tensor::zeros(p.tensor.shape(), DType::f64)), 0.0) << p.name;
    }
}

INSTANTIATE_TEST_SUITE_P(Positions, PerPosition, ::testing::ValuesIn(kAllPositions),
                         [](const auto& info) { return std::string(position_encoding_name(info.param)); });

}  // namespace
}  // namespace tf::layers

namespace tf::layers {
namespace {

// parameter_shapes lists what the built model lists (names, shapes, kinds, order), for both
// architectures, every position encoding, grouped-query heads, untied heads and a set d_ff, and
// allocates nothing: no tensor has storage, and a config whose weights would take 100 GiB is
// listed as quickly.
TEST(ParameterShapes, MatchTheBuiltModelWithoutAllocatingAnything) {
  for (Architecture arch : {Architecture::gpt, Architecture::bert})
    for (PositionEncoding position : {PositionEncoding::none, PositionEncoding::sinusoidal, PositionEncoding::learned,
                                      PositionEncoding::rope}) {
      ModelConfig c = tiny_config(arch, position);
      c.n_heads = 4;
      c.n_kv_heads = arch == Architecture::gpt ? 2 : 0;
      c.d_ff = 12;
      c.tie_embeddings = arch == Architecture::bert;
      c.n_segments = arch == Architecture::bert ? 2 : 0;
      Init init{Rng(1), DType::f32};
      const ParamList built = build_model(c, init)->parameters();
      const ParamList shapes = parameter_shapes(c);
      ASSERT_EQ(shapes.size(), built.size()) << position_encoding_name(position);
      for (size_t i = 0; i < built.size(); ++i) {
        EXPECT_EQ(shapes[i].name, built[i].name);
        EXPECT_EQ(shapes[i].tensor.shape(), built[i].tensor.shape()) << built[i].name;
        EXPECT_EQ(shapes[i].kind, built[i].kind) << built[i].name;
        EXPECT_FALSE(shapes[i].tensor.has_storage()) << built[i].name;
      }
    }
  ModelConfig huge = tiny_config(Architecture::gpt, PositionEncoding::learned);
  huge.d_model = 16384;
  huge.n_heads = 128;
  huge.n_layers = 8;  // 8 x 12 x 16384^2 weights: ~26G parameters, 100 GiB in float32
  EXPECT_GT(count_parameters(parameter_shapes(huge)), int64_t{25} * 1000 * 1000 * 1000);
  EXPECT_THROW(parameter_shapes(huge).front().tensor.data<float>(), Error);  // a shape, no values
}

// A config error carries the keys that decide it, the one to point at first: the recipe reader
// finds their lines from these, not from the message's words.
TEST(ModelConfigErrors, CarryTheirKeysAsData) {
  ModelConfig c = tiny_config(Architecture::gpt, PositionEncoding::learned);
  c.n_heads = 3;  // 8 is not divisible by 3
  try {
    c.validate();
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.keys, (std::vector<std::string>{"model.d_model", "model.n_heads"})) << e.what();
  }
  c = tiny_config(Architecture::gpt, PositionEncoding::learned);
  c.dropout = 1.5;
  try {
    c.validate();
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.keys, std::vector<std::string>{"model.dropout"}) << e.what();
  }
}

// model.bias: false removes the bias of every linear layer, BERT's MLM head included (docs/models.md);
// only the norms keep theirs.
TEST(ModelParameters, NoBiasMeansNoLinearBiasAnywhere) {
  for (Architecture arch : {Architecture::gpt, Architecture::bert}) {
    ModelConfig c = tiny_config(arch, PositionEncoding::learned);
    c.bias = false;
    Init init{Rng(1), DType::f64};
    const auto model = build_model(c, init);
    int biases = 0;
    for (const auto& p : model->parameters()) {
      if (!p.name.ends_with("bias")) continue;
      EXPECT_EQ(p.kind, ParamKind::norm) << p.name << " is a linear layer's bias";
      ++biases;
    }
    EXPECT_GT(biases, 0) << "the norms' biases are gone too";
  }
}

}  // namespace
}  // namespace tf::layers
