// inspect/attention_maps: head statistics against maps whose statistics are known by hand, and the
// captured maps against attention computed independently from the weights, in float64: layer 0 of a
// GPT by explicit loops (embedding + position, layer norm, the QKV projection, causal softmax of
// q.k / sqrt(D)); every layer of a GPT and a BERT for the invariants (rows sum to 1, causal zeros).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "data/char_tokenizer.h"
#include "inspect/attention_maps.h"
#include "layers/models/model.h"

namespace tf::inspect {
namespace {

// Query i attends to i - 1 only (query 0 to itself): entropy 0, distance (T-1)/T, previous 1,
// first token 1/(T-1) (only query 1's previous token is the first), self 1/T.
TEST(HeadStats, APreviousTokenHead) {
  const int64_t T = 5;
  std::vector<float> map(T * T, 0.0f);
  map[0] = 1;
  for (int64_t i = 1; i < T; ++i) map[i * T + i - 1] = 1;
  const HeadStats s = head_stats(map.data(), T);
  EXPECT_DOUBLE_EQ(s.entropy_bits, 0.0);
  EXPECT_DOUBLE_EQ(s.mean_distance, 4.0 / 5);
  EXPECT_DOUBLE_EQ(s.previous_token, 1.0);
  EXPECT_DOUBLE_EQ(s.first_token, 1.0 / 4);
  EXPECT_DOUBLE_EQ(s.self, 1.0 / 5);
}

// Uniform causal attention: row i spreads over i + 1 keys: entropy log2(i + 1), distance i / 2,
// previous and first 1 / (i + 1), self 1 / (i + 1).
TEST(HeadStats, UniformCausalAttention) {
  const int64_t T = 7;
  std::vector<float> map(T * T, 0.0f);
  double entropy = 0, distance = 0, previous = 0, self = 0;
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t j = 0; j <= i; ++j) map[i * T + j] = 1.0f / (i + 1);
    entropy += std::log2(i + 1.0) / T;
    distance += i / 2.0 / T;
    self += 1.0 / (i + 1) / T;
    if (i >= 1) previous += 1.0 / (i + 1) / (T - 1);
  }
  const HeadStats s = head_stats(map.data(), T);
  EXPECT_NEAR(s.entropy_bits, entropy, 1e-6);
  EXPECT_NEAR(s.mean_distance, distance, 1e-6);
  EXPECT_NEAR(s.previous_token, previous, 1e-7);
  EXPECT_NEAR(s.first_token, previous, 1e-7);
  EXPECT_NEAR(s.self, self, 1e-7);
}

TEST(VisibleToken, SpacesNewlinesAndControlBytesAreShown) {
  EXPECT_EQ(visible_token("a b"), "a\xe2\x90\xa3" "b");
  EXPECT_EQ(visible_token("\n"), "\xe2\x86\xb5");
  EXPECT_EQ(visible_token(std::string("\x01", 1)), "\\x01");
  EXPECT_EQ(visible_token("\xc3\xa9"), "\xc3\xa9");  // UTF-8 passes through
}

// A line of text (fill's filled-in sequences) keeps its spaces; the rest is shown as in a token.
TEST(VisibleToken, ALineKeepsItsSpaces) {
  EXPECT_EQ(visible_line("a b\tc\nd"), "a b\xe2\x86\x92" "c\xe2\x86\xb5" "d");
  EXPECT_EQ(visible_line(std::string("\x7f\xe2", 2)), "\\x7F\\xE2");
}

