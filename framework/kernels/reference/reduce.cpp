// Reference sum over the middle axis of (outer, reduce, inner), and its broadcast-back gradient.
#include "framework/kernels/reference/reduce.h"

#include <algorithm>
#include <vector>

namespace tf::kernels {

template <class T>
void reduce_sum_reference(const ReduceDims& d, const T* x, T* out, double scale) {
  std::vector<double> acc(d.inner);  // (inner,) running sums of one outer slice
  for (int64_t o = 0; o < d.outer; ++o) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const T* slice = x + o * d.reduce * d.inner;  // (reduce, inner)
    for (int64_t r = 0; r < d.reduce; ++r)
      for (int64_t i = 0; i < d.inner; ++i) acc[i] += slice[r * d.inner + i];
    for (int64_t i = 0; i < d.inner; ++i) out[o * d.inner + i] = static_cast<T>(scale * acc[i]);
  }
}

template <class T>
void reduce_sum_backward_reference(const ReduceDims& d, const T* dout, T* dx, double scale) {
  const T s = static_cast<T>(scale);
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t r = 0; r < d.reduce; ++r)
      for (int64_t i = 0; i < d.inner; ++i) dx[(o * d.reduce + r) * d.inner + i] = s * dout[o * d.inner + i];
}

template void reduce_sum_reference<float>(const ReduceDims&, const float*, float*, double);
template void reduce_sum_reference<double>(const ReduceDims&, const double*, double*, double);
template void reduce_sum_backward_reference<float>(const ReduceDims&, const float*, float*, double);
template void reduce_sum_backward_reference<double>(const ReduceDims&, const double*, double*, double);

}  // namespace tf::kernels
