// TF_POOL_BYPASS: defined under AddressSanitizer, where the storage and object pools hand every
// request to the system allocator, since reusing freed blocks would hide use-after-free from it.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define TF_POOL_BYPASS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TF_POOL_BYPASS 1
#endif
#endif
