// Fused decoding-step kernels; see decode_step.h.
#include "framework/kernels/cpu/decode_step.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "framework/kernels/cpu/activation.h"
#include "framework/kernels/cpu/attention_step.h"
#include "framework/kernels/cpu/gemv.h"
#include "framework/storage_pool.h"

namespace tf::kernels {

namespace {

// Thread t's share [begin, end) of n units among p threads; inner boundaries are multiples of
// `align` (16 floats: a block of columns then starts on its own 64-byte line).
struct Share {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};
Share share(int64_t n, int t, int p, int64_t align) {
  auto cut = [&](int i) { return std::min(n, (n * i / p + align - 1) / align * align); };
  return {cut(t), cut(t + 1)};
}

// A fork costs more than it saves below ~64 KB of weights (as kernels::gemv_threaded).
bool worth_threads(int64_t weights) { return weights >= 16 * 1024; }

const float* offset_or_null(const float* p, int64_t offset) { return p ? p + offset : nullptr; }

// part (n) = W[:, cols] x_cols, W (n, ldw) row-major: one thread's share of a product split by its
// input columns; zeros when the thread has no columns.
void partial_gemv(int64_t n, Share cols, const float* w, int64_t ldw, const float* x_cols, float* part) {
  if (cols.size() == 0) {
    std::fill(part, part + n, 0.0f);
    return;
  }
  gemv_fast(n, cols.size(), w + cols.begin, ldw, x_cols, nullptr, part);
}

// out (n) = bias + the p partial products (p, n), added in thread order.
void sum_partials(const float* parts, int p, const float* bias, int64_t n, float* out) {
  for (int64_t c = 0; c < n; ++c) {
    float sum = bias ? bias[c] : 0.0f;
    for (int u = 0; u < p; ++u) sum += parts[u * n + c];
    out[c] = sum;
  }
}

// The RoPE rotation of `rows` rows of D values at one position (ops::rope, RoFormer eq. 34).
void rotate_rows(float* x, int64_t rows, int64_t D, const float* cos, const float* sin) {
  for (int64_t r = 0; r < rows; ++r, x += D)
    for (int64_t i = 0; i < D / 2; ++i) {
      const float x0 = x[2 * i], x1 = x[2 * i + 1];
      x[2 * i] = x0 * cos[i] - x1 * sin[i];
      x[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
    }
}

}  // namespace

void attention_layer_step_fast(const AttentionLayerStepArgs& a) {
  const int64_t C = a.d_model, H = a.heads, G = a.kv_heads, D = a.head_dim, Hg = H / G, L = a.capacity;
  AttentionDims d;  // one key/value group: its Hg query heads, one new query row
  d.heads = Hg;
  d.q_len = 1;
  d.kv_len = a.cached + 1;
  d.head_dim = D;
  d.value_dim = D;
  d.scale = 1.0 / std::sqrt(static_cast<double>(D));  // as ops::attention: Vaswani et al. 2017, eq. 1

  // Taken before the region, so nothing inside it allocates or throws.
  const int max_threads = omp_get_max_threads();
  storage_pool::Scratch<float> queries(max_threads * Hg * D);  // per thread: one group's (Hg, D)
  storage_pool::Scratch<float> heads(H * D);                   // (H D): each thread writes its own heads
  storage_pool::Scratch<float> parts(max_threads * C);         // (P, C)
  int threads = 1;
#pragma omp parallel if (worth_threads(C * (H + 2 * G) * D))
  {
    const int p = omp_get_num_threads(), t = omp_get_thread_num();
#pragma omp single nowait
    threads = p;
    const Share groups = share(G, t, p, 1);
    float* q = queries.data() + t * Hg * D;  // (Hg, D)
    for (int64_t g = groups.begin; g < groups.end; ++g) {
      const int64_t q_row = g * Hg * D, k_row = H * D + g * D, v_row = (H + G) * D + g * D;
      float* k_new = a.keys + (g * L + a.cached) * D;    // (D): this position's row of the cache
      float* v_new = a.values + (g * L + a.cached) * D;  // (D)
      gemv_fast(Hg * D, C, a.w_qkv + q_row * C, C, a.x, offset_or_null(a.b_qkv, q_row), q);
      gemv_fast(D, C, a.w_qkv + k_row * C, C, a.x, offset_or_null(a.b_qkv, k_row), k_new);
      gemv_fast(D, C, a.w_qkv + v_row * C, C, a.x, offset_or_null(a.b_qkv, v_row), v_new);
      if (a.rope_cos) {
        rotate_rows(q, Hg, D, a.rope_cos, a.rope_sin);
        rotate_rows(k_new, 1, D, a.rope_cos, a.rope_sin);
      }
      AttentionScores scores = AttentionScores::of(a.variant);
      scores.first_head = g * Hg;
      scores.model_heads = H;
      scores.relative_bias = a.relative_bias;
      scores.bucket_of = a.bucket_of;
      attention_step_fast({.dims = d, .mask = AttentionMask::of(a.variant, true), .scores = scores, .queries = q, .keys = a.keys + g * L * D,
                           .values = a.values + g * L * D, .out = heads.data() + q_row});
    }
    // Output projection over this thread's heads: the columns of W_O it computed the inputs of.
    const Share cols{groups.begin * Hg * D, groups.end * Hg * D};
    partial_gemv(C, cols, a.w_proj, H * D, heads.data() + cols.begin, parts.data() + t * C);
  }
  sum_partials(parts.data(), threads, a.b_proj, C, a.out);
}

void mlp_step_fast(const MlpStepArgs& a) {
  const int64_t C = a.d_model, F = a.hidden;
  const int max_threads = omp_get_max_threads();
  storage_pool::Scratch<float> hidden(F);               // (F): each thread writes its own units
  storage_pool::Scratch<float> parts(max_threads * C);  // (P, C)
  int threads = 1;
#pragma omp parallel if (worth_threads(2 * C * F))
  {
    const int p = omp_get_num_threads(), t = omp_get_thread_num();
#pragma omp single nowait
    threads = p;
    const Share units = share(F, t, p, 16);
    float* h = hidden.data() + units.begin;
    if (units.size() > 0) {
      gemv_fast(units.size(), C, a.w_fc + units.begin * C, C, a.x, offset_or_null(a.b_fc, units.begin), h);
      gelu_forward_fast(a.approx, h, nullptr, 1, units.size(), h);
    }
    partial_gemv(C, units, a.w_proj, F, h, parts.data() + t * C);
  }
  sum_partials(parts.data(), threads, a.b_proj, C, a.out);
}

}  // namespace tf::kernels
