// BERT model; see bert.h and docs/models.md.
#include "layers/models/bert.h"

#include "framework/ops/cross_entropy.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/embedding.h"
#include "framework/ops/matmul.h"
#include "framework/ops/shape.h"

namespace tf::layers {

Bert::Bert(const ModelConfig& c, Init& init) : config_(c) {
  c.validate();
  token_embedding = Embedding({c.vocab_size, c.d_model, c.init_std}, init);
  position = AbsolutePosition({c.position, c.max_seq_len, c.d_model}, init);
  if (c.n_segments > 0) segment_embedding = Embedding({c.n_segments, c.d_model, c.init_std}, init);
  embedding_norm = LayerNorm({c.d_model, c.ln_eps, c.norm}, init);
  for (int64_t i = 0; i < c.n_layers; ++i) blocks.emplace_back(c.block_options(i), init);
  mlm_dense = Linear({c.d_model, c.d_model, c.bias, c.init_std}, init);
  mlm_norm = LayerNorm({c.d_model, c.ln_eps, c.norm}, init);
  if (c.bias) mlm_bias = init.zeros({c.vocab_size});  // model.bias: false removes every linear layer's bias
}

Tensor Bert::encode(const Tensor& ids, const Tensor& key_padding, const Context& ctx, const Tensor& segments) const {
  TF_CHECK(ids.rank() == 2 && ids.dtype() == DType::i32, "Bert: ids must be (B, T) i32, got ", ids.describe());
  const Tensor tokens = in_layer("token_embedding", [&] { return token_embedding.forward(ids); });
  Tensor x = in_layer("position_embedding", [&] { return position.add_to(tokens); });  // (B, T, C)
  if (segments.defined()) {
    TF_CHECK(config_.n_segments > 0, "Bert: segments given but model.n_segments is 0");
    x = in_layer("segment_embedding", [&] { return ops::add(x, segment_embedding.forward(segments)); });
  }
  x = dropout(in_layer("embedding_norm", [&] { return embedding_norm.forward(x); }), config_.dropout, ctx);
  Context with_ids = ctx;
  with_ids.token_ids = ids;
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    const TransformerBlock& block = blocks[static_cast<size_t>(i)];
    x = in_layer("blocks", [&] { return block.forward(x, key_padding, with_ids.in_block(i)); }, i);
  }
  return x;
}

Tensor Bert::mlm_logits(const Tensor& hidden) const {
  LayerScope head("mlm_head");
  const Tensor dense = in_layer("dense", [&] { return ops::gelu(mlm_dense.forward(hidden), config_.gelu); });
  const Tensor h = in_layer("norm", [&] { return mlm_norm.forward(dense); });
  return config_.output_logits(ops::linear(h, token_embedding.weight, mlm_bias));  // tied to token_embedding, own bias
}

Tensor Bert::logits(const Tensor& ids, const Tensor& key_padding, const Context& ctx) const {
  return mlm_logits(encode(ids, key_padding, ctx));
}

Tensor Bert::loss(const Tensor& ids, const Tensor& targets, const Tensor& key_padding, const Context& ctx) const {
  check_same_shape("Bert::loss", ids, targets);
  // The MLM head runs only on rows that have a target (about 15%): gather them first. A row
  // gather is an embedding lookup into the (B T, C) hidden states, whose backward scatter-adds.
  std::vector<int32_t> rows, row_targets;
  const int32_t* t = targets.data<int32_t>();
  for (int64_t i = 0; i < targets.numel(); ++i)
    if (t[i] != -100) rows.push_back(static_cast<int32_t>(i)), row_targets.push_back(t[i]);
  const Tensor hidden = encode(ids, key_padding, ctx);
  if (rows.empty()) return ops::cross_entropy(mlm_logits(hidden), targets);  // 0, all ignored
  // The count varies from batch to batch; padded up to a multiple of 32 (row 0, no target: it
  // adds 0 to the loss and to every gradient), the head's matmuls see a few shapes only, so their
  // primitives and buffers are reused from step to step instead of made anew.
  while (rows.size() % 32 != 0) rows.push_back(0), row_targets.push_back(-100);
  const int64_t n = static_cast<int64_t>(rows.size());
  const Tensor flat = ops::reshape(hidden, {hidden.numel() / config_.d_model, config_.d_model});
  const Tensor picked = ops::embedding(flat, Tensor::from_ids(rows, {n}));  // (N, C)
  return ops::cross_entropy(mlm_logits(picked), Tensor::from_ids(row_targets, {n}));
}

ParamList Bert::parameters() const {
  ParamList out;
  token_embedding.parameters(out, "token_embedding.");
  position.parameters(out, "position_embedding.");
  if (config_.n_segments > 0) segment_embedding.parameters(out, "segment_embedding.");
  embedding_norm.parameters(out, "embedding_norm.");
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i].parameters(out, "blocks." + std::to_string(i) + ".");
  mlm_dense.parameters(out, "mlm_head.dense.");
  mlm_norm.parameters(out, "mlm_head.norm.");
  if (mlm_bias.defined()) add_param(out, "mlm_head.bias", mlm_bias, ParamKind::bias);
  return out;
}

}  // namespace tf::layers
