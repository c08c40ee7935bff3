// Register-tiled micro-kernels outside the sanitizers' per-access instrumentation, their operands
// checked whole instead.
//
// Note [uninstrumented micro-kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Under AddressSanitizer and UndefinedBehaviorSanitizer (scripts/test.sh's second pass) every load of
// flash attention's register tile was checked, its index arithmetic tested for overflow, and its
// accumulators kept in memory: the tile took 53% of a small model's training step (perf), and the
// step ran 25x slower than in Release (18 s against 0.7 s for 20 steps of d_model 64). A function marked
// TF_UNINSTRUMENTED is compiled as in Release; its caller, still instrumented, calls
// check_addressable on each whole operand span first, so a block product that would read or write past
// its buffer is still reported by AddressSanitizer, with the buffer's allocation stack, once per call
// rather than once per element.
#pragma once
#include <cstddef>

// TF_ADDRESS_SANITIZER: defined when AddressSanitizer instruments this translation unit (gcc says so
// by __SANITIZE_ADDRESS__, clang by __has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define TF_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TF_ADDRESS_SANITIZER 1
#endif
#endif

#if defined(TF_ADDRESS_SANITIZER)
#include <sanitizer/asan_interface.h>
#endif

#define TF_UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined")))

namespace tf {

// Under AddressSanitizer: if any of the `bytes` bytes from `begin` is not addressable (past the end
// of its buffer, freed), reads that byte through an instrumented load, so that AddressSanitizer
// reports it as the invalid access it is. Elsewhere nothing.
inline void check_addressable(const void* begin, size_t bytes) {
#if defined(TF_ADDRESS_SANITIZER)
  if (bytes == 0) return;
  if (void* bad = __asan_region_is_poisoned(const_cast<void*>(begin), bytes))
    static_cast<void>(*static_cast<volatile const char*>(bad));
#else
  static_cast<void>(begin);
  static_cast<void>(bytes);
#endif
}

}  // namespace tf
