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
// It is the decode state of a GPT: each block's attention takes its layer() view, appends the new
// positions' keys and values and attends over the cache (ops::attention_append, where the math and
// why it is exact are), so decoding runs the same layers as training. Cropping the context changes
// every position (a learned or sinusoidal table, or RoPE's angles, move by the crop), so a crop
// means clear().
//
// Layout: per layer, keys and values are (B, G, L, D) buffers allocated by the constructor and
// filled up to rows(); a decode step writes T rows per head in place and never reallocates.
// A differential-attention layer keeps two key buffers, (B, G/2, L, D) each, and (B, G/2, L, 2D)
// values (Options::differential).
// A layer with a recurrent mixer (linear attention, Mamba) keeps its state tensors instead: a sum over every
// position so far, of constant size, updated in place; it needs no rows and ignores the window.
//
// Sliding window (Options::window = w > 0; Mistral's rolling buffer, Jiang et al. 2023): a query
// sees itself and the w - 1 positions before it, so older keys are never read again. The cache then
// needs L = 2w rows, not max_seq_len: when a chunk would not fit, make_room() keeps the newest w - 1
// rows (one copy every ~w tokens) and the cache goes on from there. length() still counts every
// position since clear(), and the position of row 0 is length() - rows().
#pragma once
#include <cstdint>
#include <vector>

#include "framework/ops/attention_cache.h"
#include "framework/tensor.h"

namespace tf::layers {

class KvCache {
 public:
  struct Options {
    int64_t n_layers = 4;
    int64_t batch = 1;       // B
    int64_t kv_heads = 4;    // G, e.g. 6 (multi-head) or 2 (grouped-query)
    std::vector<int64_t> kv_heads_per_layer;  // G of each layer when they differ (a pruned model); empty: kv_heads
    int64_t capacity = 256;  // L, positions it holds, e.g. max_seq_len = 256, or 2w with a window
    int64_t head_dim = 32;   // D, e.g. 64
    DType dtype = DType::f32;
    int64_t window = 0;      // w: the attention window of the model; 0 = none (every row is kept)
    // Per layer, the shape of a recurrent decode state that layer keeps instead of keys and values
    // (a linear-attention layer: (B, H, D, D + 1)); rank 0 for a layer that caches keys and values.
    // Empty: every layer caches keys and values.
    std::vector<Shape> recurrent_states;
    // Per layer, whether it is a differential-attention layer (mixer.h): it keeps keys of G / 2
    // heads for each of its two maps, (B, G / 2, L, D) twice, and values of G / 2 heads of 2D,
    // (B, G / 2, L, 2D). Empty: none is.
    std::vector<bool> differential;
    // Per layer, the shape of a second recurrent state (a Mamba layer's convolution inputs,
    // (B, K - 1, E)); rank 0 for none. Empty: no layer has one.
    std::vector<Shape> conv_states;
  };

  KvCache() = default;
  explicit KvCache(const Options& options);
  const Options& options() const { return options_; }
  int64_t length() const { return length_; }  // positions decoded since clear(): 0 .. length() - 1
  int64_t rows() const { return rows_; }      // of which the buffers hold the last rows()
  int64_t capacity() const { return options_.capacity; }
  void clear();  // keeps the buffers; recurrent states back to zero
  // New positions one call may append: all of L, or L - (w - 1) with a window.
  int64_t max_chunk() const;
  // Before appending t <= max_chunk() positions: with a window, drops all but the newest w - 1 rows
  // if t would not fit. Without one, does nothing (the caller keeps length() <= L).
  void make_room(int64_t t);

  // (B, G, L, D) buffers of `layer`; rows rows() .. L - 1 of each head are stale or zero.
  const Tensor& keys(int64_t layer) const { return layers_.at(layer).keys; }
  const Tensor& second_keys(int64_t layer) const { return layers_.at(layer).second_keys; }  // differential
  const Tensor& values(int64_t layer) const { return layers_.at(layer).values; }

  // The view layer `layer`'s attention decodes through (ops::attention_append): its buffers, sharing
  // storage with the cache's, rows() and the next position, length().
  ops::KvBuffers layer(int64_t layer) const;
  // Marks the T positions every layer has just appended as held.
  void advance(int64_t t);
  int64_t kv_heads(int64_t layer) const;  // G of that layer
  bool recurrent(int64_t layer) const;    // whether that layer keeps a recurrent state (no keys and values)
  bool differential(int64_t layer) const; // whether that layer keeps two maps' keys (Options::differential)

 private:
  struct Layer {
    Tensor keys, values;  // (B, G, L, D) each; undefined for a recurrent layer
    Tensor second_keys;   // a differential layer's second map's keys; else undefined
    Tensor conv_state;    // a Mamba layer's convolution inputs (Options::conv_states); else undefined
    Tensor state;         // a recurrent layer's state (Options::recurrent_states); else undefined
  };
  Options options_;
  std::vector<Layer> layers_;
  int64_t length_ = 0, rows_ = 0;
};

}  // namespace tf::layers
