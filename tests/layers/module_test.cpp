// The module system: parameter names and shapes against docs/models.md's table, counts against a
// hand formula, the summary, initialisation statistics and order, seeding, and train/eval mode.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <utility>

#include "model_fixtures.h"
#include "support/compare.h"

namespace tf::layers {
namespace {

using tf::testing::all_close;
using Table = std::vector<std::pair<std::string, Shape>>;

Table table_of(const ParamList& params) {
  Table t;
  for (const auto& p : params) t.emplace_back(p.name, p.tensor.shape());
  return t;
}

// One block's rows of docs/models.md's table, in its order.
void add_block_rows(Table& t, int64_t i, int64_t C, int64_t H, int64_t G, int64_t D, int64_t F) {
  const std::string b = "blocks." + std::to_string(i) + ".";
  t.insert(t.end(), {{b + "ln_1.weight", {C}},
                     {b + "ln_1.bias", {C}},
                     {b + "attn.qkv.weight", {(H + 2 * G) * D, C}},
                     {b + "attn.qkv.bias", {(H + 2 * G) * D}},
                     {b + "attn.proj.weight", {C, H * D}},
                     {b + "attn.proj.bias", {C}},
                     {b + "ln_2.weight", {C}},
                     {b + "ln_2.bias", {C}},
                     {b + "mlp.fc.weight", {F, C}},
                     {b + "mlp.fc.bias", {F}},
                     {b + "mlp.proj.weight", {C, F}},
                     {b + "mlp.proj.bias", {C}}});
}

ModelConfig gpt_config() {  // distinct sizes, so a swapped dimension cannot go unnoticed
  ModelConfig c;
  c.vocab_size = 13;
  c.max_seq_len = 7;
  c.d_model = 12;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 20;
  return c;
}

ModelConfig bert_config() {
  ModelConfig c = gpt_config();
  c.arch = Architecture::bert;
  c.causal = false;
  c.pre_norm = false;
  c.n_kv_heads = 0;
  c.d_ff = 0;  // 4 * d_model
  c.n_segments = 2;
  return c;
}

TEST(ModuleNames, GptMatchesTheDocumentedTable) {
  for (bool tied : {true, false}) {
    ModelConfig c = gpt_config();
    c.tie_embeddings = tied;
    Init init{Rng(1)};
    const Gpt model(c, init);
    Table expected = {{"token_embedding.weight", {13, 12}}, {"position_embedding.weight", {7, 12}}};
    for (int64_t i = 0; i < 2; ++i) add_block_rows(expected, i, 12, 4, 2, 3, 20);
    expected.insert(expected.end(), {{"ln_f.weight", {12}}, {"ln_f.bias", {12}}});
    if (!tied) expected.push_back({"lm_head.weight", {13, 12}});
    EXPECT_EQ(table_of(model.parameters()), expected) << "tied " << tied;
  }
}

TEST(ModuleNames, GptWithoutLearnedPositionsOrBiases) {
  ModelConfig c = gpt_config();
  c.position = PositionEncoding::rope;
  c.n_heads = 2;  // RoPE needs an even head size: 12 / 2 = 6
  c.n_kv_heads = 0;
  c.bias = false;
  c.n_layers = 1;
  Init init{Rng(1)};
  const Gpt model(c, init);
  std::vector<std::string> names;
  for (const auto& p : model.parameters()) names.push_back(p.name);
  const std::vector<std::string> expected = {
      "token_embedding.weight", "blocks.0.ln_1.weight",  "blocks.0.ln_1.bias",   "blocks.0.attn.qkv.weight",
      "blocks.0.attn.proj.weight", "blocks.0.ln_2.weight", "blocks.0.ln_2.bias", "blocks.0.mlp.fc.weight",
      "blocks.0.mlp.proj.weight", "ln_f.weight", "ln_f.bias"};
  EXPECT_EQ(names, expected);
}

TEST(ModuleNames, BertMatchesTheDocumentedTable) {
  Init init{Rng(1)};
  const Bert model(bert_config(), init);
  Table expected = {{"token_embedding.weight", {13, 12}},
                    {"position_embedding.weight", {7, 12}},
                    {"segment_embedding.weight", {2, 12}},
                    {"embedding_norm.weight", {12}},
                    {"embedding_norm.bias", {12}}};
  for (int64_t i = 0; i < 2; ++i) add_block_rows(expected, i, 12, 4, 4, 3, 48);
  expected.insert(expected.end(), {{"mlm_head.dense.weight", {12, 12}},
                                   {"mlm_head.dense.bias", {12}},
                                   {"mlm_head.norm.weight", {12}},
                                   {"mlm_head.norm.bias", {12}},
                                   {"mlm_head.bias", {13}}});
  EXPECT_EQ(table_of(model.parameters()), expected);
}

TEST(ModuleCount, MatchesTheHandFormula) {
  // V, P = max_seq_len, C, L, H, G, D, F as in docs/models.md.
  const int64_t V = 13, P = 7, C = 12, L = 2, H = 4, D = 3;
  auto block = [&](int64_t G, int64_t F) {
    return 2 * C + ((H + 2 * G) * D * C + (H + 2 * G) * D) + (C * H * D + C) + 2 * C + (F * C + F) + (C * F + C);
  };
  Init init{Rng(1)};
  const Gpt gpt(gpt_config(), init);
  EXPECT_EQ(count_parameters(gpt.parameters()), V * C + P * C + L * block(2, 20) + 2 * C);
  const Bert bert(bert_config(), init);
  EXPECT_EQ(count_parameters(bert.parameters()),
            V * C + P * C + 2 * C + 2 * C + L * block(4, 48) + (C * C + C) + 2 * C + V);
  // The hand formula in numbers, for one reader's check: 13*12 + 7*12 + 2*1028 + 24 = 2320.
  EXPECT_EQ(count_parameters(gpt.parameters()), 2320);
}

TEST(ModuleSummary, ListsEveryParameterWithShapeAndCount) {
  Init init{Rng(1)};
  const Bert model(bert_config(), init);
  const ParamList params = model.parameters();
  const std::string summary = summarize(params);
  std::istringstream lines(summary);
  std::string line;
  size_t n = 0;
  while (std::getline(lines, line)) {
    if (n < params.size()) {
      const auto& p = params[n];
      EXPECT_EQ(line.rfind(p.name + " ", 0), 0u) << line;  // starts with the name
      EXPECT_NE(line.find(p.tensor.shape().to_string()), std::string::npos) << line;
      EXPECT_NE(line.find(" " + std::to_string(p.tensor.numel())), std::string::npos) << line;
    } else {
      EXPECT_EQ(line.rfind("total", 0), 0u) << line;
      EXPECT_NE(line.find(std::to_string(count_parameters(params))), std::string::npos) << line;
    }
    ++n;
  }
  EXPECT_EQ(n, params.size() + 1);
}

TEST(ModuleKinds, WeightDecayGroupsFollowTheConvention) {
  Init init{Rng(1)};
  const Bert model(bert_config(), init);
  for (const auto& p : model.parameters()) {
    const std::string& n = p.name;
    ParamKind expected = ParamKind::weight;
    if (n.find("embedding.") != std::string::npos && n.find("_norm") == std::string::npos) expected = ParamKind::embedding;
    else if (n.find("norm") != std::string::npos || n.find("ln_") != std::string::npos) expected = ParamKind::norm;
    else if (n.ends_with("bias")) expected = ParamKind::bias;
    EXPECT_EQ(static_cast<int>(p.kind), static_cast<int>(expected)) << n;
  }
}

struct Stats {
  double mean = 0, std = 0;
};
Stats stats(const Tensor& t) {
  const std::vector<double> v = t.to_vector();
  Stats s;
  for (double x : v) s.mean += x;
  s.mean /= v.size();
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / v.size());
  return s;
}

TEST(ModuleInit, StatisticsFollowTheTable) {
  ModelConfig c;  // the default sizes: C 128, 4 layers, V 256
  for (auto arch : {Architecture::gpt, Architecture::bert}) {
    c.arch = arch;
    c.causal = c.pre_norm = arch == Architecture::gpt;
    Init init{Rng(7)};
    const auto model = build_model(c, init);
    const double residual = 0.02 / std::sqrt(2.0 * c.n_layers);  // GPT-2's scaled init
    for (const auto& p : model->parameters()) {
      const Stats s = stats(p.tensor);
      const std::string& n = p.name;
      if (n.ends_with("bias")) {
        EXPECT_EQ(s.mean, 0.0) << n;
        EXPECT_EQ(s.std, 0.0) << n;
      } else if (n.find("ln_") != std::string::npos || n.find("norm.") != std::string::npos) {
        EXPECT_EQ(s.mean, 1.0) << n;
        EXPECT_EQ(s.std, 0.0) << n;
      } else {
        // The sample std of N normal draws has relative standard error 1/sqrt(2N): 0.55% for the
        // smallest tensor here (N = 128 * 128), so 3% is over five standard errors.
        const double expected = n.ends_with("proj.weight") ? residual : 0.02;
        const double N = static_cast<double>(p.tensor.numel());
        EXPECT_NEAR(s.std, expected, 0.03 * expected) << n;
        EXPECT_NEAR(s.mean, 0.0, 5 * expected / std::sqrt(N)) << n;
      }
    }
  }
}

// docs/models.md: "Initialisation draws from one Philox generator seeded with train.seed, in the
// order of the table." Replaying that order with a fresh generator reproduces every weight.
TEST(ModuleInit, DrawsInTheOrderOfTheTable) {
  for (auto arch : {Architecture::gpt, Architecture::bert}) {
    ModelConfig c = arch == Architecture::gpt ? gpt_config() : bert_config();
    c.tie_embeddings = arch == Architecture::bert;  // GPT: untied, so lm_head is drawn too
    Init init{Rng(21), DType::f64};
    const auto model = build_model(c, init);
    Rng replay(21);
    const double residual = 0.02 / std::sqrt(2.0 * c.n_layers);
    for (const auto& p : model->parameters()) {
      const std::string& n = p.name;
      if (n.ends_with("bias") || n.find("ln_") != std::string::npos || n.find("norm.") != std::string::npos) continue;
      const Tensor expected = randn(p.tensor.shape(), replay, n.ends_with("proj.weight") ? residual : 0.02, DType::f64);
      EXPECT_TRUE(all_close(p.tensor, expected, 0, 0)) << n;
    }
  }
}

// model.projection_init: the residual projections (attention's and the MLP's proj, Mamba's out_proj)
// start at zero, or at init_std unscaled: sqrt(2 n_layers) times the default's, draw for draw. Every
// other parameter is the default init's, bit for bit, since the projections still draw their numbers,
// so the rest of the order is unchanged.
TEST(ModuleInit, ProjectionInitChangesOnlyTheResidualProjections) {
  for (const std::string kind : {"zero", "plain"})
    for (auto arch : {Architecture::gpt, Architecture::bert}) {
      ModelConfig c = arch == Architecture::gpt ? gpt_config() : bert_config();
      if (arch == Architecture::gpt) c.mixers = {MixerKind::attention, MixerKind::mamba};
      Init scaled_init{Rng(3)}, other_init{Rng(3)};
      const auto scaled = build_model(c, scaled_init);
      c.projection_init = kind;
      const auto other = build_model(c, other_init);
      const ParamList a = scaled->parameters(), b = other->parameters();
      ASSERT_EQ(a.size(), b.size());
      const double factor = kind == "zero" ? 0.0 : std::sqrt(2.0 * static_cast<double>(c.n_layers));
      int projections = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        const std::string& n = a[i].name;
        if (n.ends_with("attn.proj.weight") || n.ends_with("mlp.proj.weight") || n.ends_with("out_proj.weight")) {
          ++projections;
          EXPECT_GT(stats(a[i].tensor).std, 0.0) << n;
          const std::vector<double> from = a[i].tensor.to_vector(), to = b[i].tensor.to_vector();
          for (size_t k = 0; k < from.size(); ++k)
            ASSERT_NEAR(to[k], factor * from[k], 1e-6 * std::abs(factor * from[k])) << kind << " " << n << " [" << k << "]";
        } else {
          EXPECT_TRUE(all_close(a[i].tensor, b[i].tensor, 0, 0)) << n;
        }
      }
      EXPECT_EQ(projections, 2 * c.n_layers) << "every layer has a mixer's and an MLP's projection";
    }
}

