// Scaled dot-product attention as one op with its own backward (Vaswani et al. 2017, eq. 1):
//   attention(Q, K, V) = dropout(softmax(scale Q K^T + mask)) V
//
// B = batch, H = query heads, H_kv = key/value heads, T_q = queries, T_k = keys, D = head size.
//
//   Tensor out = ops::attention(q, k, v, {.causal = true});             // GPT: (B, H, T, D)
//   AttentionOptions o{.key_padding = pad, .dropout = 0.1, .dropout_seed = step};
//   Tensor w;
//   Tensor out = ops::attention(q, k, v, o, &w);                         // BERT, w (B, H, T, T)
//
// Why one fused op rather than matmul + softmax + matmul on the tape: the tape would keep the
// (B, H, T_q, T_k) probabilities alive until backward; this op saves only the per-row
// log-sum-exp (B, H, T_q) and recomputes P in backward (Dao et al. 2022), and it is the seam
// where a tiled (flash) kernel drops in. Measured (float32, causal, B=16 H=4 T=128 D=32, one
// thread, CPU time, shared 2-core machine): forward 7-9 ms, of which the bare Q K^T and P V matmuls
// take 3-4 ms; backward 17-22 ms; the reference kernel takes 19 ms / 33 ms. Saved for backward per
// call: lse, 32 KB, where a tape of matmul + softmax + matmul would keep P, 4 MB (T times more).
// The math and the kernels are in
// kernels/reference/attention.h (reference, float and double) and kernels/cpu/attention.h (fast).
// Masks and variants: see Notes [attention masks] and [attention variants] in
// kernels/reference/attention.h.
#pragma once
#include <cstdint>

#include "framework/kernels/reference/attention.h"
#include "framework/tensor.h"

namespace tf::ops {

struct AttentionOptions {
  bool causal = false;        // query i sees keys j <= i + (T_k - T_q)
  Tensor key_padding{};       // (B, T_k) float, 1 = real token, 0 = padding; undefined = none
  double scale = 0;           // 0 means 1 / sqrt(D)  (Vaswani et al. 2017, eq. 1)
  double dropout = 0;         // on the attention probabilities, in [0, 1); a layer passes 0 in eval
  uint64_t dropout_seed = 0;  // counter-based: element index e of P -> tf::uniform_at(seed, e)
  kernels::AttentionVariant variant = {};  // sliding window, ALiBi, T5 bias: Note [attention variants]
  Tensor relative_bias{};     // (H, relative_buckets): T5's learned bias per head and bucket, when the
                              // variant has buckets; it receives a gradient like q, k and v
};

// q (B, H, T_q, D), k (B, H_kv, T_k, D) and v (B, H_kv, T_k, D_v) with H % H_kv == 0 (H_kv < H is
// grouped-query attention: query head h uses key/value head h / (H / H_kv)). Returns
// (B, H, T_q, D_v); D_v = D in a standard transformer. A query that sees no key (every key
// padded, or masked by causality when T_q > T_k) gets output 0 and passes no gradient.
// When weights_out is given it receives the attention probabilities (B, H, T_q, T_k) (after
// masking, before dropout; rows with no visible key are 0) without changing the result. They are
// for inspection and are not recorded on the tape.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options = {},
                 Tensor* weights_out = nullptr);

// merge_heads(attention(split_heads(qkv, {H, H_kv, H_kv}, D), options)): the fused QKV projection's
// output (B, T, (H + 2 H_kv) D) -> (B, T, H D), self-attention (T_q = T_k = T), the composition's
// values and gradients. Where the tiled kernel runs (float32, flash_attention_preferred) it reads the
// heads in place and writes the merged output directly (kernels::FlashLayout), with no copy of the
// heads either way, forward or backward; elsewhere it is the composition. No weights_out: a caller
// that inspects the probabilities takes the composition.
//   Tensor merged = ops::attention_qkv(qkv.forward(x), H, H_kv, {.causal = true});  // (B, T, H D)
Tensor attention_qkv(const Tensor& qkv, int64_t heads, int64_t kv_heads, const AttentionOptions& options = {});

// The kernel ops::attention runs: the reference for float64 (and in reference mode), for float32
// the tiled (flash) or the materialised fast kernel (flash_attention_preferred). For ops that call
// attention on parts of their inputs (ring_attention.h).
template <class T>
void attention_forward_kernel(const kernels::AttentionForwardArgs<T>& a);
template <class T>
void attention_backward_kernel(const kernels::AttentionBackwardArgs<T>& a);

// Throws tf::Error (naming `op`) unless `bias` is T5's (heads, buckets) table of `dtype` when the
// variant has buckets, and undefined when it has none; every op that takes the table checks it so.
void check_relative_bias(const char* op, const Tensor& bias, int64_t heads, const kernels::AttentionVariant& variant,
                         DType dtype);

}  // namespace tf::ops
