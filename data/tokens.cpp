// Tokens: an id array in memory or in a mapped token file.
#include "data/tokens.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "framework/error.h"

namespace tf::data {

Tokens::Tokens(std::vector<int32_t> ids) {
  auto held = std::make_shared<const std::vector<int32_t>>(std::move(ids));
  data_ = held->data();
  count_ = static_cast<int64_t>(held->size());
  owner_ = std::move(held);
}

Tokens::Tokens(std::shared_ptr<const void> owner, const void* data, int width, int64_t count)
    : owner_(std::move(owner)), data_(data), width_(width), count_(count), mapped_(true) {
  TF_CHECK(width == 2 || width == 4, "Tokens: ids are 2 or 4 bytes wide, got ", width);
}

void Tokens::copy(int64_t start, int64_t n, int32_t* out) const {
  TF_CHECK(start >= 0 && n >= 0 && start + n <= count_, "Tokens::copy: [", start, ", ", start + n, ") outside [0, ",
           count_, ")");
  if (width_ == 4) {
    std::copy_n(static_cast<const int32_t*>(data_) + start, n, out);
    return;
  }
  const uint16_t* from = static_cast<const uint16_t*>(data_) + start;
  for (int64_t i = 0; i < n; ++i) out[i] = from[i];
}

Tokens Tokens::slice(int64_t begin, int64_t end) const {
  TF_CHECK(begin >= 0 && begin <= end && end <= count_, "Tokens::slice: [", begin, ", ", end, ") outside [0, ", count_,
           ")");
  Tokens part = *this;
  part.data_ = static_cast<const char*>(data_) + begin * width_;
  part.count_ = end - begin;
  return part;
}

std::vector<int32_t> Tokens::to_vector() const {
  std::vector<int32_t> ids(count_);
  copy(0, count_, ids.data());
  return ids;
}

void Tokens::release_before(int64_t end) const {
  if (!mapped_ || end <= 0) return;
  // Whole pages only: the mapping starts on a page, so rounding `data_` down stays inside it, and
  // rounding the end down keeps the page that holds ids at and after `end`.
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(data_) / page * page;
  const auto last = (reinterpret_cast<uintptr_t>(data_) + std::min(end, count_) * width_) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace tf::data