TEST(ModuleInit, SameSeedSameParametersOtherSeedOthers) {
  auto build = [](uint64_t seed) {
    Init init{Rng(seed)};
    return Bert(bert_config(), init);
  };
  const Bert a = build(5), b = build(5), other = build(6);
  const ParamList pa = a.parameters(), pb = b.parameters(), po = other.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(all_close(pa[i].tensor, pb[i].tensor, 0, 0)) << pa[i].name;
    EXPECT_FALSE(pa[i].tensor.same(pb[i].tensor));
  }
  EXPECT_FALSE(all_close(pa[0].tensor, po[0].tensor, 0, 1e-6));
}

TEST(ModuleMode, DropoutActsOnlyWhenTraining) {
  for (auto arch : {Architecture::gpt, Architecture::bert}) {
    ModelConfig c = testing::tiny_config(arch, PositionEncoding::learned);
    ModelConfig no_dropout = c;
    c.dropout = 0.2;
    c.attn_dropout = 0.3;
    Init init_a{Rng(1), DType::f64}, init_b{Rng(1), DType::f64};
    const auto model = build_model(c, init_a);
    const auto reference = build_model(no_dropout, init_b);  // same weights, no dropout at all
    const Tensor ids = testing::random_ids({2, 5}, 11, 1);
    const Tensor pad = arch == Architecture::bert ? testing::padding_2x5() : Tensor();
    const Tensor eval = model->logits(ids, pad, Context{});
    EXPECT_TRUE(all_close(eval, reference->logits(ids, pad, Context{}), 0, 0)) << testing::arch_name(arch);

    Rng rng1(9), rng2(9), rng3(10);
    const Tensor train1 = model->logits(ids, pad, Context{.training = true, .rng = &rng1});
    const Tensor train2 = model->logits(ids, pad, Context{.training = true, .rng = &rng2});
    const Tensor train3 = model->logits(ids, pad, Context{.training = true, .rng = &rng3});
    EXPECT_TRUE(all_close(train1, train2, 0, 0)) << "same generator state, same masks";
    EXPECT_FALSE(all_close(train1, eval, 0, 1e-6)) << "dropout did nothing in training";
    EXPECT_FALSE(all_close(train1, train3, 0, 1e-6)) << "another seed drew the same masks";
    EXPECT_THROW(model->logits(ids, pad, Context{.training = true}), Error);  // no generator
    // Without dropout, training mode is the identity on the same computation.
    Rng rng4(9);
    EXPECT_TRUE(all_close(reference->logits(ids, pad, Context{.training = true, .rng = &rng4}), eval, 0, 0));
  }
}

}  // namespace
}  // namespace tf::layers
