// Kernel selection: float32 ops use the fast kernels unless a ReferenceKernelsGuard is alive on
// this thread (tests use it to compare the fast path with the reference; float64 is always
// reference).
#pragma once

namespace tf::kernels {

bool reference_forced();
class ReferenceKernelsGuard {
 public:
  ReferenceKernelsGuard();
  ~ReferenceKernelsGuard();
  ReferenceKernelsGuard(const ReferenceKernelsGuard&) = delete;
  ReferenceKernelsGuard& operator=(const ReferenceKernelsGuard&) = delete;

 private:
  bool previous_;
};

// True when a float op should take its fast kernel.
template <class T>
bool use_fast() {
  if constexpr (sizeof(T) == sizeof(float)) return !reference_forced();
  return false;
}

}  // namespace tf::kernels
