// Float64 finite-difference checks of whole models: every parameter of a 2-layer GPT (causal LM
// loss) and a 2-layer BERT (masked-LM loss with key padding and ignored targets), for each position
// encoding. The checked function only calls model.loss; the parameters are the gradcheck inputs.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "framework/gradcheck.h"
#include "framework/ops/cross_entropy.h"
#include "model_fixtures.h"

namespace tf::layers {
namespace {

using namespace testing;

void expect_model_gradients(const std::string& what, const LanguageModel& model, const Tensor& ids,
                            const Tensor& targets, const Tensor& padding) {
  const ParamList params = model.parameters();
  perturb(params, 5);
  const GradcheckReport r = gradcheck(
      [&](const std::vector<Tensor>&) { return model.loss(ids, targets, padding, Context{}); }, tensors_of(params),
      names_of(params));
  std::printf("[gradcheck] %-44s worst rel err %.2e (%zu parameters)\n", what.c_str(), r.max_rel_error(),
              params.size());
  EXPECT_TRUE(r.passed()) << what << "\n" << r.to_string();
  ASSERT_EQ(r.tensors.size(), params.size());  // every parameter was checked
  for (const auto& t : r.tensors) EXPECT_EQ(t.shifted, 0) << what << ": " << t.name << " sat on a kink";
}

class ModelGradcheck : public ::testing::TestWithParam<PositionEncoding> {};

TEST_P(ModelGradcheck, Gpt) {
  Init init{Rng(11), DType::f64};
  const Gpt model(tiny_config(Architecture::gpt, GetParam()), init);
  const Tensor ids = random_ids({2, 5}, 11, 1);
  const Tensor targets = random_ids({2, 5}, 11, 2);
  expect_model_gradients(std::string("GPT, 2 layers, ") + position_encoding_name(GetParam()), model, ids, targets,
                         Tensor());
}

TEST_P(ModelGradcheck, Bert) {
  Init init{Rng(11), DType::f64};
  const Bert model(tiny_config(Architecture::bert, GetParam()), init);
  const Tensor ids = random_ids({2, 5}, 11, 1);
  // Targets at some real positions only: -100 elsewhere, including both padded positions (8, 9).
  const Tensor targets = ignore_positions(random_ids({2, 5}, 11, 2), {1, 3, 4, 6, 8, 9});
  expect_model_gradients(std::string("BERT, 2 layers, padding, ") + position_encoding_name(GetParam()), model, ids,
                         targets, padding_2x5());
}

INSTANTIATE_TEST_SUITE_P(Positions, ModelGradcheck, ::testing::ValuesIn(kAllPositions),
                         [](const auto& info) { return std::string(position_encoding_name(info.param)); });

// Variants the recipes can select: an untied LM head, grouped-query attention, no biases.
TEST(ModelGradcheckVariants, GptUntiedGroupedQueryNoBias) {
  ModelConfig c = tiny_config(Architecture::gpt, PositionEncoding::rope);
  c.tie_embeddings = false;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.bias = false;
  Init init{Rng(11), DType::f64};
  const Gpt model(c, init);
  expect_model_gradients("GPT, untied, GQA H=4 G=2, no bias, rope", model, random_ids({2, 5}, 11, 1),
                         random_ids({2, 5}, 11, 2), Tensor());
}

// RMSNorm in every norm of the model (the blocks' fused residual norm included), a SwiGLU
// feed-forward, ALiBi and a sliding window narrower than the sequence.
TEST(ModelGradcheckVariants, RmsNormAlibiWindowGptAndBert) {
  for (Architecture arch : {Architecture::gpt, Architecture::bert}) {
    ModelConfig c = tiny_config(arch, PositionEncoding::alibi);
    c.norm = kernels::NormKind::rms;
    c.feed_forward = kernels::FeedForwardKind::swiglu;
    c.attention.window = 3;
    Init init{Rng(11), DType::f64};
    const Tensor ids = random_ids({2, 5}, 11, 1);
    if (arch == Architecture::gpt) {
      const Gpt model(c, init);
      expect_model_gradients("GPT, RMSNorm, SwiGLU, ALiBi, window 3", model, ids, random_ids({2, 5}, 11, 2), Tensor());
    } else {
      const Bert model(c, init);
      expect_model_gradients("BERT, RMSNorm, SwiGLU, ALiBi, window 3, pad", model, ids,
                             ignore_positions(random_ids({2, 5}, 11, 2), {1, 3, 4, 6, 8, 9}), padding_2x5());
    }
  }
}

// Every row of Note [feed-forward kinds] in both models: a new kind is checked without a line here.
TEST(ModelGradcheckVariants, EveryFeedForwardKindGptAndBert) {
  for (const kernels::FeedForwardKindRow& row : kernels::kFeedForwardKindTable)
    for (Architecture arch : {Architecture::gpt, Architecture::bert}) {
      ModelConfig c = tiny_config(arch, PositionEncoding::learned);
      c.feed_forward = row.kind;
      Init init{Rng(13), DType::f64};
      const Tensor ids = random_ids({2, 5}, 11, 1);
      const std::string name = std::string(arch == Architecture::gpt ? "GPT, " : "BERT, ") + row.name;
      if (arch == Architecture::gpt) {
        const Gpt model(c, init);
        expect_model_gradients(name, model, ids, random_ids({2, 5}, 11, 2), Tensor());
      } else {
        const Bert model(c, init);
        expect_model_gradients(name, model, ids, ignore_positions(random_ids({2, 5}, 11, 2), {1, 3, 4, 6, 8, 9}),
                               padding_2x5());
      }
    }
}

// model.final_softcap (Note [output logits]): gradients through the cap in both models, and the
// capped logits equal c tanh(z / c) of the same model's uncapped logits z (the same seed gives the
// same weights), every one inside (-c, c).
TEST(ModelGradcheckVariants, FinalSoftcapGptAndBert) {
  for (Architecture arch : {Architecture::gpt, Architecture::bert}) {
    ModelConfig c = tiny_config(arch, PositionEncoding::learned);
    const double cap = 0.3;  // small enough that tanh bends the logits of the perturbed weights
    ModelConfig capped = c;
    capped.final_softcap = cap;
    Init init{Rng(14), DType::f64}, same{Rng(14), DType::f64};
    const Tensor ids = random_ids({2, 5}, 11, 1);
    const NoGradGuard no_grad;
    std::vector<double> z, y;
    // Weights perturbed alike (std 0.3), so that the logits reach past the cap.
    if (arch == Architecture::gpt) {
      const Gpt plain(c, init), with_cap(capped, same);
      perturb(plain.parameters(), 5);
      perturb(with_cap.parameters(), 5);
      z = plain.logits(ids, Tensor(), {}).to_vector();
      y = with_cap.logits(ids, Tensor(), {}).to_vector();
    } else {
      const Bert plain(c, init), with_cap(capped, same);
      perturb(plain.parameters(), 5);
      perturb(with_cap.parameters(), 5);
      z = plain.logits(ids, padding_2x5(), {}).to_vector();
      y = with_cap.logits(ids, padding_2x5(), {}).to_vector();
    }
    ASSERT_EQ(z.size(), y.size());
    double largest = 0;
    for (size_t i = 0; i < z.size(); ++i) {
      EXPECT_NEAR(y[i], cap * std::tanh(z[i] / cap), 1e-14);
      EXPECT_LT(std::abs(y[i]), cap);
      largest = std::max(largest, std::abs(z[i]));
    }
    EXPECT_GT(largest, cap) << "no logit reached the cap: the case checks little";
  }
  for (Architecture arch : {Architecture::gpt, Architecture::bert}) {
    ModelConfig c = tiny_config(arch, PositionEncoding::learned);
    c.final_softcap = 0.3;
    Init init{Rng(15), DType::f64};
    const Tensor ids = random_ids({2, 5}, 11, 1);
    if (arch == Architecture::gpt) {
      const Gpt model(c, init);
      expect_model_gradients("GPT, final soft cap 0.3", model, ids, random_ids({2, 5}, 11, 2), Tensor());
    } else {
      const Bert model(c, init);
      expect_model_gradients("BERT, final soft cap 0.3", model, ids,
                             ignore_positions(random_ids({2, 5}, 11, 2), {1, 3, 4, 6, 8, 9}), padding_2x5());
    }
  }
}

// RoPE stretched by YaRN (every frequency changed, rows scaled by its temperature) in both models.
TEST(ModelGradcheckVariants, YarnScaledRopeGptAndBert) {
  for (Architecture arch : {Architecture::gpt, Architecture::bert}) {
    ModelConfig c = tiny_config(arch, PositionEncoding::rope);
    c.rope_scaling = {.kind = ops::RopeScalingKind::yarn, .factor = 4.0, .original_context = 20};  // pair 0 on the ramp
    Init init{Rng(12), DType::f64};
    const Tensor ids = random_ids({2, 5}, 11, 1);
    if (arch == Architecture::gpt) {
      const Gpt model(c, init);
      expect_model_gradients("GPT, RoPE + YaRN x4", model, ids, random_ids({2, 5}, 11, 2), Tensor());
    } else {
      const Bert model(c, init);
      expect_model_gradients("BERT, RoPE + YaRN x4, pad", model, ids,
                             ignore_positions(random_ids({2, 5}, 11, 2), {1, 3, 4, 6, 8, 9}), padding_2x5());
    }
  }
}

// The GPT or BERT (c.arch) of config c, at float64 from Rng(seed): a GPT on every target, a BERT on
// some targets with the last two keys of sequence 1 padded.
void expect_gpt_or_bert_gradients(const ModelConfig& c, const std::string& what, uint64_t seed) {
  Init init{Rng(seed), DType::f64};
  const Tensor ids = random_ids({2, 5}, 11, 1);
  if (c.arch == Architecture::gpt) {
    const Gpt model(c, init);
    expect_model_gradients("GPT, " + what, model, ids, random_ids({2, 5}, 11, 2), Tensor());
  } else {
    const Bert model(c, init);
    expect_model_gradients("BERT, " + what + ", pad", model, ids,
                           ignore_positions(random_ids({2, 5}, 11, 2), {1, 3, 4, 6, 8, 9}), padding_2x5());
  }
}

// Linear attention (layers/mixer.h) in every layer, and a hybrid whose softmax layer takes RoPE
// and a window while its linear layer takes neither; the BERT with padded keys.
TEST(ModelGradcheckVariants, LinearAttentionAndHybridGptAndBert) {
  for (Architecture arch : {Architecture::gpt, Architecture::bert})
    for (bool hybrid : {false, true}) {
      ModelConfig c = tiny_config(arch, hybrid ? PositionEncoding::rope : PositionEncoding::learned);
      c.mixers = hybrid ? std::vector<MixerKind>{MixerKind::attention, MixerKind::linear}
                        : std::vector<MixerKind>{MixerKind::linear};
      if (hybrid) c.attention.window = 3;
      expect_gpt_or_bert_gradients(c, hybrid ? "hybrid [attention, linear], rope, window 3" : "linear, learned", 13);
    }
}

// Differential attention (Ye et al. 2024) in every layer with grouped key/value heads and RoPE, and
// a hybrid whose layers take ALiBi and a window; the BERT with padded keys. lambda's four vectors and
// the heads' RMSNorm are checked like every other parameter.
TEST(ModelGradcheckVariants, DifferentialAttentionAndHybridGptAndBert) {
  for (Architecture arch : {Architecture::gpt, Architecture::bert})
    for (bool hybrid : {false, true}) {
      ModelConfig c = tiny_config(arch, hybrid ? PositionEncoding::alibi : PositionEncoding::rope);
      c.n_heads = 4;
      c.n_kv_heads = hybrid ? 0 : 2;
      c.mixers = hybrid ? std::vector<MixerKind>{MixerKind::differential, MixerKind::attention}
                        : std::vector<MixerKind>{MixerKind::differential};
      if (hybrid) c.attention.window = 3;
      expect_gpt_or_bert_gradients(c, hybrid ? "hybrid [differential, attention], alibi, window 3" : "differential, rope, GQA",
                                   17);
    }
}

// Mamba (Gu & Dao 2023) in every layer without positions, and Jamba's pattern (1 attention : 3
// Mamba) with RoPE on its softmax layer, a state of 3 and a 2-tap convolution: the convolution, the
// scan, Delta's projection and A_log are checked like every other parameter. GPT only (causal).
TEST(ModelGradcheckVariants, MambaAndAJambaPatternGpt) {
  for (bool hybrid : {false, true}) {
    ModelConfig c = tiny_config(Architecture::gpt, hybrid ? PositionEncoding::rope : PositionEncoding::none);
    if (hybrid) {
      c.n_layers = 4;
      c.mixers = {MixerKind::attention, MixerKind::mamba, MixerKind::mamba, MixerKind::mamba};
      c.mamba_state = 3;
      c.mamba_conv = 2;
    } else {
      c.mixers = {MixerKind::mamba};
    }
    expect_gpt_or_bert_gradients(c, hybrid ? "[attention, mamba, mamba, mamba], rope" : "mamba, no positions", 19);
  }
}

// Every row of Note [attention layer options], in both models, on softmax layers with RoPE and
// grouped key/value heads, and in a GPT on a [differential, linear] pattern (each multi-head mixer
// takes the options; the BERT case adds only padding, which the options do not see, to a test that
// is among the suite's longest): a new option is checked without a line here. Its parameters are
// checked like the others.
TEST(ModelGradcheckVariants, EveryAttentionLayerOptionGptAndBert) {
  for (const AttentionLayerOption& option : kAttentionLayerOptions)
    for (Architecture arch : {Architecture::gpt, Architecture::bert})
      for (bool other_mixers : {false, true}) {
        if (other_mixers && arch == Architecture::bert) continue;
        ModelConfig c = tiny_config(arch, PositionEncoding::rope);
        c.n_heads = 4;
        c.n_kv_heads = 2;
        if (other_mixers) {
          c.mixers = {MixerKind::differential, MixerKind::linear};
          c.n_kv_heads = 0;  // linear attention keeps a key/value head per query head
        }
        c.attention_layer = option.example;
        ASSERT_TRUE(option.used(c.attention_layer)) << option.key;
        expect_gpt_or_bert_gradients(c, std::string(option.key) + (other_mixers ? ", [differential, linear]" : ", GQA, rope"),
                                     19);
      }
}

TEST(ModelGradcheckVariants, BertSegmentsThroughTheEncoder) {
  ModelConfig c = tiny_config(Architecture::bert, PositionEncoding::learned);
  c.n_segments = 2;
  Init init{Rng(11), DType::f64};
  const Bert model(c, init);
  const ParamList params = model.parameters();
  perturb(params, 5);
  const Tensor ids = random_ids({2, 5}, 11, 1), segments = Tensor::from_ids({0, 0, 1, 1, 1, 0, 1, 1, 0, 0}, {2, 5});
  const Tensor padding = padding_2x5();
  const Tensor targets = ignore_positions(random_ids({2, 5}, 11, 2), {1, 3, 8, 9});
  const GradcheckReport r = gradcheck(
      [&](const std::vector<Tensor>&) {
        // Bert::loss takes no segments: the same masked-LM loss over the encoder's output here.
        return ops::cross_entropy(model.mlm_logits(model.encode(ids, padding, Context{}, segments)), targets);
      },
      tensors_of(params), names_of(params));
  std::printf("[gradcheck] %-44s worst rel err %.2e\n", "BERT with segments, padding", r.max_rel_error());
  EXPECT_TRUE(r.passed()) << r.to_string();
}

}  // namespace
}  // namespace tf::layers
