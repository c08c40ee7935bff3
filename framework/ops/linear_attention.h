// Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): softmax(q k^T) replaced by
// the kernel phi(q) . phi(k) with phi(x) = elu(x) + 1, so that the sum over keys can be taken once
// for all queries. Causal, its cost is O(T D^2) per head instead of O(T^2 D), and decoding carries a
// (D, Dv + 1) state per head instead of a cache that grows with the context.
//
// B = batch, H = heads, T = time, D = query/key size, Dv = value size.
//
//   Tensor o = ops::linear_attention(q, k, v);              // (B, H, T, Dv), causal
//   Tensor state = ops::linear_attention_state(q, v);      // decoding: zeros (B, H, D, Dv + 1)
//   Tensor o_t = ops::linear_attention_append(q_t, k_t, v_t, state);  // new positions; state moves on
//
// Note [linear attention]
// ~~~~~~~~~~~~~~~~~~~~~~~
// With phi applied to every query and key row (eq. 6-7 of the paper):
//   o_i = sum_{j <= i} (phi(q_i) . phi(k_j)) v_j / (sum_{j <= i} phi(q_i) . phi(k_j) + eps)
// Append a column of ones to the values, v'_j = [v_j, 1] (Dv + 1): numerator and normaliser are then
// one masked kernel product n'_i = sum_{j <= i} (phi(q_i) . phi(k_j)) v'_j, and o_i = n_i / (n'_i[Dv] + eps).
// eps = 1e-6 as in the paper's code; phi > 0 keeps the normaliser positive.
// Backward: with g_i = do_i / den_i and g'_i = [g_i, -(do_i . o_i) / den_i] (the normaliser's share),
//   dphi(q)_i = sum_{j <= i} (g'_i . v'_j) phi(k_j)       the same causal product, roles exchanged
//   dphi(k)_j = sum_{i >= j} (v'_j . g'_i) phi(q_i)       anticausal
//   dv'_j     = sum_{i >= j} (phi(k_j) . phi(q_i)) g'_i   anticausal; dv is its first Dv columns
// and phi'(x) = 1 for x > 0, exp(x) = phi(x) for x <= 0, i.e. min(phi(x), 1): the backward needs the
// mapped rows only. Each product is kernels::kernel_product_*; the float32 path takes the chunked
// kernel (O(T D^2)), float64 the pairwise reference.
// Not causal (a BERT): every j, and the backward's sums run over every i. A padded key j has
// phi(k_j) = 0 (key_padding), so it adds to neither sum, and its dk is 0.
#pragma once
#include "framework/tensor.h"

namespace tf::ops {

struct LinearAttentionOptions {
  bool causal = true;
  double eps = 1e-6;    // added to the normaliser
  Tensor key_padding{}; // (B, T): 1 for real tokens, 0 for padding, whose phi(k) is taken as 0; or undefined
};

// q, k: (B, H, T, D); v: (B, H, T, Dv). Returns (B, H, T, Dv).
Tensor linear_attention(const Tensor& queries, const Tensor& keys, const Tensor& values,
                        const LinearAttentionOptions& options = {});

// Decoding. The state, (B, H, D, Dv + 1), is sum_j phi(k_j) [v_j, 1]^T over the positions decoded
// so far; linear_attention_state gives the empty one for queries and values shaped like these.
// linear_attention_append takes the new positions (B, H, T, .), returns their outputs (the rows a
// causal linear_attention over the whole context gives them) and adds them to the state's storage in
// place. Inference only (no gradient).
Tensor linear_attention_state(const Tensor& queries, const Tensor& values);
Tensor linear_attention_append(const Tensor& queries, const Tensor& keys, const Tensor& values,
                               const Tensor& state, const LinearAttentionOptions& options = {});
// The attention weights linear attention implies, (B, H, T, T): w_ij = phi(q_i) . phi(k_j) / (sum over
// visible j' of phi(q_i) . phi(k_j') + eps), 0 where j is not visible; o = w v. For looking at a
// model (tapeformer inspect); O(T^2), not recorded.
Tensor linear_attention_weights(const Tensor& queries, const Tensor& keys, const LinearAttentionOptions& options = {});

}  // namespace tf::ops
