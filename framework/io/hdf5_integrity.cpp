// The integrity header of the HDF5 files H5Writer writes (Note [integrity header] in hdf5_io.h):
// filled into the HDF5 user block once HDF5 has produced the file, and verified before HDF5 reads
// anything of a file. The checksum is zlib's crc32, the one HDF5 itself links.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "framework/io/hdf5_io.h"
#include "framework/io/hdf5_io_common.h"

namespace tf {

namespace hdf5 {

namespace {

constexpr std::string_view kMagic = "tapeformer checkpoint\n";
constexpr std::string_view kCrcKey = "header_crc32 ";
constexpr uint32_t kVersion = 1;
// The header's own checksum line follows the magic line; its crc32 covers every byte after it.
constexpr size_t kCrcLine = kCrcKey.size() + 8 + 1;
constexpr size_t kBodyStart = kMagic.size() + kCrcLine;
// "\x89HDF\r\n\x1a\n": where HDF5 looks for it, at byte 0, 512, 1024, 2048, ...
constexpr std::string_view kSignature{"\x89HDF\r\n\x1a\n", 8};

uint32_t crc(uint32_t running, const char* data, size_t size) {
  return static_cast<uint32_t>(crc32_z(running, reinterpret_cast<const Bytef*>(data), size));
}

std::string hex8(uint32_t v) {
  char out[9];
  std::snprintf(out, sizeof out, "%08x", v);
  return out;
}

// Exactly `size` bytes at `offset`, or fewer only at the end of the file.
size_t read_at(int fd, const std::string& path, char* out, size_t size, uint64_t offset) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    TF_CHECK_INPUT(n >= 0, "cannot read '", path, "': ", std::strerror(errno));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

// crc32 of bytes [offset, offset + size) of the file, read in 1 MiB pieces.
uint32_t crc_of_file(int fd, const std::string& path, uint64_t offset, uint64_t size) {
  std::vector<char> buffer(size_t{1} << 20);
  uint32_t running = crc(0, nullptr, 0);
  for (uint64_t done = 0; done < size;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - done));
    const size_t got = read_at(fd, path, buffer.data(), want, offset + done);
    TF_CHECK_INPUT(got == want, "cannot read '", path, "': it shrank while being read (", offset + done + got,
                   " bytes)");
    running = crc(running, buffer.data(), got);
    done += got;
  }
  return running;
}

// The 512 header bytes for `payload_bytes` of HDF5 data with checksum `payload_crc`.
std::string header_for(uint64_t payload_bytes, uint32_t payload_crc) {
  std::string body = concat("version ", kVersion, "\npayload_offset ", kHeaderBytes, "\npayload_bytes ",
                            payload_bytes, "\npayload_crc32 ", hex8(payload_crc), "\n");
  body.resize(kHeaderBytes - kBodyStart, '\0');
  std::string header = std::string(kMagic) + std::string(kCrcKey) + hex8(crc(crc(0, nullptr, 0), body.data(), body.size())) +
                       "\n" + body;
  TF_CHECK(header.size() == kHeaderBytes, "integrity header of ", header.size(), " bytes, expected ", kHeaderBytes);
  return header;
}

// Reads "<key> <value>\n" at `at` in `text`, advancing `at`; false when the text is not that.
bool field(std::string_view text, size_t& at, std::string_view key, std::string_view& value) {
  if (text.substr(at, key.size()) != key || text.substr(at + key.size(), 1) != " ") return false;
  const size_t start = at + key.size() + 1, end = text.find('\n', start);
  if (end == std::string_view::npos || end == start) return false;
  value = text.substr(start, end - start);
  at = end + 1;
  return true;
}

bool parse_decimal(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 19) return false;  // 19 digits always fit a uint64
  out = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

bool parse_hex8(std::string_view s, uint32_t& out) {
  if (s.size() != 8) return false;
  out = 0;
  for (char c : s) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return false;
    out = out << 4 | static_cast<uint32_t>(digit);
  }
  return true;
}

// Where the file's HDF5 signature is: the first of byte 0, 512, 1024, 2048, ... that holds it.
std::optional<uint64_t> find_signature(int fd, const std::string& path, uint64_t size) {
  char bytes[8];
  for (uint64_t at = 0; at + kSignature.size() <= size; at = at == 0 ? 512 : at * 2) {
    if (read_at(fd, path, bytes, sizeof bytes, at) == sizeof bytes && std::string_view(bytes, 8) == kSignature)
      return at;
  }
  return std::nullopt;
}

}  // namespace

void write_integrity_header(char* file, size_t size) {
  TF_CHECK(size >= kHeaderBytes + kSignature.size() &&
               std::string_view(file + kHeaderBytes, kSignature.size()) == kSignature,
           "integrity header: the HDF5 data does not start at byte ", kHeaderBytes);
  const std::string header = header_for(size - kHeaderBytes, crc(crc(0, nullptr, 0), file + kHeaderBytes,
                                                                 size - kHeaderBytes));
  std::memcpy(file, header.data(), kHeaderBytes);
}