// A byte-level BPE token can hold part of a character: its stray bytes become the text \xNN, so the
// labels (cairo) and heads.json (JSON) are valid UTF-8.
TEST(VisibleToken, BytesThatAreNotWholeCharactersAreEscaped) {
  EXPECT_EQ(utf8_or_escaped("\xc3"), "\\xC3");                          // a lead byte alone
  EXPECT_EQ(utf8_or_escaped("\xa9x"), "\\xA9x");                        // a continuation byte alone
  EXPECT_EQ(utf8_or_escaped("a\xc3\xa9" "b"), "a\xc3\xa9" "b");        // a whole character
  EXPECT_EQ(utf8_or_escaped("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");  // four bytes
  EXPECT_EQ(utf8_or_escaped("\xed\xa0\x80"), "\\xED\\xA0\\x80");     // a surrogate is not a character
  EXPECT_EQ(utf8_or_escaped("\xc0\xaf"), "\\xC0\\xAF");                // an overlong form neither
  EXPECT_EQ(visible_token("\xe2\x80"), "\\xE2\\x80");                  // a cut three-byte character
}

layers::ModelConfig small_config(layers::Architecture arch) {
  layers::ModelConfig c;
  c.arch = arch;
  c.causal = arch == layers::Architecture::gpt;
  c.pre_norm = arch == layers::Architecture::gpt;
  c.vocab_size = 40;
  c.max_seq_len = 16;
  c.d_model = 12;
  c.n_layers = 2;
  c.n_heads = 3;
  c.init_std = 0.5;  // large weights: peaked maps, so a wrong map is far from the right one
  return c;
}

std::map<std::string, Tensor> by_name(const layers::LanguageModel& model) {
  std::map<std::string, Tensor> out;
  for (const layers::NamedParam& p : model.parameters()) out[p.name] = p.tensor;
  return out;
}

TEST(CaptureAttention, LayerZeroOfAGptEqualsAttentionComputedByHand) {
  const layers::ModelConfig c = small_config(layers::Architecture::gpt);
  layers::Init init{Rng(5), DType::f64};
  const auto model = layers::build_model(c, init);
  const data::CharTokenizer tokenizer = data::CharTokenizer::train("abcdefghijklmnopqrstuvwxyz ,.");
  const std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5};
  const AttentionMaps maps = capture_attention(*model, tokenizer, ids);
  ASSERT_EQ(maps.layers.size(), 2u);
  ASSERT_TRUE(maps.causal);
  const int64_t T = static_cast<int64_t>(ids.size()), C = c.d_model, H = c.n_heads, D = C / H;
  auto p = by_name(*model);
  auto at = [](const Tensor& t, int64_t i) { return t.data<double>()[i]; };
  // x = LN(token + position) per row; then q, k of every head.
  std::vector<double> q(T * C), k(T * C);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> h(C), x(C);
    double mean = 0, var = 0;
    for (int64_t ch = 0; ch < C; ++ch) {
      h[ch] = at(p["token_embedding.weight"], ids[t] * C + ch) + at(p["position_embedding.weight"], t * C + ch);
      mean += h[ch] / C;
    }
    for (int64_t ch = 0; ch < C; ++ch) var += (h[ch] - mean) * (h[ch] - mean) / C;
    for (int64_t ch = 0; ch < C; ++ch)
      x[ch] = (h[ch] - mean) / std::sqrt(var + c.ln_eps) * at(p["blocks.0.ln_1.weight"], ch) + at(p["blocks.0.ln_1.bias"], ch);
    for (int64_t r = 0; r < 2 * C; ++r) {  // rows [queries | keys] of W_qkv
      double v = at(p["blocks.0.attn.qkv.bias"], r);
      for (int64_t ch = 0; ch < C; ++ch) v += at(p["blocks.0.attn.qkv.weight"], r * C + ch) * x[ch];
      (r < C ? q[t * C + r] : k[t * C + r - C]) = v;
    }
  }
  const Tensor& layer0 = maps.layers[0];  // (H, T, T) float32
  double worst = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> score(i + 1);
      double top = -1e300, total = 0;
      for (int64_t j = 0; j <= i; ++j) {
        for (int64_t d = 0; d < D; ++d) score[j] += q[i * C + h * D + d] * k[j * C + h * D + d];
        score[j] /= std::sqrt(static_cast<double>(D));
        top = std::max(top, score[j]);
      }
      for (int64_t j = 0; j <= i; ++j) total += std::exp(score[j] - top);
      for (int64_t j = 0; j < T; ++j) {
        const double expected = j <= i ? std::exp(score[j] - top) / total : 0.0;
        worst = std::max(worst, std::abs(layer0.data<float>()[(h * T + i) * T + j] - expected));
      }
    }
  EXPECT_LT(worst, 1e-6) << "largest difference from the hand-computed map";  // float32 storage of float64 maps
  // Peaked enough that a wrong map would be seen: some probability is far from uniform.
  EXPECT_GT(*std::max_element(layer0.data<float>(), layer0.data<float>() + layer0.numel()), 0.6f);
}

// Every row of every head is a distribution, exactly zero where the model masks: after the query
// when causal, outside a sliding window of w (p - w < j < p + w) when w > 0. Returns the weight
// above the diagonal (a BERT's look ahead).
double expect_distributions(const AttentionMaps& maps, int64_t heads, bool causal, int64_t window) {
  const int64_t T = static_cast<int64_t>(maps.ids.size());
  double above = 0;
  for (const Tensor& layer : maps.layers) {
    EXPECT_EQ(layer.dim(0), heads);  // a map per query head, grouped-query or not
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < T; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          const float p = layer.data<float>()[(h * T + i) * T + j];
          sum += p;
          if (j > i) above += p;
          if ((causal && j > i) || (window > 0 && (i - j >= window || j - i >= window))) {
            EXPECT_EQ(p, 0.0f) << "query " << i << ", key " << j;
          }
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
  }
  return above;
}

