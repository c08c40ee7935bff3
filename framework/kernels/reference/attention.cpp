// Reference attention kernels: the textbook formulas, one query row at a time, in the element type.
// See kernels/reference/attention.h for the math and Note [attention masks].
#include "framework/kernels/reference/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "framework/random.h"

namespace tf::kernels {

double attention_dropout_factor(const AttentionDims& d, uint64_t e) {
  if (d.dropout <= 0) return 1.0;
  return uniform_at(d.dropout_seed, e) < d.dropout ? 0.0 : 1.0 / (1.0 - d.dropout);
}

namespace {

// The pointers to one (b, h) head of every tensor.
template <class T>
struct HeadView {
  const T *q, *k, *v;  // (T_q, D), (T_k, D), (T_k, D_v)
  int64_t row0;        // index of row (b, h, 0) in (B, H, T_q)
};

template <class T>
HeadView<T> head_view(const AttentionDims& d, int64_t b, int64_t h, const T* q, const T* k, const T* v) {
  const int64_t kv = b * d.kv_heads + h / d.group();
  const int64_t row0 = (b * d.heads + h) * d.q_len;
  return {q + row0 * d.head_dim, k + kv * d.kv_len * d.head_dim, v + kv * d.kv_len * d.value_dim, row0};
}

// Scores of query i of head h against every key, scaled and biased (Note [attention variants]);
// -inf where masked. Returns the row's max.
template <class T>
T masked_scores(const AttentionDims& d, const AttentionMask& mask, const AttentionScores& scores, int64_t b, int64_t h,
                int64_t i, const T* qi, const T* k, T* s /* (T_k) */) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  T max = neg_inf;
  const int64_t begin = mask.key_begin(d, i), end = mask.key_end(d, i);
  for (int64_t j = 0; j < d.kv_len; ++j) {
    s[j] = neg_inf;
    if (j < begin || j >= end || !mask.key_visible(b, d, j) || !mask.key_allowed(d, i, j)) continue;
    T dot = 0;
    for (int64_t c = 0; c < d.head_dim; ++c) dot += qi[c] * k[j * d.head_dim + c];
    s[j] = static_cast<T>(d.scale) * dot;
    scores.modify(d, h, i, j, 1, &s[j]);
    if (s[j] > max || std::isnan(s[j])) max = std::isnan(max) ? max : s[j];  // NaN sticks: it must reach the output
  }
  return max;
}

}  // namespace

template <class T>
void attention_forward_reference(const AttentionForwardArgs<T>& a) {
  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  const T *q = a.queries, *k = a.keys, *v = a.values;
  T *out = a.out, *lse = a.lse, *probs = a.probs;
  std::vector<T> s(d.kv_len);  // (T_k) scores, then probabilities
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const HeadView<T> hv = head_view(d, b, h, q, k, v);
      for (int64_t i = 0; i < d.q_len; ++i) {
        const int64_t row = hv.row0 + i;
        const T max = masked_scores(d, mask, a.scores, b, h, i, hv.q + i * d.head_dim, hv.k, s.data());
        T* oi = out + row * d.value_dim;  // (D_v)
        for (int64_t c = 0; c < d.value_dim; ++c) oi[c] = 0;
        if (max == -std::numeric_limits<T>::infinity()) {  // no visible key: Note [attention masks]
          lse[row] = max;
          if (probs)
            for (int64_t j = 0; j < d.kv_len; ++j) probs[row * d.kv_len + j] = 0;
          continue;
        }
        // Subtracting the max keeps exp() from overflowing; exp(-inf) = 0 for masked keys.
        T sum = 0;
        for (int64_t j = 0; j < d.kv_len; ++j) sum += s[j] = std::exp(s[j] - max);
        lse[row] = max + std::log(sum);
        for (int64_t j = 0; j < d.kv_len; ++j) {
          const T p = s[j] / sum;
          if (probs) probs[row * d.kv_len + j] = p;
          const T pd = p * static_cast<T>(attention_dropout_factor(d, row * d.kv_len + j));
          for (int64_t c = 0; c < d.value_dim; ++c) oi[c] += pd * hv.v[j * d.value_dim + c];
        }
      }
    }
  }
}

template <class T>
void attention_backward_reference(const AttentionBackwardArgs<T>& a) {
  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  const T *q = a.queries, *k = a.keys, *v = a.values, *out = a.out, *lse = a.lse, *dout = a.dout;
  T *dq = a.dqueries, *dk = a.dkeys, *dv = a.dvalues;
  const int64_t q_size = d.batch * d.heads * d.q_len * d.head_dim;
  const int64_t k_size = d.batch * d.kv_heads * d.kv_len * d.head_dim;
  const int64_t v_size = d.batch * d.kv_heads * d.kv_len * d.value_dim;
  for (int64_t e = 0; e < q_size; ++e) dq[e] = 0;
  for (int64_t e = 0; e < k_size; ++e) dk[e] = 0;
  for (int64_t e = 0; e < v_size; ++e) dv[e] = 0;
  const T scale = static_cast<T>(d.scale);
  std::vector<T> s(d.kv_len);  // (T_k) scores, then probabilities
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const HeadView<T> hv = head_view(d, b, h, q, k, v);
      const int64_t k_offset = hv.k - k, v_offset = hv.v - v;
      for (int64_t i = 0; i < d.q_len; ++i) {
        const int64_t row = hv.row0 + i;
        if (lse[row] == -std::numeric_limits<T>::infinity()) continue;  // no visible key: all zero
        const T* qi = hv.q + i * d.head_dim;     // (D)
        const T* oi = out + row * d.value_dim;   // (D_v)
        const T* doi = dout + row * d.value_dim; // (D_v)
        masked_scores(d, mask, a.scores, b, h, i, qi, hv.k, s.data());
        T delta = 0;  // rowsum(dO * O)
        for (int64_t c = 0; c < d.value_dim; ++c) delta += doi[c] * oi[c];
        for (int64_t j = 0; j < d.kv_len; ++j) {
          const T p = std::exp(s[j] - lse[row]);  // P recomputed; 0 at masked keys
          if (p == 0) continue;
          const T keep = static_cast<T>(attention_dropout_factor(d, row * d.kv_len + j));
          T dp = 0;  // (dO V^T)_ij
          for (int64_t c = 0; c < d.value_dim; ++c) dp += doi[c] * hv.v[j * d.value_dim + c];
          for (int64_t c = 0; c < d.value_dim; ++c) dv[v_offset + j * d.value_dim + c] += p * keep * doi[c];
          T ds = p * (keep * dp - delta);  // dL/dS' of the modified score; then dL/dS
          a.scores.backward(d, h, i, j, 1, &p, lse[row], &ds, T(1), a.drelative_bias);
          for (int64_t c = 0; c < d.head_dim; ++c) {
            dq[row * d.head_dim + c] += scale * ds * hv.k[j * d.head_dim + c];
            dk[k_offset + j * d.head_dim + c] += scale * ds * qi[c];
          }
        }
      }
    }
  }
}

#define TF_INSTANTIATE(T)                                                        \
  template void attention_forward_reference<T>(const AttentionForwardArgs<T>&); \
  template void attention_backward_reference<T>(const AttentionBackwardArgs<T>&);
TF_INSTANTIATE(float)
TF_INSTANTIATE(double)
#undef TF_INSTANTIATE

}  // namespace tf::kernels
