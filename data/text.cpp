// Reading text files and folders, with UTF-8 validation.
#include "data/text.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include "framework/error.h"
#include "framework/looked_for.h"

namespace tf::data {

namespace fs = std::filesystem;

size_t utf8_sequence_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  // Lead byte -> length and the allowed range of the second byte (RFC 3629, table 3-7 of Unicode):
  // the narrowed ranges after E0, ED, F0 and F4 exclude overlong forms, surrogates and > U+10FFFF.
  size_t length = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) length = 2;
  else if (b0 == 0xE0) length = 3, lo = 0xA0;
  else if (b0 >= 0xE1 && b0 <= 0xEC) length = 3;
  else if (b0 == 0xED) length = 3, hi = 0x9F;
  else if (b0 >= 0xEE && b0 <= 0xEF) length = 3;
  else if (b0 == 0xF0) length = 4, lo = 0x90;
  else if (b0 >= 0xF1 && b0 <= 0xF3) length = 4;
  else if (b0 == 0xF4) length = 4, hi = 0x8F;
  else return 0;  // 80..C1 (continuation or overlong 2-byte lead) and F5..FF never start a sequence
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < length; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return length;
}

size_t first_invalid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    // ASCII fast path, eight bytes at a time: none has its high bit set.
    uint64_t eight;
    if (i + 8 <= text.size() && (std::memcpy(&eight, text.data() + i, 8), (eight & 0x8080808080808080ull) == 0)) {
      i += 8;
      continue;
    }
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) return i;
    i += length;
  }
  return std::string_view::npos;
}

namespace {

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  TF_CHECK_INPUT(in, "read_text: cannot open '", file.string(), "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TF_CHECK_INPUT(!in.bad(), "read_text: error while reading '", file.string(), "'");
  const size_t bad = first_invalid_utf8(text);
  TF_CHECK_INPUT(bad == std::string::npos, "read_text: '", file.string(), "' is not valid UTF-8: byte offset ",
                 bad, " (byte 0x", std::hex, static_cast<int>(static_cast<unsigned char>(text[bad])), ")");
  return text;
}

}  // namespace

std::vector<fs::path> regular_files_in(const fs::path& folder, const char* who) {
  // The error_code forms throughout: a symlink loop or an unreadable entry in a user's folder is bad
  // input that names its path, not a filesystem_error escaping as an internal error.
  std::error_code ec;
  fs::directory_iterator it(folder, ec);
  TF_CHECK_INPUT(!ec, who, ": cannot list the folder '", folder.string(), "': ", ec.message());
  std::vector<fs::path> files;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    TF_CHECK_INPUT(!ec, who, ": cannot list the folder '", folder.string(), "': ", ec.message());
    std::error_code entry_ec;
    const bool regular = it->is_regular_file(entry_ec);
    TF_CHECK_INPUT(!entry_ec, who, ": '", it->path().string(), "': ", entry_ec.message(),
                   " (a symbolic link loop, or an entry this user cannot read?)");
    if (regular) files.push_back(it->path());
  }
  return files;
}

std::string read_text(const fs::path& path) {
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  TF_CHECK_INPUT(!ec, "read_text: '", path.string(), "': ", ec.message());
  TF_CHECK_INPUT(exists, "read_text: '", path.string(), "' does not exist (", looked_for(path), ")");
  if (!fs::is_directory(path, ec)) return read_file(path);

  std::vector<fs::path> files = regular_files_in(path, "read_text");
  TF_CHECK_INPUT(!files.empty(), "read_text: folder '", path.string(), "' holds no files");
  std::sort(files.begin(), files.end());
  std::string text;
  for (size_t i = 0; i < files.size(); ++i) {
    if (i) text += '\n';
    text += read_file(files[i]);
  }
  return text;
}

}  // namespace tf::data
