// MultiHeadAttention against the textbook definition (h single-head attentions over slices of the
// fused qkv weight, concatenated, then W_O), and the invariants it promises: permutation
// equivariance without positions, RoPE scores that depend only on m - n, attention weights on
// request that change nothing, and heads read in place that give what heads cut out give.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "framework/autograd/tape.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"
#include "layers/attention.h"
#include "model_fixtures.h"
#include "support/compare.h"

namespace tf::layers {
namespace {

using testing::permute_positions;
using testing::random_normal;
using tf::testing::all_close;
using tf::testing::max_abs_diff;

// B = batch, T = time, C = d_model, H = query heads, G = kv heads, D = head size.
constexpr int64_t kVocab = 7;  // rows of a value-embedding table

MultiHeadAttention make_layer(int64_t heads, int64_t kv_heads, bool causal, bool rope, uint64_t seed = 1,
                              const AttentionLayerOptions& layer_options = {}) {
  Init init{Rng(seed), DType::f64};
  MultiHeadAttention::Options options = testing::attention_options(heads, kv_heads, causal, rope);
  options.layer = layer_options;
  options.vocab_size = kVocab;
  MultiHeadAttention layer(options, init);
  ParamList params;
  layer.parameters(params, "");
  testing::perturb(params, seed + 1);
  return layer;
}

// Row r of the (out, in) weight applied to x[b, t, :], plus bias[r]: one output feature of x W^T + b.
double linear_feature(const std::vector<double>& W, const std::vector<double>& bias, const std::vector<double>& x,
                      int64_t C, int64_t row, int64_t x_offset) {
  double s = bias[row];
  for (int64_t c = 0; c < C; ++c) s += W[row * C + c] * x[x_offset + c];
  return s;
}

// Textbook multi-head attention, every step a naive loop over one head at a time (Vaswani et al.
// 2017, section 3.2.2), written from docs/models.md: head h's queries use rows [h D, (h+1) D) of
// W_qkv, its keys and values those of kv head g = h / (H / G) after the H D query rows. RoPE
// rotates pairs (2i, 2i+1) by pos * 10000^(-2i/D). model.qk_norm first scales each head's q to
// g_q q / sqrt(mean(q^2) + eps), and k likewise with g_k. model.attention_gate multiplies feature
// d of head h at position t by sigmoid(row h D + d of x[t] W_g^T + b_g) before W_O.
// model.value_embeddings adds column g D + d of the table's row ids[b, t] to v[t][d].
Tensor textbook_mha(const MultiHeadAttention& layer, const Tensor& x, const Tensor& key_padding,
                    const std::vector<int32_t>& ids = {}) {
  const auto& o = layer.options;
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2), H = o.n_heads, G = layer.kv_heads(), D = C / H;
  const std::vector<double> X = x.to_vector(), Wqkv = layer.qkv.weight.to_vector(), bqkv = layer.qkv.bias.to_vector();
  const std::vector<double> Wo = layer.proj.weight.to_vector(), bo = layer.proj.bias.to_vector();
  const std::vector<double> Ev = o.layer.value_embeddings ? layer.hooks.value_embedding.weight.to_vector()
                                                          : std::vector<double>{};  // (V, G D)
  std::vector<double> pad(B * T, 1.0);
  if (key_padding.defined()) pad = key_padding.to_vector();
  const auto rms_norm = [&](std::vector<double>& v, const Tensor& scale) {  // v: one head's (D) vector
    const double mean_square = std::inner_product(v.begin(), v.end(), v.begin(), 0.0) / double(D);
    for (int64_t d = 0; d < D; ++d) v[d] *= scale.at(d) / std::sqrt(mean_square + o.ln_eps);
  };
  auto rotate = [&](std::vector<double>& v, int64_t pos) {  // v: one head's (D) vector
    for (int64_t i = 0; i < D / 2; ++i) {
      const double a = pos * std::pow(o.rope_options.theta, -2.0 * i / D);
      const double x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * std::cos(a) - x1 * std::sin(a);
      v[2 * i + 1] = x0 * std::sin(a) + x1 * std::cos(a);
    }
  };
  std::vector<double> concat(B * T * H * D, 0.0);  // (B, T, H D): the heads side by side
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      // This head's q (T, D), k (T, D), v (T, D).
      std::vector<std::vector<double>> q(T, std::vector<double>(D)), k = q, v = q;
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t d = 0; d < D; ++d) {
          q[t][d] = linear_feature(Wqkv, bqkv, X, C, h * D + d, (b * T + t) * C);
          k[t][d] = linear_feature(Wqkv, bqkv, X, C, H * D + g * D + d, (b * T + t) * C);
          v[t][d] = linear_feature(Wqkv, bqkv, X, C, H * D + G * D + g * D + d, (b * T + t) * C);
          if (o.layer.value_embeddings) v[t][d] += Ev[ids[b * T + t] * G * D + g * D + d];
        }
        if (o.layer.qk_norm) rms_norm(q[t], layer.hooks.q_norm.weight), rms_norm(k[t], layer.hooks.k_norm.weight);
        if (o.rope) rotate(q[t], t), rotate(k[t], t);
      }
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> scores(T, -std::numeric_limits<double>::infinity());
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < T; ++j) {
          if ((o.causal && j > i) || pad[b * T + j] == 0) continue;
          scores[j] = std::inner_product(q[i].begin(), q[i].end(), k[j].begin(), 0.0) / std::sqrt(double(D));
          max_score = std::max(max_score, scores[j]);
        }
        double z = 0;
        for (int64_t j = 0; j < T; ++j) z += std::exp(scores[j] - max_score);
        for (int64_t j = 0; j < T; ++j)
          for (int64_t d = 0; d < D; ++d)
            concat[(b * T + i) * H * D + h * D + d] += std::exp(scores[j] - max_score) / z * v[j][d];
      }
    }
  }
  if (o.layer.attention_gate) {
    const std::vector<double> Wg = layer.hooks.gate.weight.to_vector(), bg = layer.hooks.gate.bias.to_vector();
    for (int64_t bt = 0; bt < B * T; ++bt)
      for (int64_t r = 0; r < H * D; ++r)
        concat[bt * H * D + r] *= 1 / (1 + std::exp(-linear_feature(Wg, bg, X, C, r, bt * C)));
  }
  std::vector<double> y(B * T * C);
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t c = 0; c < C; ++c) y[bt * C + c] = linear_feature(Wo, bo, concat, H * D, c, bt * H * D);
  return Tensor::from_vector(y, {B, T, C}, DType::f64);
}

