// Reference cross-entropy: one row at a time, sums in double.
#include "framework/kernels/reference/cross_entropy.h"

#include <cmath>

#include "framework/kernels/reference/softmax.h"

namespace tf::kernels {

template <class T>
CrossEntropySums cross_entropy_forward_reference(const CrossEntropyDims& d, const T* logits,
                                                 const int32_t* targets, T* log_sum_exp) {
  CrossEntropySums sums;
  for (int64_t r = 0; r < d.rows; ++r) {
    if (targets[r] == d.ignore_index) continue;
    const T* x = logits + r * d.classes;  // (classes,)
    const auto [m, total] = row_exp_sum(x, d.classes);
    const double log_total = std::log(total);
    log_sum_exp[r] = static_cast<T>(m + log_total);
    sums.loss += log_total - (x[targets[r]] - m);  // the shifted form keeps log_total's precision
    ++sums.count;
  }
  return sums;
}

template <class T>
void cross_entropy_backward_reference(const CrossEntropyDims& d, const T* logits, const int32_t* targets,
                                      const T* log_sum_exp, double g, T* dlogits) {
  for (int64_t r = 0; r < d.rows; ++r) {
    const T* x = logits + r * d.classes;
    T* dx = dlogits + r * d.classes;
    if (targets[r] == d.ignore_index) {
      for (int64_t j = 0; j < d.classes; ++j) dx[j] = 0;
      continue;
    }
    for (int64_t j = 0; j < d.classes; ++j)
      dx[j] = static_cast<T>(g * (std::exp(static_cast<double>(x[j]) - log_sum_exp[r]) - (j == targets[r])));
  }
}

template CrossEntropySums cross_entropy_forward_reference<float>(const CrossEntropyDims&, const float*,
                                                                 const int32_t*, float*);
template CrossEntropySums cross_entropy_forward_reference<double>(const CrossEntropyDims&, const double*,
                                                                  const int32_t*, double*);
template void cross_entropy_backward_reference<float>(const CrossEntropyDims&, const float*, const int32_t*,
                                                      const float*, double, float*);
template void cross_entropy_backward_reference<double>(const CrossEntropyDims&, const double*, const int32_t*,
                                                       const double*, double, double*);

}  // namespace tf::kernels
