// The object pool's resource; see object_pool.h.
#include "framework/object_pool.h"

#include <mutex>

#include "framework/pool_bypass.h"

namespace tf::object_pool {

namespace {

// std::pmr::synchronized_pool_resource keeps a pool per thread, and a block freed by a thread
// that has since exited is awkward there; one lock around one pool is simpler, and it is taken
// a few thousand times a step, uncontended.
class LockedPool final : public std::pmr::memory_resource {
  void* do_allocate(size_t bytes, size_t alignment) override {
    std::lock_guard lock(mutex_);
    return pool_.allocate(bytes, alignment);
  }
  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    std::lock_guard lock(mutex_);
    pool_.deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  std::mutex mutex_;
  std::pmr::unsynchronized_pool_resource pool_;
};

}  // namespace

std::pmr::memory_resource* resource() {
#ifdef TF_POOL_BYPASS
  return std::pmr::new_delete_resource();
#else
  static auto* pool = new LockedPool;  // never destroyed: tensors in static objects may die after exit
  return pool;
#endif
}

}  // namespace tf::object_pool
