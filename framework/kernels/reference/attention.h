// Scaled dot-product attention kernels behind one narrow interface: raw pointers, a dims struct and
// a mask struct. This header holds the interface and the reference kernels (plain loops, float and
// double: the oracle and the fallback); kernels/cpu/attention.h holds the fast float32 kernels.
//
// B = batch, H = query heads, H_kv = key/value heads, T_q = queries, T_k = keys,
// D = query/key head size, D_v = value head size (D everywhere in a standard transformer).
//
//   forward:  S = scale Q K^T                      (B, H, T_q, T_k)
//             P = softmax over keys of S, masked    (B, H, T_q, T_k)   (Vaswani et al. 2017, eq. 1)
//             O = dropout(P) V                      (B, H, T_q, D_v)
//             lse = log sum_j exp(S_ij) over visible keys   (B, H, T_q): all backward needs of P
//   backward (Dao et al. 2022, FlashAttention, Algorithm 4), with P recomputed as exp(S - lse):
//             dV = dropout(P)^T dO,  dP = dropout'(dO V^T),  delta = rowsum(dO * O),
//             dS = P * (dP - delta),  dQ = scale dS K,  dK = scale dS^T Q
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

namespace tf::kernels {

struct AttentionDims {
  int64_t batch = 1;       // B, e.g. 16
  int64_t heads = 1;       // H, e.g. 8
  int64_t kv_heads = 1;    // H_kv, divides H, e.g. 2 (grouped-query) or 8 (multi-head)
  int64_t q_len = 1;       // T_q, e.g. 256
  int64_t kv_len = 1;      // T_k, e.g. 256 (T_q < T_k when queries continue a cached prefix)
  int64_t head_dim = 1;    // D, e.g. 64
  int64_t value_dim = 1;   // D_v, e.g. 64
  double scale = 1.0;      // e.g. 1 / sqrt(64)
  double dropout = 0.0;    // probability of dropping an entry of P, in [0, 1)
  uint64_t dropout_seed = 0;

  int64_t group() const { return heads / kv_heads; }  // query heads per key/value head
};

// Note [attention masks]
// ~~~~~~~~~~~~~~~~~~~~~~
// A mask says which keys j a query i of batch entry b may see. Masks combine by AND: a key is
// visible when every predicate allows it. We split the predicates in two kinds, because a fast
// kernel treats them differently:
//
//  - Position predicates depend only on (i, j) and always leave a contiguous run of keys,
//    [key_begin(i), key_end(i)). Causal masking is one: query i sits at absolute position
//    i + (T_k - T_q) (the queries are the last T_q of the T_k positions, as when decoding after
//    a cached prefix), so it sees keys j <= i + T_k - T_q, i.e. key_end(i) = i + T_k - T_q + 1.
//    A tiled kernel skips whole key blocks outside the run. A sliding window of width w
//    (Beltagy et al. 2020) is one more such predicate: key_begin(i) = i + T_k - T_q - w + 1.
//  - Per-key predicates depend on (b, j): key padding, key_keep[b T_k + j] == 0 for a pad.
//    Block-sparse patterns would be a third kind, a per-(i-block, j-block) table.
//
// A row may end up with no visible key (left padding under a causal mask, or T_q > T_k with
// causal). Its softmax is undefined; we define its probabilities, its output and every gradient
// through it as 0, and its log-sum-exp as -inf, so no NaN appears anywhere.
struct AttentionMask {
  bool causal = false;
  const uint8_t* key_keep = nullptr;  // (B, T_k), 1 = real token, 0 = padding; null = no padding

  int64_t key_begin(const AttentionDims& d, int64_t i) const { return 0; }
  int64_t key_end(const AttentionDims& d, int64_t i) const {
    if (!causal) return d.kv_len;
    const int64_t end = i + d.kv_len - d.q_len + 1;
    return end < 0 ? 0 : (end > d.kv_len ? d.kv_len : end);
  }
  bool key_visible(int64_t b, const AttentionDims& d, int64_t j) const {
    return key_keep == nullptr || key_keep[b * d.kv_len + j] != 0;
  }
};

// The dropout keep factor of P's element e: 0 when dropped, 1 / (1 - dropout) when kept.
double attention_dropout_factor(const AttentionDims& d, uint64_t e);

// The arguments of every attention kernel (reference, fast, flash), by name. The shapes, the mask
// (and the score modifiers to come) travel here, so a new kind of attention is a new field, not a
// new parameter in six signatures.
template <class T>
struct AttentionForwardArgs {
  AttentionDims dims;
  AttentionMask mask;
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
  const T* queries = nullptr;  // the forward's inputs, output and lse
  const T* keys = nullptr;
  const T* values = nullptr;
  const T* out = nullptr;
  const T* lse = nullptr;
  const T* dout = nullptr;     // (B, H, T_q, D_v)
  T* dqueries = nullptr;       // assigned, in the shapes of queries, keys, values; dkeys and dvalues
  T* dkeys = nullptr;          // sum over the query heads that share a key/value head
  T* dvalues = nullptr;
};

// out = softmax(scale Q K^T, masked) V, lse, and probs when asked.
template <class T>
void attention_forward_reference(const AttentionForwardArgs<T>& a);

// dqueries, dkeys, dvalues from the forward's inputs, out, lse and dout.
template <class T>
void attention_backward_reference(const AttentionBackwardArgs<T>& a);

}  // namespace tf::kernels
