// Thread-local switch between fast and reference kernels; the process-wide deterministic switch.
#include "framework/kernels/mode.h"

#include <atomic>

namespace tf::kernels {

namespace {
thread_local bool g_reference = false;
std::atomic<bool> g_deterministic{false};
}

bool reference_forced() { return g_reference; }
ReferenceKernelsGuard::ReferenceKernelsGuard() : previous_(g_reference) { g_reference = true; }
ReferenceKernelsGuard::~ReferenceKernelsGuard() { g_reference = previous_; }

bool deterministic() { return g_deterministic.load(std::memory_order_relaxed); }
DeterministicScope::DeterministicScope(bool on) : previous_(g_deterministic.exchange(on)) {}
DeterministicScope::~DeterministicScope() { g_deterministic = previous_; }

}  // namespace tf::kernels
