// check_addressable (framework/sanitize.h): the whole-span check that stands in for the
// per-access instrumentation of the uninstrumented micro-kernels. It must report a span that runs
// past its buffer, or over freed memory, and stay silent for one inside it. Only the sanitizer pass
// of scripts/test.sh can see it work: elsewhere it is a no-op and the test skips.
#include "framework/sanitize.h"

#include <gtest/gtest.h>

#include <vector>

#include "framework/storage_pool.h"

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

// The storage pool tells AddressSanitizer what it knows (Note [the pool under AddressSanitizer] in
// framework/storage_pool.cpp): a released block, a block's slack past the bytes asked, and a second
// release are each reported; a block handed out again is addressable for the new size.
TEST(StoragePoolPoisoning, ReportsIdleBlocksSlackAndDoubleRelease) {
#ifndef TF_ADDRESS_SANITIZER
  GTEST_SKIP() << "AddressSanitizer is off: the pool poisons nothing";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  storage_pool::trim();
  const size_t asked = 1250 * sizeof(float);  // 5000 bytes: size class 4096 + 1024 = 5120
  std::byte* block = storage_pool::acquire(asked);
  check_addressable(block, asked);
  EXPECT_DEATH(check_addressable(block + asked, 1), "use-after-poison");
  storage_pool::release(block, asked);
  EXPECT_DEATH(check_addressable(block, 1), "use-after-poison");
  EXPECT_DEATH(check_addressable(block + 4000, 4), "use-after-poison");
  EXPECT_DEATH(storage_pool::release(block, asked), "use-after-poison");

  std::byte* again = storage_pool::acquire(asked + 100);  // the same class: the same block
  ASSERT_EQ(again, block);
  check_addressable(again, asked + 100);
  EXPECT_DEATH(check_addressable(again + asked + 100, 1), "use-after-poison");
  storage_pool::release(again, asked + 100);
  storage_pool::trim();  // the system's free of a block that was poisoned idle
#endif
}

}  // namespace
}  // namespace tf
