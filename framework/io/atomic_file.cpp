// Files written whole or not at all (framework/io/atomic_file.h).
#include "framework/io/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "framework/error.h"

namespace tf {

namespace fs = std::filesystem;

AtomicFile::AtomicFile(fs::path file)
    : file_(std::move(file)), partial_(file_.string() + ".partial-" + std::to_string(::getpid())) {
  out_ = std::fopen(partial_.c_str(), "wb");
  TF_CHECK_INPUT(out_, "'", partial_.string(), "': cannot create: ", std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (!out_) return;
  std::fclose(out_);
  std::error_code ec;
  fs::remove(partial_, ec);
}

void AtomicFile::write(std::span<const char> bytes) {
  TF_CHECK(out_, "AtomicFile: '", file_.string(), "' is already committed");
  if (bytes.empty()) return;
  TF_CHECK_INPUT(std::fwrite(bytes.data(), 1, bytes.size(), out_) == bytes.size(), "'", partial_.string(),
                 "': cannot write: ", std::strerror(errno), " (is the disk full?)");
}

void AtomicFile::pad(size_t zeros) {
  const std::vector<char> z(zeros, 0);
  write(z);
}

void AtomicFile::commit() {
  TF_CHECK(out_, "AtomicFile: '", file_.string(), "' is already committed");
  const bool ok = std::fflush(out_) == 0 && ::fsync(::fileno(out_)) == 0;
  const int error = errno;
  const bool closed = std::fclose(out_) == 0;
  out_ = nullptr;
  std::error_code ec;
  if (!ok || !closed) {
    fs::remove(partial_, ec);
    TF_CHECK_INPUT(false, "'", partial_.string(), "': cannot finish: ", std::strerror(error), " (is the disk full?)");
  }
  fs::rename(partial_, file_, ec);
  if (ec) {
    fs::remove(partial_, ec);
    TF_CHECK_INPUT(false, "'", file_.string(), "': cannot rename into place: ", ec.message());
  }
}

void write_file_atomically(const fs::path& file, std::string_view text) {
  AtomicFile out(file);
  out.write(text);
  out.commit();
}

}  // namespace tf
