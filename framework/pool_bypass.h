// TF_POOL_BYPASS: defined under AddressSanitizer, where the object pool hands every request to the
// system allocator, since reusing freed blocks would hide use-after-free from it. (Its objects are
// small, which the sanitizer's allocator serves without page faults; the storage pool poisons its idle
// blocks instead: Note [the pool under AddressSanitizer] in storage_pool.cpp.)
#pragma once

#include "framework/sanitize.h"

#if defined(TF_ADDRESS_SANITIZER)
#define TF_POOL_BYPASS 1
#endif
