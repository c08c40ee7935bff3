// Token files: the shard and llm.c formats, written atomically and mapped read-only.
#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "framework/error.h"

namespace tf::data {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little, "token files are written little-endian");

namespace {

using Header = std::array<int32_t, kTokenFileHeaderBytes / 4>;

uint64_t get_u64(const Header& h, size_t slot) {
  uint64_t v;
  std::memcpy(&v, &h[slot], sizeof v);
  return v;
}

void put_u64(Header& h, size_t slot, uint64_t v) { std::memcpy(&h[slot], &v, sizeof v); }

int64_t round_up_8(int64_t n) { return (n + 7) / 8 * 8; }

// A read-only mapping of a whole file, unmapped when the last Tokens that shares it goes.
struct Mapping {
  void* base = MAP_FAILED;
  size_t bytes = 0;
  ~Mapping() {
    if (base != MAP_FAILED) ::munmap(base, bytes);
  }
};

Header header_of(const TokenFileInfo& info, int64_t count, int64_t documents) {
  Header h{};
  if (info.format == TokenFileFormat::llmc) {
    h[0] = kLlmcMagic;
    h[1] = 1;
    h[2] = static_cast<int32_t>(count);
    return h;
  }
  h[0] = kShardMagic;
  h[1] = 1;
  h[2] = info.width;
  put_u64(h, 4, static_cast<uint64_t>(count));
  put_u64(h, 6, static_cast<uint64_t>(documents));
  put_u64(h, 8, info.tokenizer_fingerprint);
  put_u64(h, 10, info.source_fingerprint);
  put_u64(h, 12, info.characters);
  put_u64(h, 14, info.vocab_size);
  put_u64(h, 16, info.unknown);
  return h;
}

}  // namespace

