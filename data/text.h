// Reading training text: a file or a folder of files, checked to be valid UTF-8.
//
//   std::string train = tf::data::read_text("corpus/train.txt");
//   std::string all = tf::data::read_text("my_corpus/");  // sorted files, joined with '\n'
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>
#include <string_view>

namespace tf::data {

// The contents of a file, or of every regular file directly inside a folder (sorted by name,
// concatenated with one '\n' between files). Throws tf::InputError when the path is missing or
// unreadable, a folder holds no files, or a file is not valid UTF-8 (naming the file and the byte
// offset of the first bad byte within it).
std::string read_text(const std::filesystem::path& path);

// The regular files directly in `folder` (symbolic links to files count), unsorted. An entry that
// cannot be examined (a symbolic link loop, no permission) is an InputError naming it, after `who`.
std::vector<std::filesystem::path> regular_files_in(const std::filesystem::path& folder, const char* who);

// Byte offset of the first byte that does not start a well-formed UTF-8 sequence (RFC 3629:
// no overlong forms, no surrogates U+D800..DFFF, nothing above U+10FFFF, no truncated sequence),
// or std::string_view::npos when the whole text is valid.
size_t first_invalid_utf8(std::string_view text);

// Length in bytes of the well-formed UTF-8 sequence starting at text[i], or 0 when none does.
size_t utf8_sequence_length(std::string_view text, size_t i);

}  // namespace tf::data
