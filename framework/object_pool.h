// The object pool: where a training step's small bookkeeping objects come from (tape nodes, tensor
// handles with their shared_ptr control blocks, gradient slots, nodes' output lists), so that a
// warm step, which makes the same objects every time, asks malloc for nothing.
//
// A std::pmr::unsynchronized_pool_resource behind a mutex: free lists per block size, refilled in
// chunks from the heap and never handed back (the pool's high-water mark is one step's objects).
// One pool for all threads, because a tensor made on one thread may die on another. Under
// AddressSanitizer the pool is bypassed, as the storage pool is: reuse would hide use-after-free.
//
//   auto impl = object_pool::make_shared<TensorImpl>();  // object and control block: one pooled block
#pragma once
#include <memory>
#include <memory_resource>
#include <utility>

namespace tf::object_pool {

std::pmr::memory_resource* resource();

template <class T>
std::pmr::polymorphic_allocator<T> allocator() {
  return std::pmr::polymorphic_allocator<T>(resource());
}

template <class T, class... Args>
std::shared_ptr<T> make_shared(Args&&... args) {
  return std::allocate_shared<T>(allocator<T>(), std::forward<Args>(args)...);
}

}  // namespace tf::object_pool
