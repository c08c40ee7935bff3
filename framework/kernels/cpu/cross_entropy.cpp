// Fast float32 cross-entropy: one row per OpenMP iteration; row losses summed across rows in double.
#include "framework/kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "framework/kernels/cpu/softmax.h"

namespace tf::kernels {

CrossEntropySums cross_entropy_forward_fast(const CrossEntropyDims& d, const float* logits,
                                            const int32_t* targets, float* log_sum_exp) {
  // The row losses are summed in fixed blocks of rows, added in order: the same bits for any
  // thread count (an OpenMP reduction adds per-thread sums, whose split follows the thread count).
  constexpr int64_t kBlocks = 64;
  const int64_t block_rows = (d.rows + kBlocks - 1) / kBlocks;
  std::array<double, kBlocks> block_loss{};
  std::array<int64_t, kBlocks> block_count{};
#pragma omp parallel for schedule(static) if (worth_threads(d.rows, d.classes))
  for (int64_t block = 0; block < kBlocks; ++block) {
    double loss = 0;
    int64_t count = 0;
    for (int64_t r = block * block_rows; r < std::min(d.rows, (block + 1) * block_rows); ++r) {
      if (targets[r] == d.ignore_index) continue;
      const float* x = logits + r * d.classes;  // (classes,)
      const float m = row_max(x, d.classes);
      const float log_total = std::log(sum_exp_shifted(x, m, d.classes));
      log_sum_exp[r] = m + log_total;
      loss += static_cast<double>(log_total) - (x[targets[r]] - m);
      ++count;
    }
    block_loss[block] = loss;
    block_count[block] = count;
  }
  CrossEntropySums sums{0, 0};
  for (int64_t block = 0; block < kBlocks; ++block) {
    sums.loss += block_loss[block];
    sums.count += block_count[block];
  }
  return sums;
}

void cross_entropy_backward_fast(const CrossEntropyDims& d, const float* logits, const int32_t* targets,
                                 const float* log_sum_exp, double g, float* dlogits) {
  const float gf = static_cast<float>(g);
#pragma omp parallel for schedule(static) if (worth_threads(d.rows, d.classes))
  for (int64_t r = 0; r < d.rows; ++r) {
    const float* x = logits + r * d.classes;
    float* dx = dlogits + r * d.classes;
    const int32_t t = targets[r];
    if (t == d.ignore_index) {
#pragma omp simd
      for (int64_t j = 0; j < d.classes; ++j) dx[j] = 0.0f;
      continue;
    }
    const float lse = log_sum_exp[r];
#pragma omp simd
    for (int64_t j = 0; j < d.classes; ++j) dx[j] = gf * exp_fast(x[j] - lse);  // g * softmax
    dx[t] -= gf;
  }
}

}  // namespace tf::kernels
