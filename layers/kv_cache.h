// KV cache: the keys and values of every position a causal decoder has already run, per layer,
// so that decoding one more token runs only that token through the blocks.
//
// B = batch, H = query heads, G = key/value heads, L = capacity (the model's max_seq_len),
// D = head size, T = new positions in one call.
//
//   layers::KvCache cache = gpt.make_cache();                 // empty; every buffer allocated here, once
//   Tensor a = gpt.logits_cached(prompt_ids, cache, ctx);      // prefill: (1, T, V); cache.length() == T
//   Tensor b = gpt.logits_cached(next_id, cache, ctx);         // one token: (1, 1, V); length T + 1
//   cache.clear();                                             // start again (e.g. after cropping)
//
// Why it is exact: with causal attention, the keys and values of position t depend only on tokens
// 0 .. t, so appending a token never changes those of earlier positions; each block needs only the
// new rows' queries, keys and values, and the new queries attend to the cached keys plus their
// own (causal with T_q < T_k: the queries are the last T positions, Note [attention masks] in
// framework/kernels/reference/attention.h). Cropping the context changes every position (a
// learned or sinusoidal table, or RoPE's angles, move by the crop), so a crop means clear().
//
// Layout: per layer, keys and values are (B, G, L, D) buffers allocated by the constructor and
// filled up to length(); a decode step writes T rows per head in place and never reallocates.
#pragma once
#include <cstdint>
#include <vector>

#include "framework/kernels/reference/attention.h"
#include "framework/tensor.h"

namespace tf::layers {

class KvCache {
 public:
  struct Options {
    int64_t n_layers = 4;
    int64_t batch = 1;       // B
    int64_t kv_heads = 4;    // G, e.g. 6 (multi-head) or 2 (grouped-query)
    int64_t capacity = 256;  // L, positions it holds, e.g. max_seq_len = 256
    int64_t head_dim = 32;   // D, e.g. 64
    DType dtype = DType::f32;
  };

  KvCache() = default;
  explicit KvCache(const Options& options);
  const Options& options() const { return options_; }
  int64_t length() const { return length_; }  // positions held: 0 .. length() - 1
  int64_t capacity() const { return options_.capacity; }
  void clear() { length_ = 0; }  // keeps the buffers

  // (B, G, L, D) buffers of `layer`; rows length() .. L - 1 of each head are stale or zero.
  const Tensor& keys(int64_t layer) const { return layers_.at(layer).keys; }
  const Tensor& values(int64_t layer) const { return layers_.at(layer).values; }

  // One layer's step, called by MultiHeadAttention::forward_cached: writes keys and values
  // (B, G, T, D) of positions length() .. length() + T - 1 into `layer`, then returns the attention
  // of queries (B, H, T, D) at those positions over every cached position 0 .. length() + T - 1,
  // causal; (B, H, T, D). length() itself moves only with advance(), once every layer has run.
  Tensor append_and_attend(int64_t layer, const Tensor& queries, const Tensor& keys, const Tensor& values);
  // Marks the T positions every layer has just appended as held.
  void advance(int64_t t);

 private:
  struct Layer {
    Tensor keys, values;  // (B, G, L, D) each
  };
  Options options_;
  std::vector<Layer> layers_;
  int64_t length_ = 0;
};

// The fast float32 kernel of a decoding step: attention of a few query rows over one key/value
// head, in `omp simd` loops (scores s_j = scale q.k_j over the visible keys, p = softmax(s),
// o = sum_j p_j v_j; Vaswani et al. 2017, eq. 1). Same arguments and results as
// kernels::attention_forward_reference with d.batch = d.kv_heads = 1, no key padding and no
// dropout (lse and probs are not produced). Why not kernels::attention_forward_fast: for one query
// row its two oneDNN matmuls took 10 - 19 us each (ONEDNN_VERBOSE, loaded machine) for ~1 us of
// arithmetic, and every new key count created two more primitives; this loop reads each cached
// key and value once. A prefill chunk (many rows) still goes to attention_forward_fast.
void attention_step_fast(const kernels::AttentionDims& d, const kernels::AttentionMask& mask, const float* q,
                         const float* k, const float* v, float* out);

}  // namespace tf::layers