struct TextbookCase {
  const char* name;
  int64_t heads, kv_heads;
  bool causal, rope, padding;
  AttentionLayerOptions layer = {};
};

TEST(MultiHeadAttentionLayer, EqualsConcatenatedSingleHeadAttentions) {
  const TextbookCase cases[] = {
      {"2 heads", 2, 0, false, false, false},         {"4 heads, causal", 4, 0, true, false, false},
      {"2 heads, key padding", 2, 0, false, false, true}, {"GQA H=4 G=2", 4, 2, false, false, false},
      {"GQA H=4 G=1, causal", 4, 1, true, false, false},  {"rope, causal", 2, 0, true, true, false},
      {"rope, GQA H=4 G=2, padding", 4, 2, false, true, true},
      {"qk_norm, rope, GQA H=4 G=2, causal", 4, 2, true, true, false, {.qk_norm = true}},
      {"qk_norm, padding", 2, 0, false, false, true, {.qk_norm = true}},
      {"attention_gate, GQA H=4 G=2, causal", 4, 2, true, false, false, {.attention_gate = true}},
      {"attention_gate, qk_norm, rope, padding", 2, 0, false, true, true, {.qk_norm = true, .attention_gate = true}},
      {"value_embeddings, GQA H=4 G=2, causal", 4, 2, true, false, false, {.value_embeddings = true}},
      {"value_embeddings, qk_norm, rope, padding", 2, 0, false, true, true, {.qk_norm = true, .value_embeddings = true}},
  };
  const std::vector<int32_t> ids = {3, 0, 6, 3, 1, 2, 2, 5, 0, 4};  // (2, 5): repeats, both ends of the table
  Context ctx;
  ctx.token_ids = Tensor::from_ids(ids, {2, 5});
  for (const auto& c : cases) {
    const MultiHeadAttention layer = make_layer(c.heads, c.kv_heads, c.causal, c.rope, 1, c.layer);
    const Tensor x = random_normal({2, 5, 8}, 7);
    const Tensor pad = c.padding ? testing::padding_2x5() : Tensor();
    // f64 throughout: the only differences are summation orders, ~1e-15.
    EXPECT_TRUE(all_close(layer.forward(x, pad, ctx), textbook_mha(layer, x, pad, ids), 1e-12, 1e-12)) << c.name;
  }
}

