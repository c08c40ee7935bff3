// Head importance (inspect/head_importance.h, `tapeformer heads`): in float64 each head's raw importance
// is the mean over sequences of |a central difference of that sequence's loss in the head's gate|; the
// per-layer normalisation, the masked losses and the unmasked loss against independent computations;
// the command's table, JSON and errors on tiny trained GPT and BERT checkpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "framework/autograd/tape.h"
#include "layers/model_fixtures.h"
#include "train/evaluate.h"
#include "inspect/head_importance.h"
#include "train/run_fixture.h"

namespace tf::inspect {
namespace {

using layers::Architecture;
using layers::Context;
using layers::LanguageModel;

constexpr int64_t kVocab = 11, kSeqLen = 5, kBatch = 2;

// Every row of every batch the batcher gives, as one-row batches: the examples of Note [head importance].
struct Row {
  Tensor inputs, targets, key_padding;
};
Row row_of(const Tensor& inputs, const Tensor& targets, const Tensor& padding, int64_t b) {
  const int64_t T = inputs.dim(1);
  auto ids = [&](const Tensor& t) {
    return Tensor::from_ids(std::vector<int32_t>(t.data<int32_t>() + b * T, t.data<int32_t>() + (b + 1) * T), {1, T});
  };
  Row r{ids(inputs), ids(targets), Tensor()};
  if (padding.defined()) {
    const std::vector<double> p = padding.to_vector();
    r.key_padding = Tensor::from_vector(std::vector<double>(p.begin() + b * T, p.begin() + (b + 1) * T), {1, T}, DType::f64);
  }
  return r;
}
std::vector<Row> rows_of(data::CausalBatcher& batcher) {
  std::vector<Row> rows;
  train::for_each_batch(batcher, 0, "test", [&](const data::CausalBatch& b) {
    for (int64_t i = 0; i < b.inputs.dim(0); ++i) rows.push_back(row_of(b.inputs, b.targets, Tensor(), i));
  });
  return rows;
}
std::vector<Row> rows_of(data::MaskedLmBatcher& batcher) {
  std::vector<Row> rows;
  train::for_each_batch(batcher, 0, "test", [&](const data::MaskedLmBatch& b) {
    for (int64_t i = 0; i < b.inputs.dim(0); ++i) rows.push_back(row_of(b.inputs, b.targets, b.attention_mask, i));
  });
  return rows;
}

bool has_target(const Row& r) {
  for (int64_t i = 0; i < r.targets.numel(); ++i)
    if (r.targets.data<int32_t>()[i] != data::kIgnoreIndex) return true;
  return false;
}

// The loss of one row with head h of layer l gated by xi, every other gate 1.
double row_loss(const LanguageModel& model, const Row& r, int64_t l, int64_t h, double xi) {
  const auto& c = model.config();
  std::vector<Tensor> gates(static_cast<size_t>(c.n_layers), Tensor::full({c.n_heads}, 1.0, DType::f64));
  gates[static_cast<size_t>(l)] = Tensor::full({c.n_heads}, 1.0, DType::f64);
  gates[static_cast<size_t>(l)].data<double>()[h] = xi;
  Context ctx;
  ctx.head_gates = &gates;
  const NoGradGuard no_grad;
  return model.loss(r.inputs, r.targets, r.key_padding, ctx).item();
}

template <class Batcher>
void expect_importance_is_mean_abs_difference(const LanguageModel& model, Batcher& batcher) {
  const auto& c = model.config();
  const HeadImportance r = head_importance(model, batcher, 0);
  ASSERT_EQ(static_cast<int64_t>(r.heads.size()), c.n_layers * c.n_heads);
  std::vector<Row> rows = rows_of(batcher);
  std::erase_if(rows, [](const Row& row) { return !has_target(row); });
  EXPECT_EQ(r.sequences, static_cast<int64_t>(rows.size()));
  const double e = 1e-5;
  double worst = 0;
  std::map<int64_t, double> squares;  // layer -> sum of importance^2
  for (const HeadScore& s : r.heads) {
    double mean = 0;  // E_x |dL(x)/dxi| by central differences, one sequence at a time
    for (const Row& row : rows)
      mean += std::abs(row_loss(model, row, s.layer, s.head, 1 + e) - row_loss(model, row, s.layer, s.head, 1 - e)) / (2 * e);
    mean /= static_cast<double>(rows.size());
    const double error = std::abs(s.raw_importance - mean) / mean;
    worst = std::max(worst, error);
    EXPECT_LT(error, 1e-7) << "layer " << s.layer << ", head " << s.head << ": " << s.raw_importance << " vs " << mean;
    squares[s.layer] += s.importance * s.importance;
    // The masked loss is the evaluation with that gate at 0.
    std::vector<Tensor> gates(static_cast<size_t>(c.n_layers), Tensor::full({c.n_heads}, 1.0, DType::f64));
    gates[static_cast<size_t>(s.layer)] = Tensor::full({c.n_heads}, 1.0, DType::f64);
    gates[static_cast<size_t>(s.layer)].data<double>()[s.head] = 0;
    Context masked;
    masked.head_gates = &gates;
    double nats = 0;
    int64_t tokens = 0;
    for (const Row& row : rows) {
      int64_t n = 0;
      for (int64_t i = 0; i < row.targets.numel(); ++i) n += row.targets.data<int32_t>()[i] != data::kIgnoreIndex;
      const NoGradGuard no_grad;
      nats += static_cast<double>(n) * model.loss(row.inputs, row.targets, row.key_padding, masked).item();
      tokens += n;
    }
    EXPECT_NEAR(s.masked_loss, nats / static_cast<double>(tokens), 1e-12) << "layer " << s.layer << ", head " << s.head;
  }
  std::printf("worst relative error of the importance against differences: %.2e\n", worst);
  for (const auto& [layer, sum] : squares) EXPECT_NEAR(sum, 1.0, 1e-12) << "layer " << layer;
  for (size_t i = 1; i < r.heads.size(); ++i) EXPECT_GE(r.heads[i - 1].importance, r.heads[i].importance);
}

// Sequential windows over 29 ids: batches of 2, 2, 2 and a last one of one padded row.
std::vector<int32_t> text_ids() {
  const Tensor ids = layers::testing::random_ids({29}, kVocab, 3);
  return {ids.data<int32_t>(), ids.data<int32_t>() + ids.numel()};
}

TEST(HeadImportance, GptRawImportanceIsTheMeanAbsoluteDifferenceOverSequences) {
  layers::ModelConfig c = layers::testing::tiny_config(Architecture::gpt, layers::PositionEncoding::rope);
  c.n_heads = 4;
  c.n_kv_heads = 2;
  layers::Init init{Rng(5), DType::f64};
  const auto model = layers::build_model(c, init);
  layers::testing::perturb(model->parameters(), 6);
  auto batcher = data::CausalBatcher::sequential(text_ids(), kBatch, kSeqLen);
  expect_importance_is_mean_abs_difference(*model, batcher);
  // The unmasked loss is train::evaluate_causal's, and the parameters are left as they were.
  for (const auto& p : model->parameters()) {
    EXPECT_TRUE(p.tensor.requires_grad()) << p.name;
    EXPECT_FALSE(p.tensor.grad().defined()) << p.name;
  }
  EXPECT_EQ(head_importance(*model, batcher, 2).loss, train::evaluate_causal(*model, batcher, 2, 0).loss);
}

TEST(HeadImportance, BertRawImportanceIsTheMeanAbsoluteDifferenceOverSequences) {
  const layers::ModelConfig c = layers::testing::tiny_config(Architecture::bert, layers::PositionEncoding::t5);
  layers::Init init{Rng(5), DType::f64};
  const auto model = layers::build_model(c, init);
  layers::testing::perturb(model->parameters(), 6);
  data::MaskedLmTokens tokens;
  tokens.pad = 0, tokens.mask = 1, tokens.cls = 2, tokens.sep = 3;
  tokens.vocab_size = kVocab;
  tokens.specials = {0, 1, 2, 3};
  auto batcher = data::MaskedLmBatcher::sequential(text_ids(), kBatch, kSeqLen, 9, tokens, {.prob = 0.3});
  expect_importance_is_mean_abs_difference(*model, batcher);
  EXPECT_EQ(head_importance(*model, batcher, 0).loss, train::evaluate_masked(*model, batcher, 0).loss);
}

}  // namespace
}  // namespace tf::inspect
