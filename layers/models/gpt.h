// GPT: a decoder-only causal language model (Radford et al. 2018, 2019).
//
//   x = token_embedding(ids) (+ position embedding)   (B, T, C)
//   x = dropout(x); x = block_i(x) for i < n_layers  (causal attention)
//   logits = ln_f(x) W^T                               (B, T, V); W = token_embedding.weight when tied
//
// Decoding with a KV cache (layers/kv_cache.h) runs only the new ids through the same layers:
//   KvCache cache = gpt.make_cache();
//   Tensor prompt_logits = gpt.logits_cached(prompt, cache, ctx);   // (1, T, V)
//   Tensor step_logits = gpt.logits_cached(next, cache, ctx);       // (1, 1, V)
#pragma once
#include <vector>

#include "layers/block.h"
#include "layers/embedding.h"
#include "layers/kv_cache.h"
#include "layers/models/model.h"

namespace tf::layers {

class Gpt : public LanguageModel {
 public:
  Gpt(const ModelConfig& config, Init& init);
  const ModelConfig& config() const override { return config_; }
  Tensor logits(const Tensor& ids, const Tensor& key_padding, const Context& ctx) const override;
  Tensor loss(const Tensor& ids, const Tensor& targets, const Tensor& key_padding, const Context& ctx) const override;
  ParamList parameters() const override;

  // The final hidden states (B, T, C) after ln_f. With a cache (decoding), ids are the positions
  // cache->length() .. + T - 1, every block reads and extends its layer of the cache, and the cache
  // advances by T: the same layers, the same code, as training.
  Tensor hidden(const Tensor& ids, const Context& ctx, KvCache* cache = nullptr) const;

  // An empty cache sized for this model: every layer, max_seq_len positions (2w with an attention
  // window w: only the last w - 1 are ever read again), the parameters' dtype.
  KvCache make_cache(int64_t batch = 1) const;
  // Inference with a KV cache: new_ids (B, T) are positions cache.length() .. cache.length() + T - 1
  // of sequences whose earlier positions the cache holds; runs only them through every block,
  // appends their keys and values, and returns their logits (B, T, V): the last T rows of
  // logits() over the whole sequence. Under NoGradGuard with an eval Context. tf::InputError when
  // the cache has no room for T more positions (clear() it and run a shorter context).
  Tensor logits_cached(const Tensor& new_ids, KvCache& cache, const Context& ctx) const;

  Embedding token_embedding;          // "token_embedding.weight" (V, C)
  AbsolutePosition position;          // "position_embedding.weight" (max_seq_len, C) when learned
  std::vector<TransformerBlock> blocks;  // "blocks.{i}."
  LayerNorm ln_f;                     // "ln_f."
  Linear lm_head;                     // "lm_head.weight" (V, C), only when not tied

 private:
  // Shared by the full and the cached paths. embed: ids (B, T) at positions offset .. offset + T - 1
  // -> (B, T, C), token plus position embeddings, dropout. head: ln_f output (B, T, C) -> (B, T, V).
  Tensor embed(const Tensor& ids, const Context& ctx, int64_t position_offset) const;
  Tensor head(const Tensor& h) const;
  ModelConfig config_;
};

}  // namespace tf::layers
