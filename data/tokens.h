// Tokens: a read-only array of token ids, held in memory or mapped from a token file (token_file.h).
//
// Batchers read their windows through it, so a corpus of any size costs the pages its windows touch,
// not its length: a mapped file is paged in by the kernel and shared by every process that maps it
// (the ranks of an mpirun job).
//
//   tf::data::Tokens small({5, 7, 9});                        // owns a vector
//   tf::data::Tokens big = tf::data::open_token_file(p).tokens;  // maps the file: nothing is read yet
//   int32_t id = big[i];                                      // widened from uint16 when stored so
//   big.copy(start, 129, window);                             // 129 ids into window[]
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace tf::data {

class Tokens {
 public:
  Tokens() = default;
  // Holds `ids` (implicit: a vector of ids is a Tokens wherever one is wanted).
  Tokens(std::vector<int32_t> ids);  // NOLINT(google-explicit-constructor)
  // `count` ids of `width` bytes (2: uint16, 4: int32) at `data`, kept alive by `owner`.
  Tokens(std::shared_ptr<const void> owner, const void* data, int width, int64_t count);

  int64_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  int width() const { return width_; }  // bytes per stored id
  bool mapped() const { return mapped_; }  // from a token file (else held in memory)
  int32_t operator[](int64_t i) const {
    return width_ == 2 ? static_cast<const uint16_t*>(data_)[i] : static_cast<const int32_t*>(data_)[i];
  }
  // ids [start, start + n) into out[0 .. n).
  void copy(int64_t start, int64_t n, int32_t* out) const;
  // ids [begin, end) as a Tokens sharing this one's storage.
  Tokens slice(int64_t begin, int64_t end) const;
  std::vector<int32_t> to_vector() const;
  // A hint that ids before `end` will not be read again soon: a mapped file's pages up to there
  // leave this process's resident set (they stay in the page cache). Reading them again is correct,
  // only slower. Keeps a pass over a large file, sequential (evaluation) or random (training
  // windows: Note [windows of a mapped file] in batcher.cpp), from growing the RSS.
  void release_before(int64_t end) const;

 private:
  std::shared_ptr<const void> owner_;
  const void* data_ = nullptr;
  int width_ = 4;
  int64_t count_ = 0;
  bool mapped_ = false;
};

}  // namespace tf::data
