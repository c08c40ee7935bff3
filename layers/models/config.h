// The shape of a GPT or BERT model: every size and switch, with the defaults a recipe starts from.
// docs/models.md gives the exact math these fields select.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "framework/error.h"
#include "framework/ops/activation.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/pointwise.h"
#include "framework/ops/rope.h"
#include "layers/block.h"
#include "layers/positional.h"

namespace tf::layers {

enum class Architecture { gpt, bert };

struct ModelConfig {
  Architecture arch = Architecture::gpt;
  int64_t vocab_size = 256;    // set from the tokenizer by the trainer
  int64_t max_seq_len = 256;   // positions the model can see
  int64_t d_model = 128;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 0;      // 0: same as n_heads; fewer is grouped-query attention
  // Query heads of each layer when they differ (a pruned model, `tapeformer prune`); empty: n_heads in
  // every layer. Each keeps the group size n_heads / kv_heads(), so layer l has heads(l) / group_size()
  // key/value heads.
  std::vector<int64_t> heads_per_layer;
  int64_t d_head = 0;          // recipe key model.head_dim; 0: d_model / n_heads
  int64_t d_ff = 0;            // 0: 4 * d_model
  // The sequence mixer of each layer (layers/mixer.h), a pattern repeated over the layers: [linear]
  // makes every layer linear, [attention, linear] alternates. Empty: softmax attention everywhere.
  std::vector<MixerKind> mixers;
  // mixer mamba (layers/mamba.h): E = mamba_expand d_model channels, a state of mamba_state per
  // channel, a causal convolution of mamba_conv taps (the paper's 2, 16, 4).
  int64_t mamba_expand = 2;
  int64_t mamba_state = 16;
  int64_t mamba_conv = 4;
  PositionEncoding position = PositionEncoding::learned;
  double rope_theta = 10000.0;
  ops::RopeScaling rope_scaling;  // stretching RoPE's table to a longer context (Note [rope scaling])
  int64_t relative_buckets = 32;        // position t5: buckets of T5's relative bias (Raffel et al. 2020)
  int64_t relative_max_distance = 128;  // position t5: distances beyond share the last bucket
  // Attention beyond its shapes, one value from recipe to kernel (Note [attention variants] in
  // framework/kernels/reference/attention.h). alibi follows `position` (block_options sets it).
  kernels::AttentionVariant attention;
  // Options around the multi-head layers' op: on queries and keys, on the heads' outputs (Note
  // [attention layer options] in layers/attention_options.h).
  AttentionLayerOptions attention_layer;
  bool causal = true;          // GPT: true; BERT: false (a recipe derives both from arch)
  bool pre_norm = true;        // GPT-2 style; BERT uses post-norm
  double dropout = 0.0;        // embeddings and sublayer outputs
  double attn_dropout = 0.0;   // attention probabilities
  double ln_eps = 1e-5;
  kernels::NormKind norm = kernels::NormKind::layer;  // every norm of the model: layer norm or RMSNorm
  ops::GeluApprox gelu = ops::GeluApprox::tanh;
  kernels::FeedForwardKind feed_forward = kernels::FeedForwardKind::gelu;  // plain GELU MLP or gated (SwiGLU)
  bool tie_embeddings = true;  // GPT: LM head shares the token embedding
  bool bias = true;            // biases in linear layers
  int64_t n_segments = 0;      // BERT token-type (segment) embeddings; 0 = none
  double init_std = 0.02;
  std::string projection_init = "scaled";  // the residual projections' init: scaled | plain | zero (block_options)
  double final_softcap = 0;    // Gemma 2's cap on the output logits: c tanh(logits / c); 0 = off

  // The defaults that depend on other fields, resolved here and only here; layers are given these.
  int64_t head_dim() const { return d_head > 0 ? d_head : d_model / n_heads; }
  int64_t kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }  // n_kv_heads, 0 = n_heads
  int64_t group_size() const { return n_heads / kv_heads(); }  // query heads per key/value head
  int64_t heads(int64_t layer) const;     // query heads of a layer
  int64_t kv_heads(int64_t layer) const;  // its key/value heads: heads(layer) / group_size()
  int64_t total_heads() const;            // query heads of all layers
  MixerKind mixer(int64_t layer) const;   // the layer's entry of the repeated `mixers` pattern
  int64_t ff_width() const { return d_ff > 0 ? d_ff : 4 * d_model; }          // d_ff, 0 = 4 d_model
  // The block options this config implies; causal for GPT. GPT-2's scaled init of the residual
  // projections: std = init_std / sqrt(2 n_layers) (Radford et al. 2019, section 2.3). projection_init
  // "plain" draws them like every other weight (init_std); "zero" starts them at zero, so that every
  // block starts as the identity (modded-nanogpt's init; Fixup, Zhang et al. 2019, zeroes the last
  // layer of each branch too).
  TransformerBlock::Options block_options(int64_t layer) const;
  // Throws the first of problems(): a ConfigError naming the fields of an inconsistent combination.
  void validate() const;
  // Every inconsistent combination, each a ConfigError naming its fields (a recipe reports them all).
  std::vector<ConfigError> problems() const;

  // Note [output logits]
  // ~~~~~~~~~~~~~~~~~~~~
  // What changes the logits after the output head, in both models and on every path (training,
  // evaluation, sampling, decoding: Gpt::head and Bert::mlm_logits call this); a new option is a
  // field and its lines here and in unexported_options.
  Tensor output_logits(const Tensor& logits) const {
    if (final_softcap > 0)  // Gemma 2 (Gemma Team 2024, section 2): every logit stays inside (-c, c)
      return ops::scale(ops::tanh(ops::scale(logits, 1 / final_softcap)), final_softcap);
    return logits;
  }
  // The recipe keys of the options set here that no export (GGUF, Hugging Face) expresses: the
  // attention variant's (Note [variant options]), the attention layer's (Note [attention layer
  // options]) and the output logits'.
  std::vector<std::string> unexported_options() const {
    std::vector<std::string> keys = kernels::variant_keys_used(attention);
    for (const std::string& key : attention_layer.keys_used()) keys.push_back(key);
    if (final_softcap > 0) keys.push_back("model.final_softcap");
    return keys;
  }

 private:
  void mixer_problems(std::vector<ConfigError>& found) const;  // the options each layer's mixer supports
  void differential_problems(std::vector<ConfigError>& found) const;  // paired heads, no T5 table or attention dropout
};

}  // namespace tf::layers
