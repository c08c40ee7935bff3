// GPT model; see gpt.h and docs/models.md.
#include "layers/models/gpt.h"

#include "framework/ops/cross_entropy.h"
#include "framework/ops/matmul.h"

namespace tf::layers {

Gpt::Gpt(const ModelConfig& c, Init& init) : config_(c) {
  c.validate();
  token_embedding = Embedding({c.vocab_size, c.d_model, c.init_std}, init);
  position = AbsolutePosition({c.position, c.max_seq_len, c.d_model}, init);
  for (int64_t i = 0; i < c.n_layers; ++i) blocks.emplace_back(c.block_options(), init);
  ln_f = LayerNorm({c.d_model, c.ln_eps}, init);
  if (!c.tie_embeddings) lm_head = Linear({c.d_model, c.vocab_size, false, c.init_std}, init);
}

Tensor Gpt::hidden(const Tensor& ids, const Context& ctx, int64_t position_offset) const {
  TF_CHECK(ids.rank() == 2 && ids.dtype() == DType::i32, "Gpt: ids must be (B, T) i32, got ", ids.describe());
  Tensor x = position.add_to(token_embedding.forward(ids), position_offset);  // (B, T, C)
  x = dropout(x, config_.dropout, ctx);
  for (const auto& block : blocks) x = block.forward(x, Tensor(), ctx, position_offset);
  return ln_f.forward(x);
}

Tensor Gpt::logits(const Tensor& ids, const Tensor& key_padding, const Context& ctx) const {
  TF_CHECK(!key_padding.defined(), "Gpt: a causal language model takes no key-padding mask");
  const Tensor h = hidden(ids, ctx);
  return config_.tie_embeddings ? ops::linear(h, token_embedding.weight) : lm_head.forward(h);  // (B, T, V)
}

Tensor Gpt::loss(const Tensor& ids, const Tensor& targets, const Tensor& key_padding, const Context& ctx) const {
  return ops::cross_entropy(logits(ids, key_padding, ctx), targets);
}

ParamList Gpt::parameters() const {
  ParamList out;
  token_embedding.parameters(out, "token_embedding.");
  position.parameters(out, "position_embedding.");
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i].parameters(out, "blocks." + std::to_string(i) + ".");
  ln_f.parameters(out, "ln_f.");
  if (!config_.tie_embeddings) lm_head.parameters(out, "lm_head.");
  return out;
}

}  // namespace tf::layers