TEST(CaptureAttention, EveryRowSumsToOneAndCausalMapsHaveZerosAboveTheDiagonal) {
  const data::CharTokenizer tokenizer = data::CharTokenizer::train("abcdefghij", {"[PAD]", "[MASK]", "[CLS]", "[SEP]"});
  for (const auto arch : {layers::Architecture::gpt, layers::Architecture::bert}) {
    layers::ModelConfig c = small_config(arch);
    c.vocab_size = tokenizer.vocab_size();
    layers::Init init{Rng(7), DType::f32};
    const auto model = layers::build_model(c, init);
    bool truncated = false;
    const std::vector<int32_t> ids = inspection_ids(*model, tokenizer, "abcdefghijabcdefghij", c.max_seq_len, &truncated);
    EXPECT_TRUE(truncated);
    ASSERT_EQ(static_cast<int64_t>(ids.size()), c.max_seq_len);
    const AttentionMaps maps = capture_attention(*model, tokenizer, ids);
    ASSERT_EQ(maps.tokens.size(), ids.size());
    const double above = expect_distributions(maps, c.n_heads, c.causal, 0);
    if (arch != layers::Architecture::gpt) {
      EXPECT_GT(above, 1.0);  // a BERT looks both ways
      EXPECT_EQ(maps.tokens.front(), "[CLS]");
      EXPECT_EQ(maps.tokens.back(), "[SEP]");
    }
  }
}

// A Mamba layer forms no attention map: a hybrid's maps are its softmax layers', labelled with their
// own layer numbers, and their statistics point at them.
TEST(CaptureAttention, AMambaHybridHasMapsForItsAttentionLayersOnly) {
  const data::CharTokenizer tokenizer = data::CharTokenizer::train("abcdefghij", {});
  layers::ModelConfig c = small_config(layers::Architecture::gpt);
  c.vocab_size = tokenizer.vocab_size();
  c.n_layers = 4;
  c.mixers = {layers::MixerKind::attention, layers::MixerKind::mamba};
  layers::Init init{Rng(7), DType::f32};
  const auto model = layers::build_model(c, init);
  bool truncated = false;
  const AttentionMaps maps =
      capture_attention(*model, tokenizer, inspection_ids(*model, tokenizer, "abcdefg", c.max_seq_len, &truncated));
  ASSERT_EQ(maps.layers.size(), 2u);
  EXPECT_EQ(maps.layer_numbers, (std::vector<int64_t>{0, 2}));
  expect_distributions(maps, c.n_heads, true, 0);
  const std::vector<HeadStats> stats = head_stats(maps);
  ASSERT_EQ(static_cast<int64_t>(stats.size()), 2 * c.n_heads);
  EXPECT_EQ(stats.back().layer, 2);
  EXPECT_EQ(stats.back().map, 1);
}

// Every position scheme and attention variant gives maps that respect their masks.
TEST(CaptureAttention, EveryPositionSchemeAndVariantGivesMapsThatRespectTheirMasks) {
  const data::CharTokenizer tokenizer = data::CharTokenizer::train("abcdefghij", {"[PAD]", "[MASK]", "[CLS]", "[SEP]"});
  struct Variant {
    const char* name;
    layers::PositionEncoding position;
    int64_t window, kv_heads;
  };
  const Variant variants[] = {{"rope", layers::PositionEncoding::rope, 0, 0},
                              {"alibi window 3", layers::PositionEncoding::alibi, 3, 0},
                              {"t5", layers::PositionEncoding::t5, 0, 0},
                              {"sinusoidal, one kv head", layers::PositionEncoding::sinusoidal, 0, 1},
                              {"none, window 4", layers::PositionEncoding::none, 4, 0}};
  for (const auto arch : {layers::Architecture::gpt, layers::Architecture::bert})
    for (const Variant& v : variants) {
      SCOPED_TRACE(std::string(v.name) + (arch == layers::Architecture::gpt ? ", GPT" : ", BERT"));
      layers::ModelConfig c = small_config(arch);
      c.vocab_size = tokenizer.vocab_size();
      c.position = v.position;
      c.attention.window = v.window;
      c.n_kv_heads = v.kv_heads;
      if (v.position == layers::PositionEncoding::t5) c.relative_buckets = 8, c.relative_max_distance = 16;
      layers::Init init{Rng(9), DType::f32};
      const auto model = layers::build_model(c, init);
      bool truncated = false;
      const AttentionMaps maps =
          capture_attention(*model, tokenizer, inspection_ids(*model, tokenizer, "abcdefghij", 16, &truncated));
      ASSERT_EQ(maps.layers.size(), 2u);
      expect_distributions(maps, c.n_heads, c.causal, v.window);
    }
}

}  // namespace
}  // namespace tf::inspect
