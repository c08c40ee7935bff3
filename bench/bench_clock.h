// The clock and the median shared by the benchmarks: wall time, or process CPU time (all threads),
// which stays meaningful on a busy machine (--clock cpu).
#pragma once
#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace tf::bench {

inline bool g_cpu_clock = false;  // --clock cpu

inline double now_seconds() {
  if (g_cpu_clock) {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace tf::bench
