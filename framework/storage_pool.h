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
// Under AddressSanitizer idle blocks and each block's slack are poisoned (Note [the pool under
// AddressSanitizer] in storage_pool.cpp).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

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

// A pool block for the length of a scope: a kernel's scratch buffer, which a warm step then takes
// from the free lists instead of asking malloc. T is trivially copyable; the contents start
// uninitialised unless a fill value is given.
//
//   storage_pool::Scratch<float> delta(rows);  // (rows)
template <class T>
class Scratch {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  explicit Scratch(size_t count)
      : count_(count), data_(count ? reinterpret_cast<T*>(acquire(count * sizeof(T))) : nullptr) {}
  Scratch(size_t count, T fill) : Scratch(count) { std::fill_n(data_, count_, fill); }
  ~Scratch() {
    if (data_) release(reinterpret_cast<std::byte*>(data_), count_ * sizeof(T));
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  T* data() const { return data_; }
  T& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return count_; }

 private:
  size_t count_;
  T* data_;
};

}  // namespace tf::storage_pool
