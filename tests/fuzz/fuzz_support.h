// Shared parts of the fuzz targets: what counts as an expected refusal, and how a broken invariant
// is reported (abort, which libFuzzer and the replay runner both record as a finding).
//
// A target calls the library inside refused_ok([&] { ... }): tf::InputError is the documented
// answer to bad input and is swallowed; any other exception escapes LLVMFuzzerTestOneInput and
// terminates the process, which is a finding, as are sanitizer reports, hangs and over-large
// allocations (-rss_limit_mb / -malloc_limit_mb).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "framework/error.h"

namespace tf::fuzz {

// Runs f; returns true when it completed, false when it refused the input with tf::InputError.
template <class F>
bool refused_ok(F&& f) {
  try {
    f();
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// A broken invariant: print what and abort, so the input is saved as a crash.
[[noreturn]] inline void violated(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

#define TF_FUZZ_EXPECT(cond, ...) \
  do {                            \
    if (!(cond)) ::tf::fuzz::violated(::tf::concat(#cond, ": ", __VA_ARGS__)); \
  } while (0)

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace tf::fuzz
