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
    kernels::NormKind norm = kernels::NormKind::layer;  // layer norm or RMSNorm
    double dropout = 0;  // on each sublayer's output, before the residual sum
  };
  Options options;
  LayerNorm ln_1, ln_2;
  MultiHeadAttention attn;
  FeedForward mlp;

  TransformerBlock() = default;
  TransformerBlock(const Options& options, Init& init);
  // x (B, T, C) -> (B, T, C). With `cache` (decoding: the layer's view of layers::KvCache), x holds
  // only the new positions, and attention reads and extends the cache; the norms and the MLP act on
  // each position alone, so they need no state.
  Tensor forward(const Tensor& x, const Tensor& key_padding, const Context& ctx,
                 const ops::KvBuffers* cache = nullptr) const;
  void parameters(ParamList& out, const std::string& prefix) const;
};

}  // namespace tf::layers
