// The storage pool's free lists; see storage_pool.h.
#include "framework/storage_pool.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "framework/sanitize.h"

namespace tf::storage_pool {

namespace {

size_t size_class(size_t n) {
  if (n <= 4096) return n == 0 ? 64 : (n + 63) / 64 * 64;
  size_t power = 4096;
  while (power * 2 < n) power *= 2;  // power < n <= 2 power
  const size_t step = power / 8;
  return (n + step - 1) / step * step;
}

size_t idle_limit() {
  const char* env = std::getenv("TAPEFORMER_POOL_MB");
  const long long mb = env ? std::atoll(env) : 4096;
  return static_cast<size_t>(mb < 0 ? 0 : mb) << 20;
}

struct Pool {
  std::mutex mutex;
  std::map<size_t, std::vector<std::byte*>> free_lists;  // size class -> idle blocks
  Stats stats;
  size_t limit = idle_limit();
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: tensors in static objects may release after exit
  return *p;
}

// Note [the pool under AddressSanitizer]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A pool hides a use-after-free from AddressSanitizer, which sees only the first malloc of a block.
// Bypassing the pool (as before) cost the sanitizer pass dearly: every large block was a fresh mmap,
// and page faults took 24% of a small model's training step there (perf). So the pool stays on and
// tells AddressSanitizer what it knows instead (its manual poisoning interface):
// - an idle block is poisoned whole: any access through a stale pointer is reported;
// - a block handed out is addressable for the bytes asked only, so the slack up to its size class
//   is poisoned and an overrun into it is reported (the bypass, which malloc'd the class, missed it);
// - idle blocks are handed out oldest first, so a released block stays poisoned as long as possible;
// - releasing a block twice, or one never handed out, reads a poisoned byte and is reported.
// What is lost: an access through a stale pointer after its block was handed out again.
void poison_idle(std::byte* block, size_t cls) {
#if defined(TF_ADDRESS_SANITIZER)
  ASAN_POISON_MEMORY_REGION(block, cls);
#else
  static_cast<void>(block);
  static_cast<void>(cls);
#endif
}

void unpoison_handed_out(std::byte* block, size_t cls, size_t nbytes) {
#if defined(TF_ADDRESS_SANITIZER)
  ASAN_POISON_MEMORY_REGION(block, cls);
  ASAN_UNPOISON_MEMORY_REGION(block, nbytes);
#else
  static_cast<void>(block);
  static_cast<void>(cls);
  static_cast<void>(nbytes);
#endif
}

std::byte* take_idle(std::vector<std::byte*>& blocks) {
#if defined(TF_ADDRESS_SANITIZER)
  std::byte* block = blocks.front();  // the oldest (Note [the pool under AddressSanitizer])
  blocks.erase(blocks.begin());
#else
  std::byte* block = blocks.back();  // the newest: likeliest still in cache
  blocks.pop_back();
#endif
  return block;
}

// Called with the mutex held.
void count_acquired(Stats& s, size_t nbytes) {
  s.live_bytes += nbytes;
  if (s.live_bytes > s.peak_live_bytes) s.peak_live_bytes = s.live_bytes;
}

}  // namespace

std::byte* acquire(size_t nbytes) {
  const size_t cls = size_class(nbytes);
  Pool& p = pool();
  {
    std::lock_guard lock(p.mutex);
    auto it = p.free_lists.find(cls);
    if (it != p.free_lists.end() && !it->second.empty()) {
      std::byte* block = take_idle(it->second);
      p.stats.idle_bytes -= cls;
      ++p.stats.reuses;
      count_acquired(p.stats, nbytes);
      unpoison_handed_out(block, cls, nbytes);
      return block;
    }
  }
  auto* block = static_cast<std::byte*>(std::aligned_alloc(64, cls));
  if (!block) throw std::bad_alloc();
  unpoison_handed_out(block, cls, nbytes);
  std::lock_guard lock(p.mutex);
  ++p.stats.system_allocations;
  count_acquired(p.stats, nbytes);
  return block;
}

void release(std::byte* block, size_t nbytes) {
  if (!block) return;
  check_addressable(block, nbytes);  // a block released twice is poisoned already
  Pool& p = pool();
  const size_t cls = size_class(nbytes);
  {
    std::lock_guard lock(p.mutex);
    p.stats.live_bytes -= nbytes;
    if (p.stats.idle_bytes + cls <= p.limit) {
      poison_idle(block, cls);
      p.free_lists[cls].push_back(block);
      p.stats.idle_bytes += cls;
      return;
    }
  }
  unpoison_handed_out(block, cls, cls);
  std::free(block);
}

Stats stats() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  return p.stats;
}

void reset_peak() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  p.stats.peak_live_bytes = p.stats.live_bytes;
}

void trim() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  for (auto& [cls, blocks] : p.free_lists)
    for (std::byte* b : blocks) {
      unpoison_handed_out(b, cls, cls);
      std::free(b);
    }
  p.free_lists.clear();
  p.stats.idle_bytes = 0;
}

}  // namespace tf::storage_pool
