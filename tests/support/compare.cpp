// all_close and max_abs_diff for tests.
#include "support/compare.h"

#include <algorithm>
#include <cmath>

namespace tf::testing {

::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << a.shape() << " vs " << b.shape();
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  double worst = 0;
  size_t worst_i = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    const double excess = std::abs(va[i] - vb[i]) - (atol + rtol * std::abs(vb[i]));
    if (!(excess <= 0)) {  // also catches NaN
      ++bad;
      if (!(excess <= worst)) worst = excess, worst_i = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << va.size() << " elements differ; worst at flat index "
                                       << worst_i << ": " << va[worst_i] << " vs " << vb[worst_i]
                                       << " (rtol " << rtol << ", atol " << atol << ")";
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  double m = 0;
  for (size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - vb[i]));
  return m;
}

}  // namespace tf::testing
