// TF_POOL_BYPASS: defined under AddressSanitizer, where the storage and object pools hand every
// request to the system allocator, since reusing freed blocks would hide use-after-free from it.
#pragma once

#include "framework/sanitize.h"

#if defined(TF_ADDRESS_SANITIZER)
#define TF_POOL_BYPASS 1
#endif
