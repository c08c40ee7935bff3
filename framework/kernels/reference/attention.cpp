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

double alibi_slope(int64_t h, int64_t heads) {
  int64_t n = 1;  // the largest power of two <= heads
  while (2 * n <= heads) n *= 2;
  if (h < n) return std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(n));
  return std::exp2(-4.0 * static_cast<double>(2 * (h - n) + 1) / static_cast<double>(n));
}

int64_t t5_bucket(int64_t n, bool bidirectional, int64_t buckets, int64_t max_distance) {
  int64_t bucket = 0, nb = buckets;
  if (bidirectional) {
    nb /= 2;
    if (n < 0) bucket = nb;  // keys after the query: the upper half
    n = n < 0 ? -n : n;
  } else {
    n = n < 0 ? 0 : n;
  }
  const int64_t exact = nb / 2;
  if (n < exact) return bucket + n;
  const double spread = std::log(static_cast<double>(n) / exact) / std::log(static_cast<double>(max_distance) / exact);
  const auto large = exact + static_cast<int64_t>(spread * static_cast<double>(nb - exact));
  return bucket + (large < nb - 1 ? large : nb - 1);
}

void relative_bucket_table(const AttentionVariant& variant, bool causal, int64_t kv_len, int32_t* out) {
  if (variant.relative_buckets <= 0) return;
  for (int64_t n = -(kv_len - 1); n < kv_len; ++n)
    out[n + kv_len - 1] = static_cast<int32_t>(t5_bucket(n, !causal, variant.relative_buckets, variant.relative_max_distance));
}

std::vector<int32_t> relative_bucket_table(const AttentionVariant& variant, bool causal, int64_t kv_len) {
  if (variant.relative_buckets <= 0 || kv_len <= 0) return {};
  std::vector<int32_t> table(2 * kv_len - 1);
  relative_bucket_table(variant, causal, kv_len, table.data());
  return table;
}

namespace {

// BigBird: whether key block kb is one of query block qb's random blocks. The r draws depend on
// (seed, qb, draw) only, so a decoding step sees the blocks the full forward saw; causal draws pick
// among blocks 0 .. qb, bidirectional ones among all `blocks`.
bool random_block(const AttentionVariant& v, bool causal, int64_t qb, int64_t kb, int64_t blocks) {
  const int64_t choices = causal ? qb + 1 : blocks;
  for (int64_t r = 0; r < v.random_blocks; ++r) {
    const auto e = static_cast<uint64_t>(qb * v.random_blocks + r);
    if (static_cast<int64_t>(uniform_at(v.random_seed, e) * static_cast<double>(choices)) == kb) return true;
  }
  return false;
}

}  // namespace

bool AttentionMask::sparse_allowed(const AttentionDims& d, int64_t i, int64_t j) const {
  if (j >= window_begin(d, i) && j < window_end(d, i)) return true;
  const int64_t p = query_position(d, i), g = variant.global_tokens;
  if (causal && j > p) return false;
  if (j < g || p < g) return true;  // Longformer's global tokens
  if (variant.random_blocks <= 0) return false;
  const int64_t bs = variant.sparse_block, blocks = (d.kv_len + bs - 1) / bs;
  return random_block(variant, causal, p / bs, j / bs, blocks);
}

bool AttentionMask::block_allowed(const AttentionDims& d, int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
  if (!sparse() || i0 >= i1 || j0 >= j1) return i0 < i1 && j0 < j1;
  const int64_t p0 = query_position(d, i0), p1 = query_position(d, i1 - 1), g = variant.global_tokens;
  if (causal && j0 > p1) return false;
  if (j0 < g || p0 < g) return true;
  if (window_begin(d, i0) < j1 && window_end(d, i1 - 1) > j0) return true;  // the runs move right with i
  if (variant.random_blocks <= 0) return false;
  const int64_t bs = variant.sparse_block, blocks = (d.kv_len + bs - 1) / bs;
  for (int64_t qb = p0 / bs; qb <= p1 / bs; ++qb)
    for (int64_t kb = j0 / bs; kb <= (j1 - 1) / bs; ++kb)
      if (random_block(variant, causal, qb, kb, blocks)) return true;
  return false;
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
T masked_scores(const AttentionDims& d, const AttentionMask& mask, int64_t b, int64_t h, int64_t i, const T* qi,
                const T* k, T* s /* (T_k) */) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  T max = neg_inf;
  const int64_t begin = mask.key_begin(d, i), end = mask.key_end(d, i);
  for (int64_t j = 0; j < d.kv_len; ++j) {
    s[j] = neg_inf;
    if (j < begin || j >= end || !mask.key_visible(b, d, j) || !mask.key_allowed(d, i, j)) continue;
    T dot = 0;
    for (int64_t c = 0; c < d.head_dim; ++c) dot += qi[c] * k[j * d.head_dim + c];
    s[j] = static_cast<T>(d.scale) * dot;
    mask.add_score_bias(d, h, i, j, 1, &s[j]);
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
        const T max = masked_scores(d, mask, b, h, i, hv.q + i * d.head_dim, hv.k, s.data());
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
        masked_scores(d, mask, b, h, i, qi, hv.k, s.data());
        T delta = 0;  // rowsum(dO * O)
        for (int64_t c = 0; c < d.value_dim; ++c) delta += doi[c] * oi[c];
        for (int64_t j = 0; j < d.kv_len; ++j) {
          const T p = std::exp(s[j] - lse[row]);  // P recomputed; 0 at masked keys
          if (p == 0) continue;
          const T keep = static_cast<T>(attention_dropout_factor(d, row * d.kv_len + j));
          T dp = 0;  // (dO V^T)_ij
          for (int64_t c = 0; c < d.value_dim; ++c) dp += doi[c] * hv.v[j * d.value_dim + c];
          for (int64_t c = 0; c < d.value_dim; ++c) dv[v_offset + j * d.value_dim + c] += p * keep * doi[c];
          const T ds = p * (keep * dp - delta);
          if (a.drelative_bias) mask.add_score_bias_grad(d, h, i, j, 1, &ds, T(1), a.drelative_bias);
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
