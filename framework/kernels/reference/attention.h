// Scaled dot-product attention kernels behind one narrow interface: raw pointers, a dims struct and
// a mask struct. This header holds the interface and the reference kernels (plain loops, float and
// double: the oracle and the fallback); kernels/cpu/attention.h holds the fast float32 kernels.
//
// B = batch, H = query heads, H_kv = key/value heads, T_q = queries, T_k = keys,
// D = query/key head size, D_v = value head size (D everywhere in a standard transformer).
//
//   forward:  S = scale Q K^T                      (B, H, T_q, T_k)
//             S' = modify(S)                        the variant's score modifiers (AttentionScores)
//             P = softmax over keys of S', masked   (B, H, T_q, T_k)   (Vaswani et al. 2017, eq. 1)
//             O = dropout(P) V                      (B, H, T_q, D_v)
//             lse = log sum_j exp(S'_ij) over visible keys  (B, H, T_q): all backward needs of P
//   backward (Dao et al. 2022, FlashAttention, Algorithm 4), with P recomputed as exp(S' - lse):
//             dV = dropout(P)^T dO,  dP = dropout'(dO V^T),  delta = rowsum(dO * O),
//             dS' = P * (dP - delta),  dS = dS' * dS'/dS (AttentionScores::backward),
//             dQ = scale dS K,  dK = scale dS^T Q
//   (delta_i = sum_j P_ij dP_ij because O_i = sum_j dropout(P)_ij V_j, so delta is cheap to form
//   from the saved output even when P is never stored, as in a tiled kernel.)
//
// Grouped-query attention (Ainslie et al. 2023): query head h reads key/value head h / (H / H_kv).
// Because the group's query heads are adjacent, Q viewed as (B * H_kv, (H / H_kv) * T_q, D) lines
// up with K as (B * H_kv, T_k, D): batched matmuls need no copies of K or V.
//
// Dropout (Srivastava et al. 2014) on P: element e = ((b H + h) T_q + i) T_k + j of P is dropped
// when tf::uniform_at(seed, e) < dropout, and kept ones are scaled by 1 / (1 - dropout). The mask
// is a pure function of (seed, e), so backward recomputes it instead of storing it.
#pragma once
#include <cstdint>

#include "framework/kernels/reference/attention_variant.h"

namespace tf::kernels {

// The dropout keep factor of P's element e: 0 when dropped, 1 / (1 - dropout) when kept.
double attention_dropout_factor(const AttentionDims& d, uint64_t e);

// The arguments of every attention kernel (reference, fast, flash), by name. The shapes, the mask
// and the score modifiers travel here (attention_variant.h), so a new kind of attention is a new
// field there, not a new parameter in six signatures.
template <class T>
struct AttentionForwardArgs {
  AttentionDims dims;
  AttentionMask mask;
  AttentionScores scores = {};  // none by default
  const T* queries = nullptr;  // (B, H, T_q, D)
  const T* keys = nullptr;     // (B, H_kv, T_k, D)
  const T* values = nullptr;   // (B, H_kv, T_k, D_v)
  T* out = nullptr;            // (B, H, T_q, D_v)
  T* lse = nullptr;            // (B, H, T_q)
  T* probs = nullptr;          // (B, H, T_q, T_k) before dropout; written only when not null
};

template <class T>
struct AttentionBackwardArgs {
  AttentionDims dims;
  AttentionMask mask;
  AttentionScores scores = {};  // none by default
  const T* queries = nullptr;  // the forward's inputs, output and lse
  const T* keys = nullptr;
  const T* values = nullptr;
  const T* out = nullptr;
  const T* lse = nullptr;
  const T* dout = nullptr;     // (B, H, T_q, D_v)
  T* dqueries = nullptr;       // assigned, in the shapes of queries, keys, values; dkeys and dvalues
  T* dkeys = nullptr;          // sum over the query heads that share a key/value head
  T* dvalues = nullptr;
  T* drelative_bias = nullptr;  // (model heads, buckets): dS summed by bucket, added; T5 bias only
};

// out = softmax(scale Q K^T, masked) V, lse, and probs when asked.
template <class T>
void attention_forward_reference(const AttentionForwardArgs<T>& a);

// dqueries, dkeys, dvalues from the forward's inputs, out, lse and dout.
template <class T>
void attention_backward_reference(const AttentionBackwardArgs<T>& a);

}  // namespace tf::kernels
