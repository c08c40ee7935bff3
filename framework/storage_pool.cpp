// The storage pool's free lists; see storage_pool.h.
#include "framework/storage_pool.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "framework/pool_bypass.h"

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

// Called with the mutex held.
void count_acquired(Stats& s, size_t nbytes) {
  s.live_bytes += nbytes;
  if (s.live_bytes > s.peak_live_bytes) s.peak_live_bytes = s.live_bytes;
}

}  // namespace

std::byte* acquire(size_t nbytes) {
  const size_t cls = size_class(nbytes);
  Pool& p = pool();
#ifndef TF_POOL_BYPASS
  {
    std::lock_guard lock(p.mutex);
    auto it = p.free_lists.find(cls);
    if (it != p.free_lists.end() && !it->second.empty()) {
      std::byte* block = it->second.back();
      it->second.pop_back();
      p.stats.idle_bytes -= cls;
      ++p.stats.reuses;
      count_acquired(p.stats, nbytes);
      return block;
    }
  }
#endif
  auto* block = static_cast<std::byte*>(std::aligned_alloc(64, cls));
  if (!block) throw std::bad_alloc();
  std::lock_guard lock(p.mutex);
  ++p.stats.system_allocations;
  count_acquired(p.stats, nbytes);
  return block;
}

void release(std::byte* block, size_t nbytes) {
  if (!block) return;
  Pool& p = pool();
  {
    std::lock_guard lock(p.mutex);
    p.stats.live_bytes -= nbytes;
#ifndef TF_POOL_BYPASS
    const size_t cls = size_class(nbytes);
    if (p.stats.idle_bytes + cls <= p.limit) {
      p.free_lists[cls].push_back(block);
      p.stats.idle_bytes += cls;
      return;
    }
#endif
  }
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
    for (std::byte* b : blocks) std::free(b);
  p.free_lists.clear();
  p.stats.idle_bytes = 0;
}

}  // namespace tf::storage_pool
