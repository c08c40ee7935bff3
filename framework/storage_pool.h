// The storage pool: a caching allocator for tensor blocks, so that a training step, which asks for
// the same block sizes every time, takes nothing from the system after its first run.
//
// Why: large blocks from malloc are fresh mmaps, so every step would page-fault its activations in
// 4 KiB at a time and hand them back at the end (measured: about a tenth of a step's time went to
// the kernel). Freed blocks are kept in a free list per size class instead and handed out again.
// Size classes: the byte count rounded up to 64 (alignment) below 4 KiB, and up to a multiple of
// 1/8 of its power of two above (at most 12.5% slack), so nearby sizes (a sampler's growing
// context) share classes. The cache is bounded (TAPEFORMER_POOL_MB, default 4096 MiB of idle
// blocks): past that, released blocks go back to the system.
// Under AddressSanitizer the pool is bypassed: reuse would hide use-after-free from it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tf::storage_pool {

std::byte* acquire(size_t nbytes);            // 64-byte aligned; never null (throws bad_alloc)
void release(std::byte* block, size_t nbytes);  // nbytes as passed to acquire

struct Stats {
  uint64_t system_allocations = 0;  // blocks taken from the system (misses), ever
  uint64_t reuses = 0;              // blocks served from the free lists, ever
  size_t idle_bytes = 0;            // bytes held in the free lists now
  size_t live_bytes = 0;            // bytes handed out and not yet released (as asked, before rounding)
  size_t peak_live_bytes = 0;       // the most live_bytes has been since the start or reset_peak()
};
Stats stats();
void reset_peak();  // peak_live_bytes = live_bytes

void trim();  // returns every idle block to the system

}  // namespace tf::storage_pool
