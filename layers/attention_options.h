// Note [attention layer options]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Options of a multi-head layer (softmax, linear or differential attention: the mixers whose row in
// kMixerTable has heads) that act around its op rather than on its scores: on each head's queries and
// keys before RoPE, on its values, and on the heads' outputs side by side before W_O. An option is
//   - a field of AttentionLayerOptions (ModelConfig::attention_layer, passed unchanged to every
//     multi-head layer) and its row in kAttentionLayerOptions, which says whether it acts on the
//     heads one by one (then the layer cuts the heads out of the fused projection instead of reading
//     them in place: ops::attention_qkv has no place for such an option);
//   - its parameters and its lines in AttentionHooks below (and, when a parameter has a block of rows
//     per query head, its name in rows_per_query_head).
// From there every path of the layer (training, sequence parallel, decoding with the KV cache) calls
// the hooks; the parameter list, checkpoints, gradcheck and head pruning follow the parameters; the
// exports refuse the option by its key (ModelConfig::unexported_options), decoding leaves the fused
// one-token step (which knows none of them), and the configuration check refuses it in a model whose
// layers have no heads. Options on the scores themselves are Note [variant options].
#pragma once
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "framework/ops/elementwise.h"
#include "framework/ops/heads.h"
#include "framework/ops/pointwise.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"

namespace tf::layers {

struct AttentionLayerOptions {
  // RMSNorm on each head's queries and keys before RoPE, q <- g_q q / rms(q) over the head's D
  // features, with a learned scale g_q (D) shared by the heads, and g_k likewise (Henry et al. 2020,
  // "Query-Key Normalization for Transformers"; per head and before RoPE as in OLMo 2 and Qwen 3).
  // Bounds each score by max|g_q| max|g_k| sqrt(D), however large the projections grow.
  bool qk_norm = false;
  // A sigmoid gate on the heads' outputs, elementwise and per head, computed from the layer's input x:
  // o <- o * sigmoid(x W_g^T + b_g), W_g (H D, C), before W_O (Qiu et al. 2025, "Gated Attention for
  // Large Language Models", position G1; Qwen3-Next). It lets a head output nothing for a token
  // without parking its attention on a sink token.
  bool attention_gate = false;
  // A table of the layer's own, E_v (V, G D), whose row for each token is added to that position's
  // values before attention: v <- v + E_v[id], so a value carries the token itself besides what W_V
  // makes of the residual stream (the "value embeddings" of the modded-nanoGPT speedrun, Jordan et
  // al. 2024, after Zhou et al. 2024's value residual learning; here one table per layer and no mixing
  // scalars). Rows start at N(0, init_std sqrt(C)), the size of W_V x for a unit-RMS input x.
  bool value_embeddings = false;
  // The recipe keys of the options set (the exports refuse them; an empty list means the plain layer).
  std::vector<std::string> keys_used() const;
};

// One row per option: its recipe key, whether a layer's options use it, and an example of it set
// (the model gradcheck, decoding and sequence-parallel tests run every row's example, and fail for a
// row they have no case for).
struct AttentionLayerOption {
  const char* key;
  bool (*used)(const AttentionLayerOptions&);
  bool on_heads;  // acts in AttentionHooks::queries_and_keys or ::values, on the heads one by one
  AttentionLayerOptions example;
};
inline constexpr auto kAttentionLayerOptions = std::to_array<AttentionLayerOption>({
    {"model.qk_norm", [](const AttentionLayerOptions& o) { return o.qk_norm; }, true, {.qk_norm = true}},
    {"model.attention_gate", [](const AttentionLayerOptions& o) { return o.attention_gate; }, false,
     {.attention_gate = true}},
    {"model.value_embeddings", [](const AttentionLayerOptions& o) { return o.value_embeddings; }, true,
     {.value_embeddings = true}},
});

inline std::vector<std::string> AttentionLayerOptions::keys_used() const {
  std::vector<std::string> keys;
  for (const AttentionLayerOption& option : kAttentionLayerOptions)
    if (option.used(*this)) keys.emplace_back(option.key);
  return keys;
}

// The parameters the options add to one layer, and the code that runs at the two places they act.
struct AttentionHooks {
  struct Shape {
    int64_t d_model = 64, heads = 4, head_dim = 16;  // C, H, D
    bool bias = true;          // the model's model.bias, for a projection an option adds
    double norm_eps = 1e-5;    // the model's model.ln_eps, for a norm an option adds
    double init_std = 0.02;
    int64_t kv_heads = 4;      // G
    int64_t vocab = 0;         // V, the model's, for value embeddings
  };
  AttentionLayerOptions options;
  LayerNorm q_norm, k_norm;  // qk_norm: RMSNorm over D, scales "q_norm.weight", "k_norm.weight" (D)
  Linear gate;               // attention_gate: W_g (H D, C) and b_g, "gate.weight", "gate.bias"
  Embedding value_embedding; // value_embeddings: E_v (V, G D), "value_embedding.weight"

