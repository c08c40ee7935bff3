// Head pruning (inspect/prune.h, Note [pruning]): a pruned model computes what the unpruned one does with
// the removed heads' gates at 0 (float64 to 1e-12, float32 to 1e-6), on GPT and BERT, with grouped-query
// attention, RoPE and T5's bias, and in cached decoding; pruning nothing changes nothing; the plan removes
// the least important whole groups and keeps one per layer; the optimizer's moments are cut with the
// weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "framework/autograd/tape.h"
#include "inspect/prune.h"
#include "layers/kv_cache.h"
#include "layers/model_fixtures.h"
#include "layers/models/gpt.h"
#include "train/run_fixture.h"

namespace tf::inspect {
namespace {

using layers::Architecture;
using layers::PositionEncoding;

// A run of the tiny recipe's model, with weights moved off their initialisation (heads then differ).
train::Run perturbed_run(const std::string& recipe_name, const std::vector<std::string>& more, DType dtype,
                         const tf::testing::RunTempDir& tmp) {
  const auto text = tmp.path() / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(3000));
  const train::Recipe recipe = tf::testing::tiny_recipe(recipe_name, text, tmp.path() / "run", tmp.path() / "cache", more);
  train::Run run = train::build_run(
      recipe, train::prepare_recipe_corpus(recipe.data, recipe.model.arch, nullptr, true, nullptr).tokenizer, dtype);
  Rng rng(17);
  for (const auto& p : run.params) {
    const Tensor noise = randn(p.tensor.shape(), rng, 0.3, DType::f64);
    for (int64_t i = 0; i < p.tensor.numel(); ++i) {
      if (dtype == DType::f64) p.tensor.data<double>()[i] += noise.data<double>()[i];
      else p.tensor.data<float>()[i] += static_cast<float>(noise.data<double>()[i]);
    }
  }
  return run;
}

// Importances that rank the heads by a fixed scramble: head (l, h) scores ((7 l + 3 h) mod 11) + 1.
HeadImportance scrambled_scores(const layers::ModelConfig& c) {
  HeadImportance r;
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (int64_t h = 0; h < c.heads(l); ++h) r.heads.push_back({l, h, static_cast<double>((7 * l + 3 * h) % 11 + 1), 0, 0});
  return r;
}

struct Inputs {
  Tensor ids, key_padding;
};
Inputs inputs_for(const train::Run& run) {
  const int64_t B = 2, T = run.recipe.data.seq_len;
  Inputs in{layers::testing::random_ids({B, T}, run.recipe.model.vocab_size, 4), Tensor()};
  if (run.recipe.model.arch == Architecture::bert) {
    std::vector<double> pad(static_cast<size_t>(B * T), 1.0);
    for (int64_t t = T - T / 3; t < T; ++t) pad[static_cast<size_t>(T + t)] = 0.0;  // the second row padded
    in.key_padding = Tensor::from_vector(pad, {B, T}, run.params.front().tensor.dtype());
  }
  return in;
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

struct Case {
  const char* name;
  const char* recipe;
  std::vector<std::string> sets;
  int64_t remove;
};

class PruneEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(PruneEquivalence, PrunedLogitsEqualTheGatedModel) {
  const Case& c = GetParam();
  for (const DType dtype : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const tf::testing::RunTempDir tmp;
    train::Run run = perturbed_run(c.recipe, c.sets, dtype, tmp);
    const layers::ModelConfig config = run.recipe.model;
    const PrunePlan plan = plan_pruning(config, scrambled_scores(config), c.remove);
    ASSERT_EQ(plan.removed, c.remove);
    const Inputs in = inputs_for(run);
    const NoGradGuard no_grad;
    const std::vector<Tensor> gates = pruning_gates(config, plan, dtype);
    layers::Context gated;
    gated.head_gates = &gates;
    const Tensor expected = run.model->logits(in.ids, in.key_padding, gated);
    const Tensor unpruned = run.model->logits(in.ids, in.key_padding, {});
    const train::Run pruned = prune_run(std::move(run), plan);
    EXPECT_EQ(pruned.recipe.model.total_heads(), config.total_heads() - c.remove);
    const Tensor got = pruned.model->logits(in.ids, in.key_padding, {});
    const double scale = max_abs_difference(expected, Tensor::zeros(expected.shape(), expected.dtype()));
    const double error = max_abs_difference(got, expected);
    EXPECT_LT(error, (dtype == DType::f64 ? 1e-12 : 1e-6) * std::max(1.0, scale)) << "pruned vs gated";
    // The masked heads mattered: the gated model is not the unpruned one.
    EXPECT_GT(max_abs_difference(unpruned, expected), 1e-3 * scale);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, PruneEquivalence,
    ::testing::Values(Case{"gpt_learned", "tiny_gpt", {"model.n_heads=4", "model.n_layers=3"}, 5},
                      Case{"gpt_rope_gqa", "tiny_gpt",
                           {"model.n_heads=4", "model.n_kv_heads=2", "model.position=rope", "model.n_layers=2"}, 2},
                      Case{"gpt_t5_window", "tiny_gpt",
                           {"model.n_heads=4", "model.position=t5", "model.attention_window=5", "model.bias=false"}, 3},
                      Case{"bert_t5_padding", "tiny_bert", {"model.n_heads=4", "model.position=t5"}, 4},
                      // the gate's rows go with their heads (AttentionHooks::rows_per_query_head)
                      Case{"gpt_qk_norm_attention_gate", "tiny_gpt",
                           {"model.n_heads=4", "model.position=rope", "model.qk_norm=true", "model.attention_gate=true"},
                           3},
                      // a removed group's columns of the value embeddings go with it (columns_per_kv_head)
                      Case{"gpt_gqa_value_embeddings", "tiny_gpt",
                           {"model.n_heads=4", "model.n_kv_heads=2", "model.value_embeddings=true", "model.n_layers=2"},
                           2}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(Prune, RemovingNoHeadIsTheIdentity) {
  const tf::testing::RunTempDir tmp;
  train::Run run = perturbed_run("tiny_gpt", {"model.n_heads=4"}, DType::f32, tmp);
  const layers::ModelConfig config = run.recipe.model;
  std::vector<std::pair<std::string, Tensor>> before;
  for (const auto& p : run.params) before.emplace_back(p.name, p.tensor.clone());
  const train::Run pruned = prune_run(std::move(run), plan_pruning(config, scrambled_scores(config), 0));
  ASSERT_EQ(pruned.params.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(pruned.params[i].name, before[i].first);
    ASSERT_EQ(pruned.params[i].tensor.shape(), before[i].second.shape()) << before[i].first;
    EXPECT_EQ(std::memcmp(pruned.params[i].tensor.raw_data(), before[i].second.raw_data(), before[i].second.nbytes()), 0)
        << before[i].first;
  }
  EXPECT_EQ(pruned.recipe.model.heads_per_layer, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(pruned.recipe.model.head_dim(), config.head_dim());
}

TEST(Prune, PlanRemovesTheLeastImportantWholeGroupsAndKeepsOnePerLayer) {
  layers::ModelConfig c = layers::testing::tiny_config(Architecture::gpt, PositionEncoding::learned);
  c.n_layers = 2;
  c.n_heads = 6;
  c.n_kv_heads = 3;  // groups {0, 1}, {2, 3}, {4, 5}
  HeadImportance s;
  const double importance[2][6] = {{0.9, 0.8, 0.1, 0.2, 0.5, 0.1}, {0.1, 0.1, 0.05, 0.05, 0.3, 0.3}};
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 6; ++h) s.heads.push_back({l, h, importance[l][h], 0, 0});
  // Group sums: layer 0 {1.7, 0.3, 0.6}, layer 1 {0.2, 0.1, 0.6}. Ascending: (1,1) 0.1, (1,0) 0.2, (0,1) 0.3, ...
  PrunePlan p = plan_pruning(c, s, 2);
  EXPECT_EQ(p.kept[0], (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(p.kept[1], (std::vector<int64_t>{0, 1, 4, 5}));
  p = plan_pruning(c, s, 3);  // rounds down to whole groups
  EXPECT_EQ(p.removed, 2);
  // Four heads: (1,1) then (1,0); layer 1 is then down to one group, so (0,1) goes next.
  p = plan_pruning(c, s, 6);
  EXPECT_EQ(p.kept[0], (std::vector<int64_t>{0, 1, 4, 5}));
  EXPECT_EQ(p.kept[1], (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(max_removable_heads(c), 8);
  p = plan_pruning(c, s, 8);
  EXPECT_EQ(p.kept[0], (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(p.kept[1], (std::vector<int64_t>{4, 5}));
  EXPECT_THROW(plan_pruning(c, s, 10), InputError);
  EXPECT_EQ(heads_in_fraction(c, 0.25), 4);  // 3 heads = 1.5 groups: rounds to 2 groups
  EXPECT_EQ(heads_in_fraction(c, 0.0), 0);
  c.position = PositionEncoding::alibi;
  EXPECT_THROW(plan_pruning(c, s, 2), InputError);
}

TEST(Prune, RankByRawImportanceOrMaskedLoss) {
  HeadImportance s;
  s.loss = 2.0;
  s.heads = {{0, 0, 0.9, 0.01, 2.5}, {0, 1, 0.1, 0.03, 2.1}};
  HeadImportance raw = s, masked = s, paper = s;
  rank_by(raw, PruneBy::raw_importance);
  rank_by(masked, PruneBy::masked_loss);
  rank_by(paper, PruneBy::importance);
  EXPECT_DOUBLE_EQ(raw.heads[0].importance, 0.01);
  EXPECT_DOUBLE_EQ(raw.heads[1].importance, 0.03);
  EXPECT_NEAR(masked.heads[0].importance, 0.5, 1e-12);
  EXPECT_NEAR(masked.heads[1].importance, 0.1, 1e-12);
  EXPECT_EQ(paper.heads[0].importance, 0.9);
  EXPECT_EQ(parse_prune_by("raw"), PruneBy::raw_importance);
  EXPECT_THROW(parse_prune_by("size"), InputError);
}

TEST(Prune, OptimizerMomentsAreCutWithTheWeights) {
  const tf::testing::RunTempDir tmp;
  train::Run run = perturbed_run("tiny_gpt", {"model.n_heads=4", "model.n_kv_heads=2"}, DType::f32, tmp);
  // One step, so every parameter has Adam moments; they differ per row and column.
  const Inputs in = inputs_for(run);
  backward(run.model->loss(in.ids, in.ids, in.key_padding, {}));
  run.optimizer->step();
  const layers::ModelConfig config = run.recipe.model;
  const optim::OptimizerState before = run.optimizer->state();
  const PrunePlan plan = plan_pruning(config, scrambled_scores(config), 2);
  const train::Run pruned = prune_run(std::move(run), plan);
  const optim::OptimizerState after = pruned.optimizer->state();
  EXPECT_EQ(after.step, before.step);
  const int64_t D = config.head_dim(), C = config.d_model;
  for (int64_t l = 0; l < config.n_layers; ++l) {
    const std::string name = "blocks." + std::to_string(l) + ".attn.";
    const int64_t H = config.heads(l), kept_H = static_cast<int64_t>(plan.kept[l].size()), Hg = config.group_size();
    for (const char* slot : {"exp_avg", "exp_avg_sq"}) {
      const Tensor& qkv_before = before.params.at(name + "qkv.weight").slots.at(slot);
      const Tensor& qkv_after = after.params.at(name + "qkv.weight").slots.at(slot);
      const Tensor& proj_before = before.params.at(name + "proj.weight").slots.at(slot);
      const Tensor& proj_after = after.params.at(name + "proj.weight").slots.at(slot);
      for (int64_t i = 0; i < kept_H; ++i) {
        const int64_t h = plan.kept[l][static_cast<size_t>(i)], g = h / Hg, G = H / Hg, kept_G = kept_H / Hg;
        for (int64_t d = 0; d < D; ++d)
          for (int64_t k = 0; k < C; ++k) {
            EXPECT_EQ(qkv_after.data<float>()[(i * D + d) * C + k], qkv_before.data<float>()[(h * D + d) * C + k]);
            // The key row of this head's group sits after the kept queries.
            EXPECT_EQ(qkv_after.data<float>()[((kept_H + i / Hg) * D + d) * C + k],
                      qkv_before.data<float>()[((H + g) * D + d) * C + k]);
            EXPECT_EQ(qkv_after.data<float>()[((kept_H + kept_G + i / Hg) * D + d) * C + k],
                      qkv_before.data<float>()[((H + G + g) * D + d) * C + k]);
            EXPECT_EQ(proj_after.data<float>()[k * kept_H * D + i * D + d], proj_before.data<float>()[k * H * D + h * D + d]);
          }
      }
    }
  }
}

TEST(Prune, CachedDecodingOfAPrunedGptEqualsItsFullForward) {
  const tf::testing::RunTempDir tmp;
  train::Run run = perturbed_run("tiny_gpt", {"model.n_heads=4", "model.n_kv_heads=2", "model.position=rope"},
                                 DType::f64, tmp);
  const layers::ModelConfig config = run.recipe.model;
  const train::Run pruned = prune_run(std::move(run), plan_pruning(config, scrambled_scores(config), 2));
  ASSERT_NE(pruned.recipe.model.heads(0), pruned.recipe.model.heads(1));  // the layers differ: per-layer caches
  const auto* gpt = dynamic_cast<const layers::Gpt*>(pruned.model.get());
  ASSERT_NE(gpt, nullptr);
  const Tensor ids = layers::testing::random_ids({1, 7}, config.vocab_size, 5);
  const NoGradGuard no_grad;
  const Tensor full = gpt->logits(ids, Tensor(), {});  // (1, 7, V)
  layers::KvCache cache = gpt->make_cache(1);
  const int64_t V = config.vocab_size;
  for (int64_t t = 0; t < 7; ++t) {
    const Tensor step = gpt->logits_cached(Tensor::from_ids({ids.data<int32_t>()[t]}, {1, 1}), cache, {});
    for (int64_t v = 0; v < V; ++v)
      EXPECT_NEAR(step.data<double>()[v], full.data<double>()[t * V + v], 1e-12) << "position " << t;
  }
}

}  // namespace
}  // namespace tf::inspect
