// GPT: a decoder-only causal language model (Radford et al. 2018, 2019).
//
//   x = token_embedding(ids) (+ position embedding)   (B, T, C)
//   x = dropout(x); x = block_i(x) for i < n_layers  (causal attention)
//   logits = ln_f(x) W^T                               (B, T, V); W = token_embedding.weight when tied
#pragma once
#include <vector>

#include "layers/block.h"
#include "layers/embedding.h"
#include "layers/models/model.h"

namespace tf::layers {

class Gpt : public LanguageModel {
 public:
  Gpt(const ModelConfig& config, Init& init);
  const ModelConfig& config() const override { return config_; }
  Tensor logits(const Tensor& ids, const Tensor& key_padding, const Context& ctx) const override;
  Tensor loss(const Tensor& ids, const Tensor& targets, const Tensor& key_padding, const Context& ctx) const override;
  ParamList parameters() const override;

  // The final hidden states (B, T, C) after ln_f, for positions offset .. offset + T - 1.
  Tensor hidden(const Tensor& ids, const Context& ctx, int64_t position_offset = 0) const;

  Embedding token_embedding;          // "token_embedding.weight" (V, C)
  AbsolutePosition position;          // "position_embedding.weight" (max_seq_len, C) when learned
  std::vector<TransformerBlock> blocks;  // "blocks.{i}."
  LayerNorm ln_f;                     // "ln_f."
  Linear lm_head;                     // "lm_head.weight" (V, C), only when not tied

 private:
  ModelConfig config_;
};

}  // namespace tf::layers