TEST(MultiHeadAttentionLayer, PermutationEquivariantWithoutPositions) {
  const std::vector<int64_t> perm = {3, 0, 4, 1, 2};
  const Tensor x = random_normal({2, 5, 8}, 7);
  for (int64_t kv_heads : {0, 1}) {
    const MultiHeadAttention layer = make_layer(2, kv_heads, false, false);
    const Tensor y = layer.forward(x, Tensor(), Context{});
    EXPECT_TRUE(all_close(layer.forward(permute_positions(x, perm), Tensor(), Context{}), permute_positions(y, perm), 0, 1e-12));
  }
  // Controls: a causal mask or RoPE tie outputs to positions, so the same permutation shows.
  for (auto [causal, rope] : {std::pair{true, false}, std::pair{false, true}}) {
    const MultiHeadAttention layer = make_layer(2, 0, causal, rope);
    const Tensor y = layer.forward(x, Tensor(), Context{});
    EXPECT_GT(max_abs_diff(layer.forward(permute_positions(x, perm), Tensor(), Context{}), permute_positions(y, perm)), 1e-3)
        << "causal " << causal << " rope " << rope;
  }
}

// S(m, n) - S(m, m) for a query token a at position m and a key token b at position n, read off
// the layer's attention weights: log P[i, j] - log P[i, i] = S[i, j] - S[i, i] whatever the other
// keys are. S(m, m) (a with itself at one position) does not depend on m under RoPE, since both
// sides turn by the same angle. The sequence is T = 6 rows of filler at positions offset .. offset+5,
// with a at row i and b at row j.
double relative_score(const MultiHeadAttention& layer, const Tensor& a, const Tensor& b, int64_t m, int64_t n) {
  const int64_t offset = std::min(m, n) - 1, i = m - offset, j = n - offset, T = 6;
  if (!(offset >= 0 && i < T && j < T)) throw std::logic_error("relative_score: positions too far apart");
  Tensor x = random_normal({1, T, 8}, 99);  // filler
  std::copy(a.data<double>(), a.data<double>() + 8, x.data<double>() + i * 8);
  std::copy(b.data<double>(), b.data<double>() + 8, x.data<double>() + j * 8);
  std::vector<Tensor> weights;
  Context ctx;
  ctx.attention_weights = &weights;
  MultiHeadAttention shifted = layer;  // the same weights, the sequence at positions offset ..
  shifted.options.rope_options.position_offset += offset;
  shifted.forward(x, Tensor(), ctx);
  const Tensor& P = weights.at(0);  // (1, 1, T, T): one head
  return std::log(P.at(i * T + j)) - std::log(P.at(i * T + i));
}

TEST(MultiHeadAttentionLayer, RopeScoreDependsOnlyOnRelativePosition) {
  const MultiHeadAttention rope = make_layer(1, 0, false, true);
  const Tensor a = random_normal({8}, 3), b = random_normal({8}, 4);
  // Query after key (m - n = 2) and before it (m - n = -3), each at three absolute places.
  for (auto [m0, n0] : {std::pair<int64_t, int64_t>{3, 1}, {2, 5}}) {
    const double reference = relative_score(rope, a, b, m0, n0);
    for (int64_t shift : {4, 17, 250})
      EXPECT_NEAR(relative_score(rope, a, b, m0 + shift, n0 + shift), reference, 1e-12)
          << "m " << m0 + shift << " n " << n0 + shift;
  }
  // ... and it does depend on m - n (else the check above would hold trivially).
  EXPECT_GT(std::abs(relative_score(rope, a, b, 3, 1) - relative_score(rope, a, b, 3, 2)), 1e-3);
  EXPECT_GT(std::abs(relative_score(rope, a, b, 3, 1) - relative_score(rope, a, b, 2, 5)), 1e-3);
  // Without RoPE the same weights give one score at every distance.
  MultiHeadAttention plain = rope;
  plain.options.rope = false;
  EXPECT_NEAR(relative_score(plain, a, b, 3, 1), relative_score(plain, a, b, 6, 2), 1e-12);
}

