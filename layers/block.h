// Transformer block: a sequence mixer (attention or a layers/mixer.h kind) and a feed-forward
// sublayer, each with a residual connection, with
// layer norm either before each sublayer (pre-LN, GPT-2) or after each residual sum (post-LN, the
// original Transformer and BERT).
//
//   pre-LN:  x = x + dropout(attn(ln_1(x)));   x = x + dropout(mlp(ln_2(x)))
//   post-LN: x = ln_1(x + dropout(attn(x)));   x = ln_2(x + dropout(mlp(x)))
#pragma once

#include "layers/attention.h"
#include "layers/feed_forward.h"
#include "layers/layer_norm.h"
#include "layers/mamba.h"

namespace tf::layers {

struct TransformerBlock {
  struct Options {
    MultiHeadAttention::Options attn;  // attn.mixer mamba: the block's mixer is `mamba` instead
    Mamba::Options mamba;
    FeedForward::Options mlp;
    bool pre_norm = true;
    double ln_eps = 1e-5;
    kernels::NormKind norm = kernels::NormKind::layer;  // layer norm or RMSNorm
    double dropout = 0;  // on each sublayer's output, before the residual sum
  };
  Options options;
  LayerNorm ln_1, ln_2;
  MultiHeadAttention attn;  // the mixer, unless options.attn.mixer is mamba
  Mamba mamba;              // the mixer when options.attn.mixer is mamba (parameters "mamba.*")
  FeedForward mlp;

  TransformerBlock() = default;
  TransformerBlock(const Options& options, Init& init);
  // x (B, T, C) -> (B, T, C). With `cache` (decoding: the layer's view of layers::KvCache), x holds
  // only the new positions, and attention reads and extends the cache; the norms and the MLP act on
  // each position alone, so they need no state. With ctx.recompute, while recording, the block
  // keeps only x and runs again during backward (Note [recomputed blocks]).
  Tensor forward(const Tensor& x, const Tensor& key_padding, const Context& ctx,
                 const ops::KvBuffers* cache = nullptr) const;
  void parameters(ParamList& out, const std::string& prefix) const;

 private:
  // The two residual sublayers, recorded op by op.
  Tensor forward_sublayers(const Tensor& x, const Tensor& key_padding, const Context& ctx,
                           const ops::KvBuffers* cache) const;
  friend struct RecomputedBlockNode;
};

}  // namespace tf::layers
