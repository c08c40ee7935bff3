// Kernel selection: float32 ops use the fast kernels unless a ReferenceKernelsGuard is alive on
// this thread (tests use it to compare the fast path with the reference; float64 is always
// reference); and, process-wide, whether results must not depend on the number of threads and
// whether matmuls multiply in bfloat16.
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

// While a DeterministicScope is alive (train.deterministic), every kernel gives the same bits for
// any number of OpenMP threads: work whose summation order would follow the thread count (oneDNN's
// matmuls, which split the inner dimension over threads when the output is small) is cut into
// pieces by shape alone, each computed by one thread. Reductions of our own kernels are in fixed
// blocks always (cheap), so they need no switch. Process-wide, not per thread: the pieces run on
// OpenMP's worker threads.
bool deterministic();
class DeterministicScope {
 public:
  explicit DeterministicScope(bool on);
  ~DeterministicScope();
  DeterministicScope(const DeterministicScope&) = delete;
  DeterministicScope& operator=(const DeterministicScope&) = delete;

 private:
  bool previous_;
};

// While a Bf16MatmulScope is alive (train.matmul_precision: bf16), the fast float matmuls multiply A
// and B rounded to bfloat16, accumulating and writing float32 (Note [bfloat16 matmuls] in
// kernels/onednn.cpp). Process-wide like DeterministicScope, for the same reason. The reference
// kernels stay float32; training sets the scope around a step's forward and backward only, so that
// evaluation, sampling and the optimizer multiply in float32.
bool bf16_matmuls();
class Bf16MatmulScope {
 public:
  explicit Bf16MatmulScope(bool on);
  ~Bf16MatmulScope();
  Bf16MatmulScope(const Bf16MatmulScope&) = delete;
  Bf16MatmulScope& operator=(const Bf16MatmulScope&) = delete;

 private:
  bool previous_;
};

}  // namespace tf::kernels
