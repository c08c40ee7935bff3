// Shape: up to six dimension sizes, stored inline (no heap), printed as (2, 3, 4).
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "framework/error.h"

namespace tf {

class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.begin(), dims.end()); }

  int rank() const { return rank_; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  // Negative axes count from the end, as in NumPy: -1 is the last axis.
  int axis(int a) const {
    const int resolved = a < 0 ? a + rank_ : a;
    TF_CHECK(resolved >= 0 && resolved < rank_, "axis ", a, " out of range for shape ", to_string());
    return resolved;
  }
  int64_t operator[](int a) const { return dims_[axis(a)]; }
  int64_t& operator[](int a) { return dims_[axis(a)]; }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  void push_back(int64_t d) {
    TF_CHECK(rank_ < kMaxRank, "shape ", to_string(), " cannot grow past rank ", kMaxRank);
    dims_[rank_++] = d;
  }
  // Product of the dimensions before `axis` (rows) and from `axis` on (cols).
  int64_t numel_before(int a) const {
    int64_t n = 1;
    for (int i = 0; i < axis(a); ++i) n *= dims_[i];
    return n;
  }

  bool operator==(const Shape& o) const {
    if (rank_ != o.rank_) return false;
    for (int i = 0; i < rank_; ++i)
      if (dims_[i] != o.dims_[i]) return false;
    return true;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }

  std::string to_string() const {
    std::string s = "(";
    for (int i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
    return s + (rank_ == 1 ? ",)" : ")");
  }

 private:
  template <class It>
  void assign(It first, It last) {
    for (; first != last; ++first) {
      TF_CHECK(*first >= 0, "negative dimension ", *first);
      push_back(*first);
    }
  }
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

inline std::ostream& operator<<(std::ostream& out, const Shape& s) { return out << s.to_string(); }

}  // namespace tf
