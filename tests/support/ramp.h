// ramp(n, modulo): n token ids spread over [0, modulo) by a fixed stride (7919, a prime), the same on
// every machine: test data for token files and corpora.
#pragma once
#include <cstdint>
#include <vector>

namespace tf::testing {

inline std::vector<int32_t> ramp(int64_t n, int32_t modulo) {
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7919 + 3) % modulo);
  return ids;
}

}  // namespace tf::testing
