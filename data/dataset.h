// The token cache: a text is tokenized once, and its ids are kept on disk for later runs.
//
// The cache file is named by a key: FNV-1a 64 over the text and the tokenizer's serialised form,
// so a different text or a different tokenizer (merges, specials) never reuses stale ids. A file
// that is truncated, has the wrong size, header or checksum is detected, re-tokenized and rewritten.
//
//   tf::data::TokenIds t = tf::data::tokenize_cached(text, tokenizer, "data/cache");
//   t.ids;     // the same as tokenizer.encode(text)
//   t.source;  // CacheSource::hit on the second run
//
// File layout (little-endian, <key as 16 hex digits>.ids):
//   bytes 0..7    magic "TFIDS\0\0\1"
//   bytes 8..15   uint64 key
//   bytes 16..23  uint64 n, the number of ids
//   bytes 24..31  uint64 FNV-1a 64 of the id bytes
//   bytes 32..    n int32 ids
#pragma once
#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace tf::data {

enum class CacheSource { hit, miss, rebuilt };  // rebuilt: a file existed but failed its checks
const char* cache_source_name(CacheSource s);

struct TokenIds {
  std::vector<int32_t> ids;
  CacheSource source = CacheSource::miss;
  std::filesystem::path file;  // the cache file read or written
};

// FNV-1a 64 (Fowler, Noll, Vo), continuing from `hash` so several pieces can be chained.
uint64_t fnv1a64(std::string_view bytes, uint64_t hash = 0xcbf29ce484222325ull);

// tokenizer.encode(text), read from cache_dir when a valid cache file exists, else computed and
// written there (atomically: a temporary file, then a rename). cache_dir is created if needed.
// `write` false (train --dry-run, which writes nothing): a valid cache file is read, none is written.
TokenIds tokenize_cached(std::string_view text, const Tokenizer& tokenizer, const std::filesystem::path& cache_dir,
                         bool write = true);

}  // namespace tf::data
