// Fast float32 attention: batched oneDNN matmuls (two forward; five backward, Q K^T recomputed)
// around OpenMP row loops. Grouped-query heads ride along for free: Q, O and S viewed per
// key/value head are (B * H_kv, (H / H_kv) * T_q, .) matrices (see kernels/reference/attention.h).
#include "framework/kernels/cpu/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "framework/kernels/cpu/softmax.h"
#include "framework/kernels/matmul.h"

namespace tf::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Per-thread scratch that grows to the largest problem seen and is then reused, so a steady
// training step allocates nothing here.
float* workspace(int slot, int64_t n) {
  thread_local std::vector<float> buffers[2];
  if (static_cast<int64_t>(buffers[slot].size()) < n) buffers[slot].resize(n);
  return buffers[slot].data();
}

bool degenerate(const AttentionDims& d) {
  return d.batch * d.heads * d.q_len * d.kv_len * d.head_dim * d.value_dim == 0;
}

// C = op(A) op(B) for every key/value head: batch B * H_kv.
void head_matmul(const AttentionDims& d, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                 const float* a, const float* b, float* c) {
  MatmulDims md;
  md.batch = d.batch * d.kv_heads;
  md.m = m;
  md.n = n;
  md.k = k;
  md.trans_a = trans_a;
  md.trans_b = trans_b;
  matmul_fast(md, a, b, c);
}

// Row r of (B, H, T_q) belongs to batch entry r / (H T_q), head (r / T_q) % H and query position r % T_q.
struct Row {
  int64_t b, h, i;
};
inline Row row_of(const AttentionDims& d, int64_t r) {
  return {r / (d.heads * d.q_len), (r / d.q_len) % d.heads, r % d.q_len};
}

// Keeps the OpenMP fork out of tiny problems (decoding one token, unit tests).
bool parallel_worth_it(const AttentionDims& d) { return d.batch * d.heads * d.q_len * d.kv_len > 4096; }

// Scales raw scores q.k of query row (b, h, i), applies the score modifiers and sets masked ones to
// -inf (Notes [attention masks] and [attention variants]): first the position run
// [key_begin, key_end), then the per-key padding. Returns the row's max.
float mask_and_scale_row(const AttentionDims& d, const AttentionMask& mask, const AttentionScores& scores, const Row& row,
                         float* s) {
  const int64_t begin = mask.key_begin(d, row.i), end = mask.key_end(d, row.i), b = row.b;
  const float scale = static_cast<float>(d.scale);
  for (int64_t j = 0; j < begin; ++j) s[j] = kNegInf;
  for (int64_t j = begin; j < end; ++j) s[j] = scale * s[j];
  if (end > begin) scores.modify(d, row.h, row.i, begin, end - begin, s + begin);
  if (end > begin) mask.mask_sparse(d, row.i, begin, end - begin, s + begin);
  for (int64_t j = end > begin ? end : begin; j < d.kv_len; ++j) s[j] = kNegInf;
  if (mask.key_keep) {
    const uint8_t* keep = mask.key_keep + b * d.kv_len;
    for (int64_t j = begin; j < end; ++j) s[j] = keep[j] ? s[j] : kNegInf;
  }
  return row_max(s, d.kv_len);
}

// s[j] *= the dropout keep factor of P's element row * T_k + j (kernels/reference/attention.h).
void dropout_row(const AttentionDims& d, int64_t r, float* s) {
  for (int64_t j = 0; j < d.kv_len; ++j) s[j] *= static_cast<float>(attention_dropout_factor(d, r * d.kv_len + j));
}

}  // namespace

void attention_forward_fast(const AttentionForwardArgs<float>& a) {
  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  const float *q = a.queries, *k = a.keys, *v = a.values;
  float *out = a.out, *lse = a.lse, *probs = a.probs;
  if (degenerate(d)) return attention_forward_reference(a);
  const int64_t rows = d.batch * d.heads * d.q_len, gq = d.group() * d.q_len;
  // With no dropout the probabilities the caller wants are exactly those multiplied into V.
  float* p = (probs && d.dropout == 0) ? probs : workspace(0, rows * d.kv_len);  // (B, H, T_q, T_k)
  head_matmul(d, gq, d.kv_len, d.head_dim, false, true, q, k, p);                // raw Q K^T

#pragma omp parallel for schedule(static) if (parallel_worth_it(d))
  for (int64_t r = 0; r < rows; ++r) {
    const Row row = row_of(d, r);
    float* s = p + r * d.kv_len;  // (T_k)
    const float max = mask_and_scale_row(d, mask, a.scores, row, s);
    if (max == kNegInf) {  // no visible key: Note [attention masks]
      for (int64_t j = 0; j < d.kv_len; ++j) s[j] = 0;
      lse[r] = kNegInf;
    } else {
      const float sum = exp_shifted(s, max, d.kv_len, s), inv = 1.0f / sum;  // masked keys: exp(-inf) = 0
      for (int64_t j = 0; j < d.kv_len; ++j) s[j] *= inv;
      lse[r] = max + std::log(sum);
    }
    if (p != probs && probs)
      for (int64_t j = 0; j < d.kv_len; ++j) probs[r * d.kv_len + j] = s[j];
    if (d.dropout > 0) dropout_row(d, r, s);
  }

  head_matmul(d, gq, d.value_dim, d.kv_len, false, false, p, v, out);  // O = dropout(P) V
}

