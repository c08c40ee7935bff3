// Thread-local switch between fast and reference kernels.
#include "framework/kernels/mode.h"

namespace tf::kernels {

namespace {
thread_local bool g_reference = false;
}

bool reference_forced() { return g_reference; }
ReferenceKernelsGuard::ReferenceKernelsGuard() : previous_(g_reference) { g_reference = true; }
ReferenceKernelsGuard::~ReferenceKernelsGuard() { g_reference = previous_; }

}  // namespace tf::kernels
