// Transformer block: attention and feed-forward sublayers, each with a residual connection, with
// layer norm either before each sublayer (pre-LN, GPT-2) or after each residual sum (post-LN, the
// original Transformer and BERT).
//
//   pre-LN:  x = x + dropout(attn(ln_1(x)));   x = x + dropout(mlp(ln_2(x)))
//   post-LN: x = ln_1(x + dropout(attn(x)));   x = ln_2(x + dropout(mlp(x)))
#pragma once

#include "layers/attention.h"
#include "layers/feed_forward.h"
#include "layers/layer_norm.h"

namespace tf::layers {

struct TransformerBlock {
  struct Options {
    MultiHeadAttention::Options attn;
    FeedForward::Options mlp;
    bool pre_norm = true;
    double ln_eps = 1e-5;
    double dropout = 0;  // on each sublayer's output, before the residual sum
  };
  Options options;
  LayerNorm ln_1, ln_2;
  MultiHeadAttention attn;
  FeedForward mlp;

  TransformerBlock() = default;
  TransformerBlock(const Options& options, Init& init);
  Tensor forward(const Tensor& x, const Tensor& key_padding, const Context& ctx, int64_t position_offset = 0) const;
  // Inference with a KV cache: x (B, T, C) at positions cache.length() .. + T - 1, attention through
  // MultiHeadAttention::forward_cached on the cache's `layer`; layer norms and the MLP see only
  // these T rows (they act on each position alone). Returns (B, T, C).
  Tensor forward_cached(const Tensor& x, KvCache& cache, int64_t layer, const Context& ctx) const;
  void parameters(ParamList& out, const std::string& prefix) const;

  // The residual wiring above around an attention sublayer `attend` (B, T, C) -> (B, T, C), shared
  // by forward and forward_cached. A template, not a std::function: the lambdas capture more than
  // std::function holds without a heap allocation, and a warm step should make none.
  template <class Attend>
  Tensor sublayers(const Tensor& x, const Attend& attend, const Context& ctx) const;
};

}  // namespace tf::layers