TEST(MultiHeadAttentionLayer, AttentionWeightsOnRequestChangeNothing) {
  const Tensor padding = testing::padding_2x5();
  for (auto [causal, padded] : {std::pair{true, false}, std::pair{false, true}}) {
    const MultiHeadAttention layer = make_layer(4, 2, causal, true);
    const Tensor x = random_normal({2, 5, 8}, 7);
    const Tensor pad = padded ? padding : Tensor();
    const Tensor plain = layer.forward(x, pad, Context{});
    std::vector<Tensor> weights;
    Context ctx;
    ctx.attention_weights = &weights;
    const Tensor observed = layer.forward(x, pad, ctx);
    EXPECT_TRUE(all_close(observed, plain, 0, 0));  // bit for bit
    ASSERT_EQ(weights.size(), 1u);
    const Tensor& P = weights[0];
    ASSERT_EQ(P.shape(), (Shape{2, 4, 5, 5}));  // (B, H, T, T): one row per query head
    for (int64_t bh = 0; bh < 8; ++bh) {
      for (int64_t i = 0; i < 5; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < 5; ++j) {
          const double p = P.at((bh * 5 + i) * 5 + j);
          EXPECT_GE(p, 0.0);
          const bool masked = (causal && j > i) || (padded && padding.at((bh / 4) * 5 + j) == 0);
          if (masked) {
            EXPECT_EQ(p, 0.0) << "masked key " << j << " of query " << i;
          }
          sum += p;
        }
        EXPECT_NEAR(sum, 1.0, 1e-12);
      }
    }
  }
}

// In float32 at T >= 16 the layer reads the heads in place (ops::attention_qkv, ops::rope_heads)
// unless an option acts on the heads one by one (its row's on_heads) or the weights are asked for;
// asking for the weights therefore takes the path that cuts the heads out. Both must give the same
// output and gradients bit for bit, for every row of kAttentionLayerOptions and for none: an option
// whose row wrongly said it leaves the heads alone would be skipped in place and fail here.
TEST(MultiHeadAttentionLayer, HeadsReadInPlaceGiveWhatHeadsCutOutGive) {
  std::vector<AttentionLayerOptions> settings = {{}};
  for (const AttentionLayerOption& option : kAttentionLayerOptions) settings.push_back(option.example);
  const int64_t B = 2, T = 20;
  std::vector<int32_t> ids(B * T);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 5) % kVocab);
  for (const AttentionLayerOptions& layer_options : settings) {
    Init init{Rng(3), DType::f32};
    MultiHeadAttention::Options options = testing::attention_options(4, 2, true, true);
    options.layer = layer_options;
    options.vocab_size = kVocab;
    const MultiHeadAttention layer(options, init);
    ParamList params;
    layer.parameters(params, "");
    Rng rng(5);
    Tensor x = randn({B, T, 8}, rng).set_requires_grad();
    const Tensor w = randn({B, T, 8}, rng);
    auto run = [&](bool cut_out) {  // output, dx, then every parameter's gradient
      std::vector<Tensor> weights;
      Context ctx;
      ctx.token_ids = Tensor::from_ids(ids, {B, T});
      if (cut_out) ctx.attention_weights = &weights;
      const Tensor y = layer.forward(x, Tensor(), ctx);
      backward(ops::sum(ops::mul(y, w)));
      std::vector<std::vector<double>> r{y.to_vector(), x.grad().to_vector()};
      x.zero_grad();
      for (const auto& p : params) {
        r.push_back(p.tensor.grad().to_vector());
        Tensor(p.tensor).zero_grad();
      }
      return r;
    };
    const auto in_place = run(false), cut_out = run(true);
    const std::string keys = ::testing::PrintToString(layer_options.keys_used());
    ASSERT_EQ(in_place.size(), cut_out.size());
    for (size_t i = 0; i < in_place.size(); ++i)
      EXPECT_EQ(in_place[i], cut_out[i]) << keys << ": " << (i == 0 ? "output" : i == 1 ? "dx" : params[i - 2].name);
  }
}

}  // namespace
}  // namespace tf::layers