uint32_t verify_integrity(int fd, const std::string& path, uint64_t size) {
  std::string block(kHeaderBytes, '\0');
  block.resize(read_at(fd, path, block.data(), block.size(), 0));
  const std::string where = concat("HDF5 file '", path, "'");
  if (std::string_view(block).substr(0, kSignature.size()) == kSignature) return crc_of_file(fd, path, 0, size);
  if (std::string_view(block).substr(0, kMagic.size()) != kMagic) {
    const std::optional<uint64_t> data_at = find_signature(fd, path, size);
    TF_CHECK_INPUT(data_at, "'", path, "' is not an HDF5 file (no HDF5 signature found)");
    throw InputError(concat(where, ": its first ", *data_at, " bytes, before the HDF5 data, are not a tapeformer "
                            "integrity header: the header is damaged, or another program wrote a user block there"));
  }
  TF_CHECK_INPUT(size >= kHeaderBytes, where, " is truncated: ", size, " bytes, fewer than its ", kHeaderBytes,
                 "-byte integrity header");

  // The header's own checksum first, so that a damaged field is reported as a damaged header
  // rather than as the wrong length or version it now reads as.
  const std::string_view text(block);
  size_t at = kMagic.size();
  std::string_view value;
  uint32_t header_crc = 0;
  const bool crc_ok = field(text, at, kCrcKey.substr(0, kCrcKey.size() - 1), value) && parse_hex8(value, header_crc) &&
                      at == kBodyStart;
  const uint32_t actual_header_crc = crc(crc(0, nullptr, 0), block.data() + kBodyStart, kHeaderBytes - kBodyStart);
  TF_CHECK_INPUT(crc_ok && header_crc == actual_header_crc, where,
                 ": its integrity header is damaged (the header's own checksum does not match): the file was "
                 "altered or damaged after it was written");

  uint64_t version = 0, offset = 0, payload_bytes = 0;
  uint32_t payload_crc = 0;
  TF_CHECK_INPUT(field(text, at, "version", value) && parse_decimal(value, version), where,
                 ": its integrity header has no version line");
  TF_CHECK_INPUT(version == kVersion, where, ": integrity header version ", version,
                 " is not supported (this build reads version ", kVersion, ")");
  TF_CHECK_INPUT(field(text, at, "payload_offset", value) && parse_decimal(value, offset) && offset == kHeaderBytes &&
                     field(text, at, "payload_bytes", value) && parse_decimal(value, payload_bytes) &&
                     field(text, at, "payload_crc32", value) && parse_hex8(value, payload_crc),
                 where, ": its integrity header is malformed (not written by tapeformer?)");

  const uint64_t actual_bytes = size - kHeaderBytes;
  TF_CHECK_INPUT(actual_bytes >= payload_bytes, where, " is truncated: its integrity header says ", payload_bytes,
                 " bytes after the header, the file has ", actual_bytes);
  TF_CHECK_INPUT(actual_bytes == payload_bytes, where, " has ", actual_bytes,
                 " bytes after its integrity header, more than the ", payload_bytes,
                 " the header says: something was appended after it was written");
  const uint32_t actual_crc = crc_of_file(fd, path, kHeaderBytes, payload_bytes);
  TF_CHECK_INPUT(actual_crc == payload_crc, where, ": checksum mismatch: the ", payload_bytes,
                 " bytes after the integrity header have crc32 ", hex8(actual_crc), ", the header says ",
                 hex8(payload_crc), ": the file was altered or damaged after it was written");
  return payload_crc;
}

}  // namespace hdf5

void reseal_hdf5_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  TF_CHECK_INPUT(fd >= 0, "cannot reseal '", path, "': ", std::strerror(errno));
  try {
    struct stat st {};
    TF_CHECK_INPUT(::fstat(fd, &st) == 0, "cannot reseal '", path, "': ", std::strerror(errno));
    const auto size = static_cast<uint64_t>(st.st_size);
    char signature[8] = {};
    const bool room = size >= hdf5::kHeaderBytes + 8 &&
                      hdf5::read_at(fd, path, signature, 8, hdf5::kHeaderBytes) == 8 &&
                      std::string_view(signature, 8) == hdf5::kSignature;
    TF_CHECK_INPUT(room, "cannot reseal '", path, "': its HDF5 data does not start at byte ", hdf5::kHeaderBytes,
                   ", so it has no room for an integrity header (files written by H5Writer have it)");
    const uint64_t payload = size - hdf5::kHeaderBytes;
    const std::string header = hdf5::header_for(payload, hdf5::crc_of_file(fd, path, hdf5::kHeaderBytes, payload));
    TF_CHECK_INPUT(::pwrite(fd, header.data(), header.size(), 0) == static_cast<ssize_t>(header.size()) &&
                       ::fsync(fd) == 0,
                   "cannot reseal '", path, "': ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

}  // namespace tf
