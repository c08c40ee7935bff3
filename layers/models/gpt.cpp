// GPT model; see gpt.h and docs/models.md.
#include "layers/models/gpt.h"

#include <algorithm>

#include "framework/autograd/tape.h"
#include "framework/ops/cross_entropy.h"
#include "framework/ops/matmul.h"
#include "framework/ops/shape.h"

namespace tf::layers {

Gpt::Gpt(const ModelConfig& c, Init& init) : config_(c) {
  c.validate();
  token_embedding = Embedding({c.vocab_size, c.d_model, c.init_std}, init);
  position = AbsolutePosition({c.position, c.max_seq_len, c.d_model}, init);
  for (int64_t i = 0; i < c.n_layers; ++i) blocks.emplace_back(c.block_options(i), init);
  ln_f = LayerNorm({c.d_model, c.ln_eps, c.norm}, init);
  if (!c.tie_embeddings) lm_head = Linear({c.d_model, c.vocab_size, false, c.init_std}, init);
}

Tensor Gpt::embed(const Tensor& ids, const Context& ctx, int64_t position_offset) const {
  TF_CHECK(ids.rank() == 2 && ids.dtype() == DType::i32, "Gpt: ids must be (B, T) i32, got ", ids.describe());
  const Tensor tokens = in_layer("token_embedding", [&] { return token_embedding.forward(ids); });
  const Tensor x = in_layer("position_embedding", [&] {  // (B, T, C); a shard's chunks at their own positions
    return per_chunk(tokens, 1, ctx.shard, position_offset,
                     [&](const Tensor& piece, int64_t start) { return position.add_to(piece, start); });
  });
  return dropout(x, config_.dropout, ctx);
}

Tensor Gpt::head(const Tensor& h) const {
  if (config_.tie_embeddings)
    return config_.output_logits(in_layer("token_embedding", [&] { return ops::linear(h, token_embedding.weight); }));
  return config_.output_logits(in_layer("lm_head", [&] { return lm_head.forward(h); }));  // (B, T, V)
}

Tensor Gpt::hidden(const Tensor& ids, const Context& ctx, KvCache* cache) const {
  Tensor x = embed(ids, ctx, cache ? cache->length() : 0);  // (B, T, C)
  Context with_ids = ctx;
  with_ids.token_ids = ids;
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    const ops::KvBuffers layer_cache = cache ? cache->layer(i) : ops::KvBuffers{};
    const TransformerBlock& block = blocks[static_cast<size_t>(i)];
    const ops::KvBuffers* layer_view = cache ? &layer_cache : nullptr;
    x = in_layer("blocks", [&] { return block.forward(x, Tensor(), with_ids.in_block(i), layer_view); }, i);
  }
  if (cache) cache->advance(ids.dim(1));
  return in_layer("ln_f", [&] { return ln_f.forward(x); });
}

Tensor Gpt::logits(const Tensor& ids, const Tensor& key_padding, const Context& ctx) const {
  TF_CHECK(!key_padding.defined(), "Gpt: a causal language model takes no key-padding mask");
  return head(hidden(ids, ctx));
}

Tensor Gpt::loss(const Tensor& ids, const Tensor& targets, const Tensor& key_padding, const Context& ctx) const {
  return ops::cross_entropy(logits(ids, key_padding, ctx), targets);
}

KvCache Gpt::make_cache(int64_t batch) const {
  KvCache::Options o;
  o.n_layers = config_.n_layers;
  o.batch = batch;
  o.kv_heads = config_.kv_heads();
  if (!config_.heads_per_layer.empty())
    for (int64_t l = 0; l < config_.n_layers; ++l) o.kv_heads_per_layer.push_back(config_.kv_heads(l));
  // With a window, 2w rows suffice: w - 1 kept and a chunk of up to w + 1 (layers/kv_cache.h). Not
  // with global tokens or random blocks: a query may then see any earlier position.
  const bool sparse = config_.attention.global_tokens > 0 || config_.attention.random_blocks > 0;
  const int64_t w = sparse ? 0 : config_.attention.window;
  o.capacity = w > 0 ? std::min(config_.max_seq_len, 2 * w) : config_.max_seq_len;
  o.window = w > 0 ? std::min(w, o.capacity) : 0;
  o.head_dim = config_.head_dim();
  o.dtype = token_embedding.weight.dtype();
  for (int64_t l = 0; l < config_.n_layers && !config_.mixers.empty(); ++l) {  // linear: (B, H, D, D + 1)
    o.recurrent_states.push_back(config_.mixer(l) == MixerKind::linear
                                     ? Shape{batch, config_.heads(l), o.head_dim, o.head_dim + 1}
                                     : Shape{});
    o.differential.push_back(config_.mixer(l) == MixerKind::differential);
    o.conv_states.push_back(Shape{});
    if (config_.mixer(l) == MixerKind::mamba) {  // conv inputs (B, K - 1, E) and scan state (B, E, N)
      const Mamba& m = blocks[l].mamba;
      o.recurrent_states.back() = m.scan_state_shape(batch);
      o.conv_states.back() = m.conv_state_shape(batch);
    }
  }
  return KvCache(o);
}

Tensor Gpt::logits_cached(const Tensor& new_ids, KvCache& cache, const Context& ctx) const {
  // Nothing here is recorded (the cache's writes are not ops), so a gradient would be silently wrong.
  TF_CHECK(!grad_enabled(), "Gpt::logits_cached is for inference: call it under a NoGradGuard");
  TF_CHECK(new_ids.rank() == 2 && new_ids.dtype() == DType::i32 && new_ids.dim(1) > 0,
           "Gpt::logits_cached: new_ids must be (B, T) i32 with T >= 1, got ", new_ids.describe());
  const KvCache::Options& o = cache.options();
  TF_CHECK(o.n_layers == config_.n_layers && o.batch == new_ids.dim(0) && o.head_dim == config_.head_dim() &&
               o.dtype == token_embedding.weight.dtype(),
           "Gpt::logits_cached: the cache (", o.n_layers, " layers, batch ", o.batch, ", head_dim ", o.head_dim, ", ",
           dtype_name(o.dtype), ") does not fit this model and batch (", config_.n_layers, " layers, batch ",
           new_ids.dim(0), ", head_dim ", config_.head_dim(), ", ", dtype_name(token_embedding.weight.dtype()),
           "); build it with make_cache()");
  const int64_t T = new_ids.dim(1), offset = cache.length();  // positions offset .. offset + T - 1
  const int64_t limit = cache.options().window > 0 ? config_.max_seq_len : std::min(cache.capacity(), config_.max_seq_len);
  TF_CHECK_INPUT(offset + T <= limit, "Gpt::logits_cached: ", offset, " cached positions plus ", T,
                 " new exceed max_seq_len ", limit, " (clear() the cache and continue from a shorter context)");
  // A windowed cache takes at most max_chunk() new positions per pass; a longer prefill runs in parts.
  const int64_t chunk = cache.max_chunk();
  if (T <= chunk) {
    cache.make_room(T);
    return head(hidden(new_ids, ctx, &cache));  // (B, T, V)
  }
  std::vector<int64_t> sizes;
  for (int64_t t = 0; t < T; t += chunk) sizes.push_back(std::min(chunk, T - t));
  std::vector<Tensor> logits;
  for (const Tensor& part : ops::split(new_ids, sizes, 1)) {
    cache.make_room(part.dim(1));
    logits.push_back(head(hidden(part, ctx, &cache)));  // (B, t, V)
  }
  return ops::concat(logits, 1);
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