void attention_backward_fast(const AttentionBackwardArgs<float>& a) {
  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  const float *q = a.queries, *k = a.keys, *v = a.values, *out = a.out, *lse = a.lse, *dout = a.dout;
  float *dq = a.dqueries, *dk = a.dkeys, *dv = a.dvalues;
  if (degenerate(d)) return attention_backward_reference(a);
  const int64_t rows = d.batch * d.heads * d.q_len, gq = d.group() * d.q_len;
  float* p = workspace(0, rows * d.kv_len);   // (B, H, T_q, T_k) P
  float* ds = workspace(1, rows * d.kv_len);  // (B, H, T_q, T_k) dropout(P), then dP, then dS
  const bool parallel = parallel_worth_it(d);
  head_matmul(d, gq, d.kv_len, d.head_dim, false, true, q, k, p);  // raw Q K^T

  // P = exp(scale S - lse), recomputed rather than stored (FlashAttention's trade of flops for memory).
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    const Row row = row_of(d, r);
    float* s = p + r * d.kv_len;  // (T_k)
    if (lse[r] == kNegInf) {      // no visible key: P = 0
      for (int64_t j = 0; j < d.kv_len; ++j) s[j] = 0;
    } else {
      mask_and_scale_row(d, mask, a.scores, row, s);
      exp_shifted(s, lse[r], d.kv_len, s);
    }
    if (d.dropout > 0) {
      float* sd = ds + r * d.kv_len;  // (T_k)
      for (int64_t j = 0; j < d.kv_len; ++j) sd[j] = s[j];
      dropout_row(d, r, sd);
    }
  }

  // dV = dropout(P)^T dO, summed over the group's query heads by the matmul's inner dimension.
  head_matmul(d, d.kv_len, d.value_dim, gq, true, false, d.dropout > 0 ? ds : p, dout, dv);
  head_matmul(d, gq, d.kv_len, d.value_dim, false, true, dout, v, ds);  // dP (before dropout') = dO V^T

#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    const float* o = out + r * d.value_dim;    // (D_v)
    const float* g = dout + r * d.value_dim;   // (D_v)
    float delta = 0;                           // rowsum(dO * O)
    for (int64_t c = 0; c < d.value_dim; ++c) delta += g[c] * o[c];
    const float* pr = p + r * d.kv_len;  // (T_k)
    float* dr = ds + r * d.kv_len;       // (T_k) dP -> scale dS
    const float scale = static_cast<float>(d.scale);
    if (d.dropout > 0) dropout_row(d, r, dr);
    for (int64_t j = 0; j < d.kv_len; ++j) dr[j] = scale * pr[j] * (dr[j] - delta);
    const Row row = row_of(d, r);
    const int64_t begin = mask.key_begin(d, row.i), end = mask.key_end(d, row.i);
    if (end > begin) a.scores.chain(end - begin, pr + begin, lse[r], dr + begin);  // through the modifiers
  }

  // Learned modifiers (T5's table): their gradient is dS summed by bucket. One thread per head, so no
  // two add into the same row of the table.
  if (a.drelative_bias) {
    const float inv_scale = static_cast<float>(1.0 / d.scale);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t b = 0; b < d.batch; ++b)
        for (int64_t i = 0; i < d.q_len; ++i) {
          const int64_t r = (b * d.heads + h) * d.q_len + i, begin = mask.key_begin(d, i), end = mask.key_end(d, i);
          a.scores.add_param_grads(d, h, i, begin, end - begin, ds + r * d.kv_len + begin, inv_scale, a.drelative_bias);
        }
  }
  head_matmul(d, gq, d.head_dim, d.kv_len, false, false, ds, k, dq);      // dQ = scale dS K
  head_matmul(d, d.kv_len, d.head_dim, gq, true, false, ds, q, dk);       // dK = scale dS^T Q
}

}  // namespace tf::kernels
