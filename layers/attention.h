// Multi-head self-attention (Vaswani et al. 2017, section 3.2.2) with one fused QKV projection.
//
// B = batch, T = time, C = d_model, H = query heads, G = key/value heads (G = H unless grouped-
// query attention), D = head_dim = C / H unless set (then H D may differ from C).
//
//   qkv = x W_qkv^T + b         (B, T, (H + 2G) D)   one matmul, never a loop over heads
//   q, k, v = split(qkv)        (B, T, H D), (B, T, G D), (B, T, G D)
//   q -> (B, H, T, D); k, v -> (B, G, T, D)
//   (options on queries and keys, e.g. model.qk_norm: Note [attention layer options])
//   (RoPE: rotate q and k by their positions)
//   o = softmax(q k^T / sqrt(D) + mask) v      (B, H, T, D)   one fused op, framework/ops/attention.h
//     (mixer linear: o = linear_attention(q, k, v), framework/ops/linear_attention.h; G = H)
//     (mixer differential: heads 2i and 2i + 1 are the two maps of differential head i, whose value is
//      their values side by side, 2D wide; layers/differential_attention.cpp, Ye et al. 2024)
//   (head gates, Context::head_gates: o_h *= xi_h   (Michel et al. 2019, section 4.1))
//   (options on the heads' outputs, e.g. model.attention_gate: Note [attention layer options])
//   y = concat_heads(o) W_O^T + b_O             (B, T, C)
//
// Dividing by sqrt(D) keeps the scores' variance near 1 when q and k have unit-variance entries,
// so the softmax does not saturate as D grows (Vaswani et al. 2017, footnote 4).
#pragma once
#include "framework/ops/attention.h"
#include "framework/ops/attention_cache.h"
#include "framework/ops/rope.h"
#include "layers/attention_options.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/mixer.h"

namespace tf::layers {

struct MultiHeadAttention {
  struct Options {
    int64_t d_model = 64;
    int64_t n_heads = 4;
    int64_t n_kv_heads = 0;   // 0 means n_heads; fewer is grouped-query attention
    int64_t head_dim = 0;     // D; 0 means d_model / n_heads (a pruned layer keeps its D with fewer heads)
    bool causal = false;      // GPT: query i sees keys j <= i
    MixerKind mixer = MixerKind::attention;  // linear: phi(q) phi(k)^T v in place of the softmax (mixer.h)
    bool bias = true;
    bool rope = false;        // rotate queries and keys (Su et al. 2021)
    ops::RopeOptions rope_options;
    kernels::AttentionVariant variant = {};  // sliding window, ALiBi, T5 bias (Note [attention variants])
    AttentionLayerOptions layer = {};  // around the op: on queries and keys, on the heads' outputs
    double attn_dropout = 0;  // on the attention probabilities
    double lambda_init = 0.8; // differential: lambda_init, 0.8 - 0.6 exp(-0.3 (l - 1)) for layer l (the model sets it)
    double ln_eps = 1e-5;     // the model's, for a norm an option of `layer` adds
    double init_std = 0.02;
    double proj_init_std = 0.02;  // GPT-2's scaled init of the residual projection
    int64_t vocab_size = 0;       // the model's, for a table an option of `layer` adds (value embeddings)
  };
  Options options;
  Linear qkv;   // (H D + 2 G D, C): rows [queries | keys | values]
  Linear proj;  // W_O: (C, H D)
  Tensor relative_bias;  // (H, buckets): T5's learned bias per head and distance bucket, when the
                         // variant has buckets (Note [attention variants])
  // Differential attention only (Note [differential attention] in framework/ops/differential_attention.h):
  Tensor lambda_q1, lambda_k1, lambda_q2, lambda_k2;  // (D) each, lambda's re-parameterisation
  LayerNorm subln;  // RMSNorm over a differential head's 2D outputs, shared by the heads
  AttentionHooks hooks;  // the parameters and code of options.layer (Note [attention layer options])

  MultiHeadAttention() = default;
  MultiHeadAttention(const Options& options, Init& init);
  int64_t head_dim() const { return options.head_dim > 0 ? options.head_dim : options.d_model / options.n_heads; }
  int64_t kv_heads() const { return options.n_kv_heads > 0 ? options.n_kv_heads : options.n_heads; }

  // x: (B, T, C); key_padding: (B, T) with 1 for real tokens and 0 for padding, or undefined.
  // Returns (B, T, C).
  // Decoding, with `cache` (a layer's view of layers::KvCache): x holds positions cache->length ..
  // cache->length + T - 1; their keys and values are appended to the cache and their queries attend
  // over every cached position (ops::attention_append). The result is the rows a forward over the
  // whole context would give for these positions. Causal layers, inference only.
  Tensor forward(const Tensor& x, const Tensor& key_padding, const Context& ctx,
                 const ops::KvBuffers* cache = nullptr) const;
  void parameters(ParamList& out, const std::string& prefix) const;


 private:
  // x (B, T, C) -> queries (B, H, T, D), keys and values (B, G, T, D), queries and keys rotated for
  // positions position_offset .. position_offset + T - 1 when RoPE is on.
  struct Heads {
    Tensor queries, keys, values;
  };
  Heads project_heads(const Tensor& x, const Context& ctx, int64_t position_offset,
                      const SequenceShard* shard = nullptr) const;
  // The differential mixer's (B, H/2, T, 2D) heads, normalised and scaled, before W_O
  // (layers/differential_attention.cpp).
  void init_differential(Init& init);
  Tensor differential(const Tensor& x, const Tensor& key_padding, const Context& ctx,
                      const ops::KvBuffers* cache) const;
};

}  // namespace tf::layers
