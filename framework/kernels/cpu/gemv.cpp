// Single-threaded float32 gemv over a block of rows; see cpu/gemv.h.
#include "framework/kernels/cpu/gemv.h"

#include <omp.h>

#include <algorithm>

#include "framework/kernels/matmul.h"

namespace tf::kernels {

namespace {

// Dot products of kRows consecutive rows with x. Each row's sum is its own vector accumulator, so
// kRows independent FMA chains hide the FMA latency, and x (in L1) is loaded once per kRows rows.
// The weights stream from memory once: a decoding step is bound by that stream, not by the FMAs.
template <int kRows>
void dot_rows(int64_t k, const float* w, int64_t ldw, const float* x, float* sums) {
  float s[kRows] = {};
  const float* rows[kRows];
  for (int r = 0; r < kRows; ++r) rows[r] = w + r * ldw;
  if constexpr (kRows == 4) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    const float *w0 = rows[0], *w1 = rows[1], *w2 = rows[2], *w3 = rows[3];
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int64_t i = 0; i < k; ++i) {
      s0 += w0[i] * x[i];
      s1 += w1[i] * x[i];
      s2 += w2[i] * x[i];
      s3 += w3[i] * x[i];
    }
    s[0] = s0, s[1] = s1, s[2] = s2, s[3] = s3;
  } else {
    for (int r = 0; r < kRows; ++r) {
      float acc = 0;
      const float* wr = rows[r];
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < k; ++i) acc += wr[i] * x[i];
      s[r] = acc;
    }
  }
  for (int r = 0; r < kRows; ++r) sums[r] = s[r];
}

}  // namespace

void gemv_threaded(int64_t n, int64_t k, const float* w, const float* x, const float* bias, float* y) {
  constexpr int64_t kParallelMin = 16 * 1024;  // weights (floats) worth a fork
#pragma omp parallel if (n * k >= kParallelMin)
  {
    const int64_t p = omp_get_num_threads(), t = omp_get_thread_num();
    // Blocks of whole 16-row groups, so each thread's rows start on their own cache lines of y.
    const int64_t groups = (n + 15) / 16, begin = std::min(n, groups * t / p * 16),
                  end = std::min(n, groups * (t + 1) / p * 16);
    if (end > begin) gemv_fast(end - begin, k, w + begin * k, k, x, bias ? bias + begin : nullptr, y + begin);
  }
}

void gemv_fast(int64_t n, int64_t k, const float* w, int64_t ldw, const float* x, const float* bias, float* y) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) dot_rows<4>(k, w + j * ldw, ldw, x, y + j);
  for (; j < n; ++j) dot_rows<1>(k, w + j * ldw, ldw, x, y + j);
  if (bias)
    for (j = 0; j < n; ++j) y[j] += bias[j];
}

void matmul_one_row(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias) {
  // c (n) = W a + bias with W = b (n, k) when trans_b: rows of W are contiguous. The other cases
  // (a (1, k) times a (k, n) matrix, or accumulating) come from no decoding step: oneDNN serves them.
  if (d.trans_b && !d.accumulate) return gemv_threaded(d.n, d.k, b, a, bias, c);
  matmul_onednn(d, a, b, c, bias);
}

}  // namespace tf::kernels
