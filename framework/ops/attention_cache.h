// Attention while decoding: the new positions' keys and values are appended to a KV cache and
// their queries attend over everything cached, causally. Inference only (nothing is recorded).
//
// B = batch, H = query heads, G = key/value heads, L = the cache's capacity, D = head size,
// T = new positions, N = length + T, the positions attended to.
//
//   ops::KvBuffers cache{keys, values, length};   // (B, G, L, D) each; rows 0 .. length - 1 filled
//   Tensor out = ops::attention_append(queries, keys_new, values_new, cache);   // (B, H, T, D)
//
// Why it is exact: with causal attention, the keys and values of position t depend only on tokens
// 0 .. t, so appending a token never changes those of earlier positions; the new queries attend to
// the cached keys plus their own (causal with T_q < T_k: the queries are the last T of N positions,
// Note [attention masks] in kernels/reference/attention.h). Same scale as ops::attention,
// 1 / sqrt(D) (Vaswani et al. 2017, eq. 1).
#pragma once
#include <cstdint>

#include "framework/kernels/reference/attention.h"
#include "framework/tensor.h"

namespace tf::ops {

// One layer's cache: (B, G, L, D) buffers, of which rows 0 .. length - 1 of every head are filled.
// The tensors share their storage with the owner's (layers::KvCache), so writes land there.
// The rows hold consecutive positions, the newest last; under a sliding window the oldest may have
// been dropped (layers::KvCache keeps w - 1 rows, not the whole context), so the position of the next
// new row, which RoPE and position tables need, can exceed `length`.
struct KvBuffers {
  Tensor keys, values;
  int64_t length = 0;
  int64_t position = -1;  // of row `length`; -1: equal to length (nothing dropped)
  // A layer whose mixer carries a recurrent state instead (linear attention: (B, H, D, Dv + 1), the
  // sum over every position so far, ops::linear_attention_append) has it here and no keys or values.
  Tensor state{};
  // Differential attention's second map's keys, shaped as `keys` (ops::differential_attention_append);
  // undefined for every other layer.
  Tensor second_keys{};
  // A Mamba layer's convolution inputs, the last K - 1 (B, K - 1, E) (ops::causal_conv1d_append); its
  // scan state is `state`.
  Tensor conv_state{};
  int64_t next_position() const { return position >= 0 ? position : length; }
};

// Writes keys (B, G, T, D) and values (B, G, T, Dv) into rows length .. length + T - 1 of the cache
// ((B, G, L, D) and (B, G, L, Dv); Dv = D but for differential attention), then returns the attention
// of queries (B, H, T, D) at those positions over rows 0 .. N - 1; (B, H, T, Dv).
// One new token (T = 1, every step of sampling) runs the (batch entry, key/value head) pairs on
// kernels/cpu/attention_step.h, in one parallel region when the context is long; a longer chunk (a
// prefill) runs each pair on the threaded attention kernel. Throws tf::Error under grad mode, or when the cache is full.
// `variant` is the layer's attention variant (Note [attention variants] in kernels/reference/attention.h).
// `relative_bias` is the layer's T5 table (H, buckets) when the variant has buckets.
Tensor attention_append(const Tensor& queries, const Tensor& keys, const Tensor& values, const KvBuffers& cache,
                        const kernels::AttentionVariant& variant = {}, const Tensor& relative_bias = {});

}  // namespace tf::ops
