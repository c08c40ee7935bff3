// Thread-local switch between fast and reference kernels; the process-wide deterministic and
// bfloat16 switches.
#include "framework/kernels/mode.h"

#include <atomic>

namespace tf::kernels {

namespace {
thread_local bool g_reference = false;
std::atomic<bool> g_deterministic{false};
std::atomic<bool> g_bf16_matmuls{false};
}

bool reference_forced() { return g_reference; }
ReferenceKernelsGuard::ReferenceKernelsGuard() : previous_(g_reference) { g_reference = true; }
ReferenceKernelsGuard::~ReferenceKernelsGuard() { g_reference = previous_; }

bool deterministic() { return g_deterministic.load(std::memory_order_relaxed); }
DeterministicScope::DeterministicScope(bool on) : previous_(g_deterministic.exchange(on)) {}
DeterministicScope::~DeterministicScope() { g_deterministic = previous_; }

bool bf16_matmuls() { return g_bf16_matmuls.load(std::memory_order_relaxed); }
Bf16MatmulScope::Bf16MatmulScope(bool on) : previous_(g_bf16_matmuls.exchange(on)) {}
Bf16MatmulScope::~Bf16MatmulScope() { g_bf16_matmuls = previous_; }

}  // namespace tf::kernels
