// A file that appears whole or not at all: written to "<file>.partial-<pid>", flushed to disk and
// renamed over `file` by commit(). Destroyed uncommitted (an error, an exception), the partial file is
// removed and `file`, if it existed, is untouched.
//
//   AtomicFile out("model.gguf");
//   out.write(header);  out.write(data);
//   out.commit();       // fsync + rename; InputError naming the file when the disk refuses
#pragma once
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace tf {

class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path file);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::span<const char> bytes);
  void write(std::string_view text) { write(std::span<const char>(text.data(), text.size())); }
  void write(const std::string& text) { write(std::string_view(text)); }
  void pad(size_t zeros);  // that many zero bytes
  void commit();

 private:
  std::filesystem::path file_, partial_;
  std::FILE* out_ = nullptr;
};

// The whole of `text` as `file`, atomically.
void write_file_atomically(const std::filesystem::path& file, std::string_view text);

}  // namespace tf
