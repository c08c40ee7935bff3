// Evaluation: losses against hand-computed values (uniform and constant-prediction models) and a
// manual float64 loop over the logits, bits per character, accuracies against manual counts, the
// unigram and most-frequent baselines, determinism and an empty tape.
#include "train/evaluate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>

#include "data/char_tokenizer.h"
#include "framework/autograd/tape.h"
#include "layers/models/bert.h"
#include "layers/models/gpt.h"

namespace tf::train {
namespace {

// 67 code points, two of them two bytes long in UTF-8.
const std::string kText = "the cat sat on the mat; the dog sat on the log. caf\xc3\xa9 and na\xc3\xafve too.";

layers::ModelConfig small_config(layers::Architecture arch, int64_t vocab_size) {
  layers::ModelConfig c;
  c.arch = arch;
  c.causal = arch == layers::Architecture::gpt;
  c.pre_norm = c.causal;
  c.vocab_size = vocab_size;
  c.max_seq_len = 10;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 2;
  c.init_std = 0.3;  // far from uniform predictions, so the losses below are not all ln V
  return c;
}

std::unique_ptr<layers::LanguageModel> build(const layers::ModelConfig& c, uint64_t seed = 3) {
  layers::Init init{Rng(seed)};
  return layers::build_model(c, init);
}

// Zeroes every parameter but the layer-norm scales (ones): every hidden state is then 0, so a GPT's
// logits are 0 (uniform predictions) and a BERT's are mlm_head.bias.
void zero_all_but_norm_scales(const layers::LanguageModel& model) {
  for (const auto& p : model.parameters())
    if (!(p.kind == layers::ParamKind::norm && p.name.ends_with(".weight"))) p.tensor.fill(0.0);
}

struct Manual {
  double nats = 0;
  int64_t tokens = 0, correct = 0;
};

// Independent of evaluate.cpp: log-sum-exp minus the target's logit, in float64, per target.
void add_manual(const Tensor& logits, const Tensor& targets, Manual& m) {
  const int64_t V = logits.dim(2);
  for (int64_t i = 0; i < targets.numel(); ++i) {
    const auto target = static_cast<int64_t>(targets.at(i));
    if (target == data::kIgnoreIndex) continue;
    double max = -INFINITY, sum = 0;
    int64_t best = 0;
    for (int64_t v = 0; v < V; ++v) {
      max = std::max(max, logits.at(i * V + v));
      if (logits.at(i * V + v) > logits.at(i * V + best)) best = v;
    }
    for (int64_t v = 0; v < V; ++v) sum += std::exp(logits.at(i * V + v) - max);
    m.nats += max + std::log(sum) - logits.at(i * V + target);
    m.tokens += 1;
    m.correct += best == target;
  }
}

data::CharTokenizer bert_tokenizer() { return data::CharTokenizer::train(kText, {"[PAD]", "[MASK]", "[CLS]", "[SEP]"}); }

data::MaskedLmBatcher masked_batcher(const data::CharTokenizer& tok) {
  return data::MaskedLmBatcher::sequential(tok.encode(kText), 3, 10, /*seed=*/7, data::MaskedLmTokens::from(tok));
}

TEST(EvaluateCausal, UniformModelGivesLnVAndPerplexityV) {
  const auto tok = data::CharTokenizer::train(kText);
  const std::vector<int32_t> ids = tok.encode(kText);
  const int64_t V = tok.vocab_size(), N = static_cast<int64_t>(ids.size());
  ASSERT_EQ(N, count_code_points(kText));
  const auto model = build(small_config(layers::Architecture::gpt, V));
  zero_all_but_norm_scales(*model);
  auto batcher = data::CausalBatcher::sequential(ids, 2, 8);
  const EvalResult r = evaluate_causal(*model, batcher, 0, N);
  EXPECT_NEAR(r.loss, std::log(static_cast<double>(V)), 1e-5);
  EXPECT_NEAR(r.perplexity, static_cast<double>(V), 1e-4 * V);
  // One token per character: bits/char = log2 V, over the N - 1 predicted characters.
  EXPECT_NEAR(r.bits_per_char, std::log2(static_cast<double>(V)), 1e-5);
  EXPECT_EQ(r.tokens, N - 1);
  EXPECT_EQ(r.chars, N - 1);
  EXPECT_EQ(r.batches, (N - 1 + 2 * 8 - 1) / (2 * 8));  // 66 targets in windows of 8, 2 per batch
  EXPECT_TRUE(std::isnan(r.mlm_accuracy));
}

TEST(EvaluateCausal, MatchesAManualLoopAndGivesBitsPerCharFromTheLoss) {
  const auto tok = data::CharTokenizer::train(kText);
  const std::vector<int32_t> ids = tok.encode(kText);
  const auto N = static_cast<int64_t>(ids.size());
  const auto model = build(small_config(layers::Architecture::gpt, tok.vocab_size()));
  auto batcher = data::CausalBatcher::sequential(ids, 2, 8);
  const EvalResult r = evaluate_causal(*model, batcher, 0, N);

  Manual m;
  auto manual = data::CausalBatcher::sequential(ids, 2, 8);
  {
    const NoGradGuard no_grad;
    while (!manual.done()) {
      const data::CausalBatch b = manual.next();
      add_manual(model->logits(b.inputs, Tensor(), layers::Context{}), b.targets, m);
    }
  }
  ASSERT_EQ(r.tokens, m.tokens);
  // float32 logits summed in float32 by the cross-entropy kernel: ~1e-6 relative over 66 tokens.
  EXPECT_NEAR(r.loss, m.nats / m.tokens, 1e-5 * r.loss);
  EXPECT_GT(std::abs(r.loss - std::log(static_cast<double>(tok.vocab_size()))), 0.05);  // not uniform
  EXPECT_NEAR(r.perplexity, std::exp(r.loss), 1e-12 * r.perplexity);
  EXPECT_NEAR(r.bits_per_char, r.loss / std::numbers::ln2, 1e-12);  // one token per character
  // Unknown character count: no bits/char.
  EXPECT_TRUE(std::isnan(evaluate_causal(*model, batcher, 0, 0).bits_per_char));
}

TEST(EvaluateCausal, MaxBatchesEvaluatesAPrefixAndChargesItsShareOfTheCharacters) {
  const auto tok = data::CharTokenizer::train(kText);
  const std::vector<int32_t> ids = tok.encode(kText);
  const auto N = static_cast<int64_t>(ids.size());
  const auto model = build(small_config(layers::Architecture::gpt, tok.vocab_size()));
  auto batcher = data::CausalBatcher::sequential(ids, 2, 8);
  // As if each token stood for 3 characters (a BPE tokenizer): 16 tokens carry 48 characters.
  const EvalResult r = evaluate_causal(*model, batcher, 1, 3 * N);
  EXPECT_EQ(r.batches, 1);
  EXPECT_EQ(r.tokens, 16);
  EXPECT_EQ(r.chars, 48);
  EXPECT_NEAR(r.bits_per_char, r.loss * 16 / 48 / std::numbers::ln2, 1e-12);
  EXPECT_THROW(evaluate_causal(*model, batcher, -1, 0), InputError);
  EXPECT_THROW(evaluate_causal(*model, batcher, 0, -5), InputError);
}

TEST(EvaluateCausal, IsDeterministicInEvalModeAndRecordsNothing) {
  const auto tok = data::CharTokenizer::train(kText);
  const std::vector<int32_t> ids = tok.encode(kText);
  auto config = small_config(layers::Architecture::gpt, tok.vocab_size());
  const auto plain = build(config);
  config.dropout = 0.3;
  config.attn_dropout = 0.3;
  const auto with_dropout = build(config);  // the same weights: dropout draws nothing at init
  tape().clear();
  auto batcher = data::CausalBatcher::sequential(ids, 2, 8);
  const EvalResult a = evaluate_causal(*with_dropout, batcher, 0, 0);
  batcher.rewind();
  batcher.next();  // part-way through a pass: evaluation rewinds first
  const EvalResult b = evaluate_causal(*with_dropout, batcher, 0, 0);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.loss, evaluate_causal(*plain, batcher, 0, 0).loss);  // dropout is off in eval mode
  EXPECT_EQ(tape().size(), 0u);
}

TEST(EvaluateMasked, ConstantPredictionGivesHandComputedLossAndTheBaselineAccuracy) {
  const auto tok = bert_tokenizer();
  const int64_t V = tok.vocab_size();
  auto batcher = masked_batcher(tok);
  // Count the masked targets by hand; the model will always predict the most frequent one.
  std::map<int32_t, int64_t> count;
  int64_t n = 0;
  while (!batcher.done()) {
    const data::MaskedLmBatch b = batcher.next();
    for (int64_t i = 0; i < b.targets.numel(); ++i)
      if (const auto t = static_cast<int32_t>(b.targets.at(i)); t != data::kIgnoreIndex) ++count[t], ++n;
  }
  int32_t most = 0;
  for (const auto& [id, k] : count)
    if (k > count[most]) most = id;
  const double share = static_cast<double>(count[most]) / static_cast<double>(n);
  ASSERT_LT(share, 1.0);

  const auto model = build(small_config(layers::Architecture::bert, V));
  zero_all_but_norm_scales(*model);
  dynamic_cast<const layers::Bert&>(*model).mlm_bias.data<float>()[most] = 1.0f;  // logits = e_most
  const EvalResult r = evaluate_masked(*model, batcher, 0);
  EXPECT_EQ(r.tokens, n);
  EXPECT_DOUBLE_EQ(r.mlm_accuracy, share);
  EXPECT_DOUBLE_EQ(baseline_most_frequent_accuracy(batcher, 0), share);
  // -log softmax: log(e + V - 1) - 1 at the predicted token, log(e + V - 1) elsewhere.
  EXPECT_NEAR(r.loss, std::log(std::numbers::e + V - 1) - share, 1e-5);
  EXPECT_TRUE(std::isnan(r.bits_per_char));
}

TEST(EvaluateMasked, BaselinesAreTheLossOfUnigramAndOwnTokenPredictors) {
  const auto tok = bert_tokenizer();
  const int64_t V = tok.vocab_size();
  auto batcher = masked_batcher(tok);
  const MaskedBaselines b = masked_baselines(batcher, 0);
  // Independent truth for the unigram loss: a BERT whose logits are log n(t) (zero weights, the MLM
  // bias set to the log counts, a large negative for unseen ids) has loss H(target).
  std::map<int32_t, int64_t> count;
  std::map<std::pair<int32_t, int32_t>, int64_t> pair;  // (input, target)
  std::map<int32_t, int64_t> inputs;
  int64_t n = 0;
  batcher.rewind();
  while (!batcher.done()) {
    const data::MaskedLmBatch m = batcher.next();
    for (int64_t i = 0; i < m.targets.numel(); ++i)
      if (const auto t = static_cast<int32_t>(m.targets.at(i)); t != data::kIgnoreIndex) {
        const auto in = static_cast<int32_t>(m.inputs.at(i));
        ++count[t], ++pair[{in, t}], ++inputs[in], ++n;
      }
  }
  const auto model = build(small_config(layers::Architecture::bert, V));
  zero_all_but_norm_scales(*model);
  float* bias = dynamic_cast<const layers::Bert&>(*model).mlm_bias.data<float>();
  for (int64_t v = 0; v < V; ++v) bias[v] = count.count(v) ? std::log(static_cast<float>(count[v])) : -60.0f;
  EXPECT_NEAR(evaluate_masked(*model, batcher, 0).loss, b.unigram_loss, 1e-5);
  // The own-token predictor, from the counts here: a = the share of visible inputs equal to the target.
  const int32_t mask = tok.id_of("[MASK]");
  int64_t visible = 0, copied = 0, masked_most = 0;
  for (const auto& [key, c] : pair) {
    if (key.first == mask) continue;
    visible += c;
    if (key.first == key.second) copied += c;
  }
  const double a = static_cast<double>(copied) / static_cast<double>(visible);
  int32_t most = count.begin()->first;
  for (const auto& [t, c] : count)
    if (c > count[most]) most = t;
  double loss = 0;
  for (const auto& [key, c] : pair) {
    const double u = static_cast<double>(count[key.second]) / static_cast<double>(n);
    const double p = key.first == mask ? u : (key.first == key.second ? a : 0.0) + (1 - a) * u;
    loss -= static_cast<double>(c) * std::log(p);
    if (key.first == mask && key.second == most) masked_most = c;
  }
  EXPECT_NEAR(b.own_token_loss, loss / static_cast<double>(n), 1e-12);
  EXPECT_NEAR(b.own_token_accuracy, static_cast<double>(masked_most + copied) / static_cast<double>(n), 1e-12);
  // Seeing the input cannot hurt, and BERT's kept tokens make it help here.
  EXPECT_LT(b.own_token_loss, b.unigram_loss);
  EXPECT_GT(b.own_token_accuracy, b.most_frequent_accuracy);
}

TEST(EvaluateMasked, MatchesAManualCountAndIsDeterministic) {
  const auto tok = bert_tokenizer();
  const auto model = build(small_config(layers::Architecture::bert, tok.vocab_size()), 5);
  auto batcher = masked_batcher(tok);
  tape().clear();
  const EvalResult r = evaluate_masked(*model, batcher, 0);
  EXPECT_EQ(tape().size(), 0u);

  Manual m;
  auto manual = masked_batcher(tok);
  int64_t batches = 0;
  {
    const NoGradGuard no_grad;
    for (; !manual.done(); ++batches) {
      const data::MaskedLmBatch b = manual.next();
      add_manual(model->logits(b.inputs, b.attention_mask, layers::Context{}), b.targets, m);
    }
  }
  EXPECT_EQ(r.batches, batches);
  EXPECT_EQ(r.tokens, m.tokens);
  EXPECT_DOUBLE_EQ(r.mlm_accuracy, static_cast<double>(m.correct) / static_cast<double>(m.tokens));
  EXPECT_NEAR(r.loss, m.nats / m.tokens, 1e-5 * r.loss);

  const EvalResult again = evaluate_masked(*model, batcher, 0);
  EXPECT_EQ(again.loss, r.loss);
  EXPECT_EQ(again.mlm_accuracy, r.mlm_accuracy);
  EXPECT_EQ(tape().size(), 0u);

  const EvalResult one = evaluate_masked(*model, batcher, 1);
  EXPECT_EQ(one.batches, 1);
  EXPECT_LT(one.tokens, r.tokens);
}

TEST(UnigramBitsPerChar, HandComputedEntropies) {
  EXPECT_DOUBLE_EQ(unigram_bits_per_char("aaaa"), 0.0);
  EXPECT_DOUBLE_EQ(unigram_bits_per_char("ab"), 1.0);
  EXPECT_DOUBLE_EQ(unigram_bits_per_char("abcdabcd"), 2.0);
  const double aab = -(2.0 / 3 * std::log2(2.0 / 3) + 1.0 / 3 * std::log2(1.0 / 3));  // log2 3 - 2/3
  EXPECT_NEAR(unigram_bits_per_char("aab"), aab, 1e-15);
  EXPECT_NEAR(unigram_bits_per_char("aba"), aab, 1e-15);
  // Code points, not bytes: "\xc3\xa9" is one character.
  EXPECT_NEAR(unigram_bits_per_char("\xc3\xa9\xc3\xa9z"), aab, 1e-15);
  EXPECT_THROW(unigram_bits_per_char(""), InputError);
  EXPECT_THROW(unigram_bits_per_char("ab\xff"), InputError);
}

TEST(CountCodePoints, CountsCharactersNotBytes) {
  EXPECT_EQ(count_code_points(""), 0);
  EXPECT_EQ(count_code_points("h\xc3\xa9llo"), 5);
  EXPECT_EQ(count_code_points("\xe2\x82\xac\xf0\x9f\x98\x80"), 2);  // euro sign, an emoji
  EXPECT_THROW(count_code_points("\xc3"), InputError);
}

}  // namespace
}  // namespace tf::train
