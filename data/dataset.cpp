// The on-disk token cache.
#include "data/dataset.h"

#include <unistd.h>

#include <array>
#include <bit>
#include <cstdio>
#include <fstream>

#include "framework/error.h"

namespace tf::data {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little, "the token cache is written little-endian");

namespace {

constexpr std::array<char, 8> kMagic = {'T', 'F', 'I', 'D', 'S', 0, 0, 1};
constexpr size_t kHeaderBytes = 32;

struct Header {
  uint64_t key, count, checksum;
};

std::string_view id_bytes(const std::vector<int32_t>& ids) {
  return {reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t)};
}

// The ids of a valid cache file, or false when it is missing, truncated or fails a check.
bool read_cache(const fs::path& file, uint64_t key, std::vector<int32_t>& ids) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::array<char, 8> magic{};
  Header h{};
  in.read(magic.data(), magic.size());
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  if (!in || magic != kMagic || h.key != key) return false;
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  if (ec || h.count > (size - kHeaderBytes) / sizeof(int32_t) ||
      size != kHeaderBytes + h.count * sizeof(int32_t))
    return false;
  ids.resize(h.count);
  in.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(h.count * sizeof(int32_t)));
  return in && fnv1a64(id_bytes(ids)) == h.checksum;
}

void write_cache(const fs::path& file, uint64_t key, const std::vector<int32_t>& ids) {
  const Header h{key, ids.size(), fnv1a64(id_bytes(ids))};
  // A name of this process's own: the ranks of an mpirun job (or two runs) may tokenize the same
  // text at once; each writes its own file and the last rename wins with the same contents.
  const fs::path tmp = fs::path(file.string() + "." + std::to_string(::getpid()) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(kMagic.data(), kMagic.size());
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    const std::string_view bytes = id_bytes(ids);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    TF_CHECK_INPUT(out.good(), "token cache: cannot write '", tmp.string(), "'");
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  TF_CHECK_INPUT(!ec, "token cache: cannot rename '", tmp.string(), "' to '", file.string(), "': ", ec.message());
}

}  // namespace

const char* cache_source_name(CacheSource s) {
  switch (s) {
    case CacheSource::hit: return "hit";
    case CacheSource::miss: return "miss";
    case CacheSource::rebuilt: return "rebuilt";
  }
  return "?";
}

uint64_t fnv1a64(std::string_view bytes, uint64_t hash) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

TokenIds tokenize_cached(std::string_view text, const Tokenizer& tokenizer, const fs::path& cache_dir, bool write) {
  // The text's length and a separator keep (text, tokenizer) pairs from colliding by concatenation.
  uint64_t key = fnv1a64(std::to_string(text.size()) + "\n");
  key = fnv1a64(text, key);
  key = fnv1a64(tokenizer.to_string(), fnv1a64("\n", key));
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.ids", static_cast<unsigned long long>(key));

  TokenIds result;
  result.file = cache_dir / name;
  std::error_code ec;
  const bool existed = fs::exists(result.file, ec);
  if (existed && read_cache(result.file, key, result.ids)) {
    result.source = CacheSource::hit;
    return result;
  }
  result.source = existed ? CacheSource::rebuilt : CacheSource::miss;
  result.ids = tokenizer.encode(text);
  if (!write) return result;
  fs::create_directories(cache_dir, ec);
  TF_CHECK_INPUT(!ec, "token cache: cannot create '", cache_dir.string(), "': ", ec.message());
  write_cache(result.file, key, result.ids);
  return result;
}

}  // namespace tf::data
