// Head gates (layers::Context::head_gates, Michel et al. 2019): in float64 the tape's dL/dxi equals a
// central difference of the loss; gates of 1 change no bit of the logits; a gate of 0 gives what zeroing
// the head's columns of W_O gives; decoding with a KV cache honours the gates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/autograd/tape.h"
#include "model_fixtures.h"
#include "support/compare.h"

namespace tf::layers {
namespace {

using namespace testing;
using tf::testing::max_abs_diff;

constexpr int64_t kB = 2, kT = 5, kVocab = 11;

// A model of the gradient-check size (tiny_config) and the attention it exercises.
struct GateCase {
  std::string name;
  Architecture arch;
  PositionEncoding position;
  int64_t heads = 2, kv_heads = 0;  // kv_heads 0: as many as heads
  int64_t window = 0;
};

void PrintTo(const GateCase& c, std::ostream* out) { *out << c.name; }

ModelConfig config_of(const GateCase& c) {
  ModelConfig config = tiny_config(c.arch, c.position);
  config.n_heads = c.heads;
  config.n_kv_heads = c.kv_heads;
  config.attention.window = c.window;
  return config;
}

// One (B, H) tensor per layer, every entry `value`.
std::vector<Tensor> gates_of(const ModelConfig& c, const Shape& shape, double value, DType dtype = DType::f64) {
  std::vector<Tensor> gates;
  for (int64_t l = 0; l < c.n_layers; ++l) gates.push_back(Tensor::full(shape, value, dtype));
  return gates;
}

class HeadGates : public ::testing::TestWithParam<GateCase> {
 protected:
  void SetUp() override {
    config_ = config_of(GetParam());
    Init init{Rng(5), DType::f64};
    model_ = build_model(config_, init);
    perturb(model_->parameters(), 6);
    ids_ = random_ids({kB, kT}, kVocab, 1);
    targets_ = ignore_positions(random_ids({kB, kT}, kVocab, 2), {1, 7});
    if (config_.arch == Architecture::bert) padding_ = padding_2x5();
  }
  double loss(const std::vector<Tensor>& gates) const {
    Context ctx;
    ctx.head_gates = &gates;
    return model_->loss(ids_, targets_, padding_, ctx).item();
  }
  Tensor logits(const std::vector<Tensor>* gates) const {
    Context ctx;
    ctx.head_gates = gates;
    return model_->logits(ids_, padding_, ctx);
  }
  ModelConfig config_;
  std::unique_ptr<LanguageModel> model_;
  Tensor ids_, targets_, padding_;
};

// dL/dxi_{b,h} from the tape against (L(xi + e) - L(xi - e)) / 2e, at xi = 1 (where importance is
// read) for every layer, sequence and head; and the shared (H) gate's derivative is the sum over b.
TEST_P(HeadGates, GateDerivativeEqualsCentralDifferenceOfTheLoss) {
  const int64_t H = config_.n_heads;
  std::vector<Tensor> gates = gates_of(config_, {kB, H}, 1.0);
  for (Tensor& g : gates) g.set_requires_grad();
  {
    Context ctx;
    ctx.head_gates = &gates;
    backward(model_->loss(ids_, targets_, padding_, ctx));
  }
  const double e = 1e-5;
  double worst = 0;  // the largest |tape - difference| / max(|tape|, 1e-3)
  const NoGradGuard no_grad;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    const std::vector<double> tape_grad = gates[l].grad().to_vector();  // (B, H)
    for (int64_t i = 0; i < kB * H; ++i) {
      std::vector<Tensor> moved = gates_of(config_, {kB, H}, 1.0);
      moved[l].data<double>()[i] = 1 + e;
      const double up = loss(moved);
      moved[l].data<double>()[i] = 1 - e;
      const double difference = (up - loss(moved)) / (2 * e);
      const double error = std::abs(tape_grad[i] - difference) / std::max(std::abs(tape_grad[i]), 1e-3);
      worst = std::max(worst, error);
      EXPECT_LT(error, 1e-7) << "layer " << l << ", sequence " << i / H << ", head " << i % H << ": tape "
                             << tape_grad[i] << ", difference " << difference;
    }
    double largest = 0;
    for (double g : tape_grad) largest = std::max(largest, std::abs(g));
    EXPECT_GT(largest, 1e-4) << "layer " << l << ": every derivative is ~0, the comparison is vacuous";
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  std::printf("%s: worst relative error %.2e\n", GetParam().name.c_str(), worst);

  // A gate shared by the batch, (H): its derivative is the sum of the per-sequence ones.
  std::vector<Tensor> shared = gates_of(config_, {H}, 1.0);
  for (int64_t h = 0; h < H; ++h) {
    shared[0].data<double>()[h] = 1 + e;
    const double up = loss(shared);
    shared[0].data<double>()[h] = 1 - e;
    const double difference = (up - loss(shared)) / (2 * e);
    shared[0].data<double>()[h] = 1;
    const std::vector<double> g = gates[0].grad().to_vector();
    double sum = 0;
    for (int64_t b = 0; b < kB; ++b) sum += g[b * H + h];
    EXPECT_NEAR(sum, difference, 1e-7 * std::max(std::abs(sum), 1e-3)) << "head " << h;
  }
}

// Gates of 1, shared or per sequence, leave every bit of the logits as they are without gates.
TEST_P(HeadGates, GatesOfOneChangeNoBit) {
  const Tensor plain = logits(nullptr);
  for (const Shape& shape : {Shape{config_.n_heads}, Shape{kB, config_.n_heads}}) {
    const std::vector<Tensor> ones = gates_of(config_, shape, 1.0);
    EXPECT_EQ(max_abs_diff(logits(&ones), plain), 0.0) << shape.to_string();
  }
}

// Gate 0 on head h of layer l is the model with W_O's columns h D .. (h + 1) D of that layer zeroed:
// y = concat(o) W_O^T, so those columns are all head h reaches the output through.
TEST_P(HeadGates, GateZeroEqualsZeroingTheHeadsColumnsOfTheOutputProjection) {
  const int64_t H = config_.n_heads, D = config_.head_dim(), C = config_.d_model;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    for (int64_t h = 0; h < H; ++h) {
      std::vector<Tensor> gates = gates_of(config_, {H}, 1.0);
      gates[l].data<double>()[h] = 0;
      const Tensor gated = logits(&gates);
      Tensor weight;  // blocks.l.attn.proj.weight (C, H D)
      for (const NamedParam& p : model_->parameters())
        if (p.name == "blocks." + std::to_string(l) + ".attn.proj.weight") weight = p.tensor;
      ASSERT_TRUE(weight.defined());
      const Tensor saved = weight.clone();
      for (int64_t c = 0; c < C; ++c)
        for (int64_t d = 0; d < D; ++d) weight.data<double>()[c * H * D + h * D + d] = 0;
      const Tensor zeroed = logits(nullptr);
      std::copy_n(saved.data<double>(), saved.numel(), weight.data<double>());
      EXPECT_LT(max_abs_diff(gated, zeroed), 1e-12) << "layer " << l << ", head " << h;
      EXPECT_GT(max_abs_diff(gated, logits(nullptr)), 1e-6) << "layer " << l << ", head " << h << ": no effect";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, HeadGates,
    ::testing::Values(GateCase{"gpt_learned", Architecture::gpt, PositionEncoding::learned},
                      GateCase{"gpt_rope_gqa", Architecture::gpt, PositionEncoding::rope, 4, 2},
                      GateCase{"gpt_alibi_window", Architecture::gpt, PositionEncoding::alibi, 2, 0, 3},
                      GateCase{"bert_learned", Architecture::bert, PositionEncoding::learned},
                      GateCase{"bert_t5_gqa", Architecture::bert, PositionEncoding::t5, 4, 2}),
    [](const auto& info) { return info.param.name; });

// Decoding with a KV cache takes the gates too (one token at a time, float32, where the fused layer
// step would otherwise run): the cached logits equal the full forward's with the same gates.
TEST(HeadGatesDecoding, CachedLogitsFollowTheGates) {
  ModelConfig c = tiny_config(Architecture::gpt, PositionEncoding::rope);
  Init init{Rng(5), DType::f32};
  const Gpt model(c, init);
  const Tensor ids = random_ids({1, kT}, kVocab, 1);
  std::vector<Tensor> gates = gates_of(c, {c.n_heads}, 1.0, DType::f32);
  gates[1].data<float>()[0] = 0;
  gates[0].data<float>()[1] = 0.5f;
  Context ctx;
  ctx.head_gates = &gates;
  const NoGradGuard no_grad;
  const std::vector<double> full = model.logits(ids, Tensor(), ctx).to_vector();  // (1, T, V)
  KvCache cache = model.make_cache();
  for (int64_t t = 0; t < kT; ++t) {
    const Tensor step = model.logits_cached(Tensor::from_ids({ids.data<int32_t>()[t]}, {1, 1}), cache, ctx);
    const std::vector<double> row = step.to_vector();
    for (int64_t v = 0; v < kVocab; ++v) EXPECT_NEAR(row[v], full[t * kVocab + v], 1e-5) << "t " << t << ", v " << v;
  }
}

}  // namespace
}  // namespace tf::layers
