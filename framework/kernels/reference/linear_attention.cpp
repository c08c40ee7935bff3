// Reference masked kernel product (kernels/reference/linear_attention.h): every pair, in double.
#include "framework/kernels/reference/linear_attention.h"

#include <vector>

namespace tf::kernels {

template <class T>
void kernel_product_reference(const KernelProductArgs<T>& args) {
  const auto& [order, seq_len, a_width, c_width, a, b, c, out, state] = args;
  std::vector<double> row(c_width);
  for (int64_t i = 0; i < seq_len; ++i) {
    const int64_t first = order == ProductOrder::anticausal ? i : 0;
    const int64_t last = order == ProductOrder::causal ? i : seq_len - 1;
    row.assign(c_width, 0.0);
    for (int64_t j = first; j <= last; ++j) {
      double weight = 0;  // a[i] . b[j]
      for (int64_t d = 0; d < a_width; ++d) weight += static_cast<double>(a[i * a_width + d]) * b[j * a_width + d];
      for (int64_t e = 0; e < c_width; ++e) row[e] += weight * c[j * c_width + e];
    }
    for (int64_t e = 0; e < c_width; ++e) out[i * c_width + e] = static_cast<T>(row[e]);
  }
}

template void kernel_product_reference<float>(const KernelProductArgs<float>&);
template void kernel_product_reference<double>(const KernelProductArgs<double>&);

}  // namespace tf::kernels