int token_width(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

TokenFile open_token_file(const fs::path& path) {
  const std::string name = path.string();
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  TF_CHECK_INPUT(fd >= 0, "token file '", name, "': cannot open: ", std::strerror(errno));
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const int64_t size = stat_ok ? static_cast<int64_t>(st.st_size) : -1;
  Header h{};
  const bool header_read = size >= kTokenFileHeaderBytes && ::pread(fd, h.data(), sizeof h, 0) == sizeof h;
  auto mapping = std::make_shared<Mapping>();
  if (header_read) {
    mapping->bytes = static_cast<size_t>(size);
    mapping->base = ::mmap(nullptr, mapping->bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  }
  ::close(fd);
  TF_CHECK_INPUT(header_read, "token file '", name, "': ", size, " bytes, shorter than the ", kTokenFileHeaderBytes,
                 "-byte header: not a token file, or truncated");
  TF_CHECK_INPUT(mapping->base != MAP_FAILED, "token file '", name, "': cannot map: ", std::strerror(errno));

  TokenFile f;
  int64_t count = 0, expected = 0;
  if (h[0] == kLlmcMagic) {
    TF_CHECK_INPUT(h[1] == 1, "token file '", name, "': llm.c version ", h[1],
                   "; tapeformer reads version 1 (uint16 ids)");
    f.info.format = TokenFileFormat::llmc;
    f.info.width = 2;
    count = h[2];
    TF_CHECK_INPUT(count >= 0, "token file '", name, "': a negative id count ", count, " in its header");
    expected = kTokenFileHeaderBytes + 2 * count;
  } else {
    TF_CHECK_INPUT(h[0] == kShardMagic, "token file '", name, "': not a token file (its first 4 bytes are ", h[0],
                   "; a tapeformer shard begins with ", kShardMagic, ", an llm.c token file with ", kLlmcMagic, ")");
    TF_CHECK_INPUT(h[1] == 1, "token file '", name, "': shard version ", h[1], "; this tapeformer reads version 1");
    TF_CHECK_INPUT(h[2] == 2 || h[2] == 4, "token file '", name, "': ", h[2], " bytes per id; expected 2 or 4");
    f.info.width = h[2];
    const uint64_t ids = get_u64(h, 4), documents = get_u64(h, 6);
    // Counts from a forged header could overflow the size sum: bound them by the file first.
    TF_CHECK_INPUT(ids <= static_cast<uint64_t>(size) && documents <= static_cast<uint64_t>(size),
                   "token file '", name, "': its header declares ", ids, " ids and ", documents,
                   " documents, more than its ", size, " bytes hold: truncated or damaged");
    count = static_cast<int64_t>(ids);
    f.info.tokenizer_fingerprint = get_u64(h, 8);
    f.info.source_fingerprint = get_u64(h, 10);
    f.info.characters = get_u64(h, 12);
    f.info.vocab_size = get_u64(h, 14);
    f.info.unknown = get_u64(h, 16);
    expected = round_up_8(kTokenFileHeaderBytes + count * f.info.width) + 8 * static_cast<int64_t>(documents);
    f.document_starts.resize(documents);
  }
  TF_CHECK_INPUT(size == expected, "token file '", name, "': ", size, " bytes, but its header declares ", count,
                 " ids", f.info.format == TokenFileFormat::shard ? " and their documents" : "", " (", expected,
                 " bytes): truncated, or written by something else");
  const char* base = static_cast<const char*>(mapping->base);
  if (!f.document_starts.empty())
    std::memcpy(f.document_starts.data(), base + round_up_8(kTokenFileHeaderBytes + count * f.info.width),
                8 * f.document_starts.size());
  // Windows are drawn at random: read-ahead, or huge pages (2 MB each, which the kernel may use for a
  // file's pages too), would make a window of a few hundred bytes cost far more of the resident set.
  ::madvise(mapping->base, mapping->bytes, MADV_RANDOM);
  ::madvise(mapping->base, mapping->bytes, MADV_NOHUGEPAGE);
  f.tokens = Tokens(mapping, base + kTokenFileHeaderBytes, f.info.width, count);
  return f;
}

TokenFileWriter::TokenFileWriter(fs::path path, TokenFileInfo info)
    : path_(std::move(path)), partial_(path_.string() + ".partial-" + std::to_string(::getpid())), info_(info) {
  TF_CHECK(info_.width == 2 || info_.width == 4, "TokenFileWriter: ids are 2 or 4 bytes wide, got ", info_.width);
  TF_CHECK(info_.format == TokenFileFormat::shard || info_.width == 2, "TokenFileWriter: llm.c files hold uint16 ids");
  file_ = std::fopen(partial_.c_str(), "wb");
  TF_CHECK_INPUT(file_, "token file '", partial_.string(), "': cannot create: ", std::strerror(errno));
  const Header placeholder{};  // the real header is written by finish(), once the counts are known
  write(placeholder.data(), sizeof placeholder);
}

TokenFileWriter::~TokenFileWriter() {
  if (!file_) return;
  std::fclose(file_);
  std::error_code ec;
  fs::remove(partial_, ec);
}

void TokenFileWriter::write(const void* bytes, size_t n) {
  if (n == 0) return;
  TF_CHECK_INPUT(std::fwrite(bytes, 1, n, file_) == n, "token file '", partial_.string(),
                 "': cannot write: ", std::strerror(errno), " (is the disk full?)");
}

void TokenFileWriter::start_document() {
  // An empty document is not recorded: each start is where a document's first id is.
  if (document_starts_.empty() || document_starts_.back() != static_cast<uint64_t>(count_))
    document_starts_.push_back(static_cast<uint64_t>(count_));
}

void TokenFileWriter::pack(std::span<const int32_t> ids, std::vector<char>& packed) const {
  const int64_t limit = info_.vocab_size > 0 ? static_cast<int64_t>(info_.vocab_size)
                        : info_.width == 2    ? 65536
                                              : std::numeric_limits<int32_t>::max();
  for (const int32_t id : ids)
    TF_CHECK_INPUT(id >= 0 && id < limit, "token file '", path_.string(), "': id ", id, " does not fit (ids below ",
                   limit, ")");
  packed.resize(ids.size() * static_cast<size_t>(info_.width));
  if (ids.empty()) return;  // (memcpy may not be given the null data of an empty span)
  if (info_.width == 4) {
    std::memcpy(packed.data(), ids.data(), ids.size_bytes());
  } else {
    auto* narrow = reinterpret_cast<uint16_t*>(packed.data());  // vector<char>'s storage is aligned for any type
    for (size_t i = 0; i < ids.size(); ++i) narrow[i] = static_cast<uint16_t>(ids[i]);
  }
}

void TokenFileWriter::append_packed(std::span<const char> packed) {
  write(packed.data(), packed.size());
  count_ += static_cast<int64_t>(packed.size()) / info_.width;
  start_writeback();
}

// Note [write-behind]: a corpus of gigabytes writes gigabytes of ids. Left to the kernel, they pile up
// in the page cache as dirty pages and finish()'s fsync then waits for all of them at once (on a 2 GB
// corpus, seconds during which nothing else happens). Asking for the write-back of every finished
// 32 MB as it comes (sync_file_range, SYNC_FILE_RANGE_WRITE: start it, do not wait) lets the disk
// write while the next chunks are encoded; fsync still makes the whole file durable at the end.
void TokenFileWriter::start_writeback() {
  constexpr int64_t kStep = int64_t{32} << 20;
  const int64_t written = kTokenFileHeaderBytes + count_ * info_.width;
  if (written - written_back_ < kStep) return;
  if (std::fflush(file_) != 0) return;  // (write() reports a failing disk; this is only a hint)
  ::sync_file_range(::fileno(file_), written_back_, written - written_back_, SYNC_FILE_RANGE_WRITE);
  written_back_ = written;
}

void TokenFileWriter::append(std::span<const int32_t> ids) {
  pack(ids, packed_);
  append_packed(packed_);
}

void TokenFileWriter::finish() {
  TF_CHECK(file_, "TokenFileWriter::finish: already finished");
  const bool shard = info_.format == TokenFileFormat::shard;
  TF_CHECK_INPUT(shard || count_ <= std::numeric_limits<int32_t>::max(), "token file '", path_.string(), "': ",
                 count_, " ids; an llm.c token file holds at most 2^31 - 1");
  if (shard) {
    if (document_starts_.empty() || document_starts_.front() != 0)
      document_starts_.insert(document_starts_.begin(), 0);
    const int64_t pad = round_up_8(kTokenFileHeaderBytes + count_ * info_.width) - (kTokenFileHeaderBytes + count_ * info_.width);
    const std::array<char, 8> zeros{};
    write(zeros.data(), static_cast<size_t>(pad));
    write(document_starts_.data(), document_starts_.size() * sizeof(uint64_t));
  }
  const Header h = header_of(info_, count_, static_cast<int64_t>(document_starts_.size()));
  const bool ok = std::fseek(file_, 0, SEEK_SET) == 0 && std::fwrite(h.data(), sizeof h, 1, file_) == 1 &&
                  std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const int error = errno;
  const int closed = std::fclose(file_);
  file_ = nullptr;
  std::error_code ec;
  if (!ok || closed != 0) {
    fs::remove(partial_, ec);
    TF_CHECK_INPUT(false, "token file '", partial_.string(), "': cannot finish: ", std::strerror(error),
                   " (is the disk full?)");
  }
  std::error_code renamed;
  fs::rename(partial_, path_, renamed);
  if (renamed) fs::remove(partial_, ec);
  TF_CHECK_INPUT(!renamed, "token file '", path_.string(), "': cannot rename the finished file into place: ",
                 renamed.message());
}

}  // namespace tf::data
