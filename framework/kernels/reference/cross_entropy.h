// Reference kernels of the fused softmax + negative log-likelihood (cross-entropy) over the rows of
// (rows, classes) logits with one i32 target class per row. Plain loops with std::exp, sums in
// double: the oracle for kernels/cpu/cross_entropy.h and the float64 path.
//
//   forward, per row r with target t_r != ignore_index:
//     log_sum_exp[r] = m_r + log sum_j exp(logits[r, j] - m_r),   m_r = max_j logits[r, j]
//     loss_r         = log_sum_exp[r] - logits[r, t_r]             (= -log softmax(logits[r])[t_r])
//   backward, with g = dloss / count (mean) or dloss (sum):
//     dlogits[r, j]  = g * (exp(logits[r, j] - log_sum_exp[r]) - [j == t_r]),  0 on ignored rows
// Targets are checked by the op before these run (ops/cross_entropy.cpp).
#pragma once
#include <cstdint>

namespace tf::kernels {

struct CrossEntropyDims {
  int64_t rows = 0, classes = 0;
  int32_t ignore_index = -100;
};

struct CrossEntropySums {
  double loss = 0;    // sum of loss_r over the rows that count
  int64_t count = 0;  // rows whose target is not ignore_index
};

// Fills log_sum_exp (rows,) for every counted row (ignored rows are left untouched).
template <class T>
CrossEntropySums cross_entropy_forward_reference(const CrossEntropyDims& d, const T* logits,
                                                 const int32_t* targets, T* log_sum_exp);
template <class T>
void cross_entropy_backward_reference(const CrossEntropyDims& d, const T* logits, const int32_t* targets,
                                      const T* log_sum_exp, double g, T* dlogits);

}  // namespace tf::kernels
