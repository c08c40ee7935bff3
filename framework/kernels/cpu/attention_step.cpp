// The decoding step's attention kernel; see attention_step.h.
#include "framework/kernels/cpu/attention_step.h"

#include <cmath>
#include <limits>
#include <vector>

#include "framework/error.h"
#include "framework/kernels/cpu/exp.h"

namespace tf::kernels {

void attention_step_fast(const AttentionForwardArgs<float>& a) {
  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  TF_CHECK(d.batch == 1 && d.kv_heads == 1 && !mask.key_keep && d.dropout == 0 && !a.probs,
           "attention_step_fast: one key/value head, no padding, no dropout, no probabilities");
  const int64_t D = d.head_dim, Dv = d.value_dim;
  const float scale = static_cast<float>(d.scale);
  thread_local std::vector<float> scores;  // (T_k), reused across steps
  if (static_cast<int64_t>(scores.size()) < d.kv_len) scores.resize(d.kv_len);
  float* s = scores.data();
  for (int64_t r = 0; r < d.heads * d.q_len; ++r) {
    const int64_t i = r % d.q_len, begin = mask.key_begin(d, i), end = mask.key_end(d, i);
    const float* qi = a.queries + r * D;
    float* oi = a.out + r * Dv;  // (D_v)
    for (int64_t c = 0; c < Dv; ++c) oi[c] = 0;
    if (end <= begin) {  // no visible key: output 0 (Note [attention masks])
      if (a.lse) a.lse[r] = -std::numeric_limits<float>::infinity();
      continue;
    }
    for (int64_t j = begin; j < end; ++j) {
      const float* kj = a.keys + j * D;
      float dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t c = 0; c < D; ++c) dot += qi[c] * kj[c];
      s[j] = scale * dot;
    }
    a.scores.modify(d, r / d.q_len, i, begin, end - begin, s + begin);  // Note [attention variants]
    mask.mask_sparse(d, i, begin, end - begin, s + begin);  // the window's own key always stays
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t j = begin; j < end; ++j) max = s[j] > max ? s[j] : max;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = begin; j < end; ++j) {
      s[j] = exp_fast(s[j] - max);  // <= 1: the max is subtracted so nothing overflows
      sum += s[j];
    }
    const float inv_sum = 1.0f / sum;
    for (int64_t j = begin; j < end; ++j) {
      const float p = s[j] * inv_sum;
      const float* vj = a.values + j * Dv;
#pragma omp simd
      for (int64_t c = 0; c < Dv; ++c) oi[c] += p * vj[c];
    }
    if (a.lse) a.lse[r] = max + std::log(sum);
  }
}

}  // namespace tf::kernels
