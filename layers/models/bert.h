// BERT: a bidirectional encoder trained as a masked language model (Devlin et al. 2019).
//
//   x = embedding_norm(token_embedding(ids) + position embedding (+ segment_embedding(segments)))
//   x = dropout(x); x = block_i(x, key_padding) for i < n_layers  (post-LN, not causal)
//   MLM head, only at positions with a target:
//     h = mlm_head.norm(gelu(mlm_head.dense(x)));  logits = h W_tok^T + mlm_head.bias
#pragma once
#include <vector>

#include "layers/block.h"
#include "layers/embedding.h"
#include "layers/models/model.h"

namespace tf::layers {

class Bert : public LanguageModel {
 public:
  Bert(const ModelConfig& config, Init& init);
  const ModelConfig& config() const override { return config_; }
  Tensor logits(const Tensor& ids, const Tensor& key_padding, const Context& ctx) const override;
  Tensor loss(const Tensor& ids, const Tensor& targets, const Tensor& key_padding, const Context& ctx) const override;
  ParamList parameters() const override;

  // Encoder output (B, T, C). segments: (B, T) i32 or undefined (all segment 0).
  Tensor encode(const Tensor& ids, const Tensor& key_padding, const Context& ctx, const Tensor& segments = Tensor()) const;
  // MLM head on hidden rows (..., C) -> (..., V).
  Tensor mlm_logits(const Tensor& hidden) const;

  Embedding token_embedding;     // "token_embedding.weight" (V, C), also the MLM decoder
  AbsolutePosition position;     // "position_embedding.weight" (max_seq_len, C) when learned
  Embedding segment_embedding;   // "segment_embedding.weight" (n_segments, C) when n_segments > 0
  LayerNorm embedding_norm;      // "embedding_norm."
  std::vector<TransformerBlock> blocks;
  Linear mlm_dense;              // "mlm_head.dense." (C, C)
  LayerNorm mlm_norm;            // "mlm_head.norm."
  Tensor mlm_bias;               // "mlm_head.bias" (V); undefined with model.bias: false

 private:
  ModelConfig config_;
};

}  // namespace tf::layers
