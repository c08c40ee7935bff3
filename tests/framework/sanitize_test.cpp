// check_addressable (framework/sanitize.h): the whole-span check that stands in for the
// per-access instrumentation of the uninstrumented micro-kernels. It must report a span that runs
// past its buffer, or over freed memory, and stay silent for one inside it. Only the sanitizer pass
// of scripts/test.sh can see it work: elsewhere it is a no-op and the test skips.
#include "framework/sanitize.h"

#include <gtest/gtest.h>

#include <vector>

namespace tf {
namespace {

TEST(CheckAddressable, ReportsASpanPastItsBufferOrFreedAndPassesOneInside) {
#ifndef TF_ADDRESS_SANITIZER
  GTEST_SKIP() << "AddressSanitizer is off: check_addressable is a no-op";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> buffer(17);
  check_addressable(buffer.data(), 17 * sizeof(float));     // exactly the buffer
  check_addressable(buffer.data() + 16, sizeof(float));     // its last element
  check_addressable(buffer.data(), 0);                      // nothing
  EXPECT_DEATH(check_addressable(buffer.data(), 18 * sizeof(float)), "heap-buffer-overflow");
  EXPECT_DEATH(check_addressable(buffer.data() + 16, 2 * sizeof(float)), "heap-buffer-overflow");
  const float* freed = nullptr;
  {
    std::vector<float> gone(3);
    freed = gone.data();
  }
  EXPECT_DEATH(check_addressable(freed, sizeof(float)), "heap-use-after-free");
#endif
}

}  // namespace
}  // namespace tf
