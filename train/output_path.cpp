// Output paths checked before the work; see output_path.h.
#include "train/output_path.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "framework/error.h"

namespace tf::train {

namespace fs = std::filesystem;

namespace {

// "" when this process may create files in the folder (or replace the file), else the system's reason
// ("Permission denied", "Read-only file system").
std::string write_refusal(const fs::path& path) {
  return ::access(path.c_str(), W_OK) == 0 ? std::string() : std::strerror(errno);
}

// The folder a relative name without one lies in.
fs::path folder_of(const fs::path& file) { return file.parent_path().empty() ? fs::path(".") : file.parent_path(); }

}  // namespace

void check_output_file(const std::string& option, const fs::path& file) {
  const std::string at = concat(option, " '", file.string(), "'");
  std::error_code ec;
  TF_CHECK_INPUT(!fs::is_directory(file, ec), at, " is a folder; expected the name of a file to write");
  const fs::path folder = folder_of(file);
  const std::string expected = "; expected a file in an existing folder that can be written";
  const fs::file_status status = fs::status(folder, ec);
  TF_CHECK_INPUT(fs::exists(status), at, ": the folder '", folder.string(), "' does not exist", expected);
  TF_CHECK_INPUT(fs::is_directory(status), at, ": '", folder.string(), "' is a file, not a folder", expected);
  const std::string folder_refusal = write_refusal(folder);
  TF_CHECK_INPUT(folder_refusal.empty(), at, ": the folder '", folder.string(), "' cannot be written (", folder_refusal,
                 ")", expected);
  if (fs::exists(file, ec)) {
    const std::string refusal = write_refusal(file);
    TF_CHECK_INPUT(refusal.empty(), at, ": the file exists and cannot be replaced (", refusal,
                   "); expected a file that can be written");
  }
}

void check_output_folder(const std::string& option, const fs::path& dir) {
  const std::string at = concat(option, " '", dir.string(), "'");
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (fs::exists(status)) {
    TF_CHECK_INPUT(fs::is_directory(status), at, " is a file; expected a folder (created when missing)");
    const std::string refusal = write_refusal(dir);
    TF_CHECK_INPUT(refusal.empty(), at, ": the folder cannot be written (", refusal, ")");
    return;
  }
  fs::path ancestor = folder_of(dir);  // the nearest that exists: "a" of "a/b/c", or "." or "/"
  for (fs::path up; !fs::exists(ancestor, ec) && (up = folder_of(ancestor)) != ancestor;) ancestor = up;
  TF_CHECK_INPUT(fs::is_directory(ancestor, ec), at, ": cannot create the folder: '", ancestor.string(),
                 "' is a file, not a folder");
  const std::string refusal = write_refusal(ancestor);
  TF_CHECK_INPUT(refusal.empty(), at, ": cannot create the folder: '", ancestor.string(), "' cannot be written (",
                 refusal, ")");
}

}  // namespace tf::train
