// FNV-1a 64 (Fowler, Noll, Vo): the fingerprints of token shards and their source files.
#pragma once
#include <cstdint>
#include <string_view>

namespace tf::data {

// Continuing from `hash`, so several pieces can be chained: fnv1a64("bar", fnv1a64("foo")) ==
// fnv1a64("foobar").
inline uint64_t fnv1a64(std::string_view bytes, uint64_t hash = 0xcbf29ce484222325ull) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace tf::data
