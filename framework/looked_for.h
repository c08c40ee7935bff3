// How a message names a file or folder that is not there: the absolute path it was looked for at,
// since a relative path (a recipe's data.train_path, a checkpoint on the command line) starts from
// the folder the program runs in, which is often not the one the user had in mind.
//
//   TF_CHECK_INPUT(exists, "'", path.string(), "' does not exist (", tf::looked_for(path), ")");
#pragma once
#include <filesystem>
#include <string>

namespace tf {

// "looked for /abs/path; relative paths start from the current folder"
inline std::string looked_for(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return "looked for " + (ec ? path : absolute).string() + "; relative paths start from the current folder";
}

}  // namespace tf