  AttentionHooks() = default;
  AttentionHooks(const AttentionLayerOptions& o, const Shape& shape, Init& init) : options(o) {
    if (o.qk_norm)
      for (LayerNorm* norm : {&q_norm, &k_norm})
        *norm = LayerNorm({.dim = shape.head_dim, .eps = shape.norm_eps, .kind = kernels::NormKind::rms}, init);
    if (o.attention_gate) gate = Linear({shape.d_model, shape.heads * shape.head_dim, shape.bias, shape.init_std}, init);
    if (o.value_embeddings) {
      TF_CHECK(shape.vocab > 0, "model.value_embeddings: the layer was built without the vocabulary size");
      value_embedding = Embedding({shape.vocab, shape.kv_heads * shape.head_dim,
                                   shape.init_std * std::sqrt(static_cast<double>(shape.d_model))}, init);
    }
  }
  bool any() const {  // read on every decoding step: the rows, without building the list of keys
    for (const AttentionLayerOption& option : kAttentionLayerOptions)
      if (option.used(options)) return true;
    return false;
  }

  // Whether queries_and_keys or values change the heads (so the layer must cut them out of the
  // fused projection: ops::attention_qkv has no place for them).
  bool touches_heads() const {
    for (const AttentionLayerOption& option : kAttentionLayerOptions)
      if (option.on_heads && option.used(options)) return true;
    return false;
  }
  // q (B, H, T, D) and k (B, G, T, D), one head's D features per row, before RoPE rotates them.
  void queries_and_keys(Tensor& q, Tensor& k) const {
    if (options.qk_norm) {
      q = in_layer("q_norm", [&] { return q_norm.forward(q); });
      k = in_layer("k_norm", [&] { return k_norm.forward(k); });
    }
  }
  // v (B, G, T, D), the values of the G key/value heads (differential attention: (B, G/2, T, 2D));
  // ctx.token_ids (B, T) are the ids at those positions.
  void values(Tensor& v, const Context& ctx) const {
    if (!options.value_embeddings) return;
    TF_CHECK(ctx.token_ids.defined(), "model.value_embeddings: the attention layer was given no token ids");
    const Tensor table_rows = in_layer("value_embedding", [&] { return value_embedding.forward(ctx.token_ids); });
    v = ops::add(v, ops::split_heads(table_rows, {v.dim(1)}, v.dim(3))[0]);  // (B, T, G D) -> (B, G, T, D)
  }
  // heads: the heads' outputs side by side (B, T, H D), before W_O; x: the layer's input (B, T, C).
  Tensor heads_output(const Tensor& heads, const Tensor& x) const {
    if (!options.attention_gate) return heads;
    return ops::mul(heads, ops::sigmoid(in_layer("gate", [&] { return gate.forward(x); })));
  }

  void parameters(ParamList& out, const std::string& prefix) const {
    if (options.qk_norm) {
      q_norm.parameters(out, prefix + "q_norm.");
      k_norm.parameters(out, prefix + "k_norm.");
    }
    if (options.attention_gate) gate.parameters(out, prefix + "gate.");
    if (options.value_embeddings) value_embedding.parameters(out, prefix + "value_embedding.");
  }
  // Whether the parameter `name` (under the layer's "attn.") has a block of D rows per query head,
  // in the heads' order, which `tapeformer prune` keeps or cuts with its head.
  static bool rows_per_query_head(const std::string& name) { return name == "gate.weight" || name == "gate.bias"; }
  // Whether it has a block of D columns per key/value head, in their order (cut with the head's group).
  static bool columns_per_kv_head(const std::string& name) { return name == "value_embedding.weight"; }
};

}  // namespace tf::layers
