// A corpus's text files: resolving paths, folders and globs; fingerprints; reading in chunks.
#include "data/sources.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>

#include "data/hash.h"
#include "data/text.h"
#include "framework/error.h"

namespace tf::data {

namespace fs = std::filesystem;

namespace {

bool has_wildcard(std::string_view s) { return s.find_first_of("*?[") != std::string_view::npos; }

SourceFile stat_source(const std::string& path, const std::string& key) {
  struct stat st {};
  TF_CHECK_INPUT(::stat(path.c_str(), &st) == 0, key, ": cannot examine '", path, "': ", std::strerror(errno));
  return {path, static_cast<uint64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// Does `parts` (a path relative to the glob's base, by component) match `pattern` (the same)?
// A '**' component matches zero or more components; others match one, by fnmatch.
bool glob_match(const std::vector<std::string>& pattern, size_t p, const std::vector<std::string>& parts, size_t i) {
  if (p == pattern.size()) return i == parts.size();
  if (pattern[p] == "**") {
    for (size_t k = i; k <= parts.size(); ++k)
      if (glob_match(pattern, p + 1, parts, k)) return true;
    return false;
  }
  return i < parts.size() && ::fnmatch(pattern[p].c_str(), parts[i].c_str(), FNM_PERIOD) == 0 &&
         glob_match(pattern, p + 1, parts, i + 1);
}

// Path order (component by component, as fs::path compares) on the text: '/' sorts first.
bool path_less(const std::string& a, const std::string& b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return (x == '/' ? '\0' : x) < (y == '/' ? '\0' : y);
  });
}

// Every regular file under `folder` whose path relative to it satisfies `keep` (all when it is
// empty), sorted. Hidden entries (a name beginning with '.') are skipped, folders with their contents.
std::vector<std::string> walk(const fs::path& folder, const std::string& key,
                              const std::function<bool(const fs::path&)>& keep) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(folder, fs::directory_options::follow_directory_symlink, ec);
  TF_CHECK_INPUT(!ec, key, ": cannot list the folder '", folder.string(), "': ", ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    TF_CHECK_INPUT(!ec, key, ": cannot list the folder '", folder.string(), "': ", ec.message());
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    std::error_code entry_ec;
    const bool regular = it->is_regular_file(entry_ec);
    TF_CHECK_INPUT(!entry_ec, key, ": '", it->path().string(), "': ", entry_ec.message(),
                   " (a symbolic link loop, or an entry this user cannot read?)");
    if (regular && (!keep || keep(it->path().lexically_relative(folder)))) files.push_back(it->path().native());
  }
  std::sort(files.begin(), files.end(), path_less);
  return files;
}

std::vector<std::string> expand_glob(const std::string& pattern, const std::string& key) {
  // The base: the components before the first one with a wildcard.
  const fs::path whole(pattern);
  fs::path base;
  std::vector<std::string> rest;
  for (const fs::path& part : whole) {
    if (rest.empty() && !has_wildcard(part.string())) base /= part;
    else rest.push_back(part.string());
  }
  if (base.empty()) base = ".";
  std::error_code ec;
  base = fs::absolute(base, ec).lexically_normal();  // so that every match is absolute and normal
  TF_CHECK_INPUT(fs::is_directory(base, ec), key, ": the glob '", pattern, "' starts from '", base.string(),
                 "', which is not a folder");
  const bool deep = std::find(rest.begin(), rest.end(), "**") != rest.end() || rest.size() > 1;
  std::vector<std::string> files;
  const auto matches = [&](const fs::path& relative) {
    std::vector<std::string> parts;
    for (const fs::path& p : relative) parts.push_back(p.string());
    return glob_match(rest, 0, parts, 0);
  };
  if (deep) return walk(base, key, matches);
  for (const fs::path& f : regular_files_in(base, key.c_str()))
    if (matches(f.filename())) files.push_back(f.native());
  std::sort(files.begin(), files.end(), path_less);
  return files;
}

}  // namespace

std::vector<SourceFile> resolve_sources(const std::vector<std::string>& paths, const std::string& key) {
  TF_CHECK_INPUT(!paths.empty(), key, ": no text files given");
  std::vector<SourceFile> files;
  std::unordered_set<std::string> seen;
  for (const std::string& given : paths) {
    std::vector<std::string> found;
    std::error_code ec;
    if (fs::exists(given, ec)) {
      if (fs::is_directory(given, ec)) {
        // From the folder's absolute form: every path found is then absolute and normal already.
        found = walk(fs::absolute(given, ec).lexically_normal(), key, nullptr);
        TF_CHECK_INPUT(!found.empty(), key, ": the folder '", given, "' holds no files");
      } else {
        found.push_back(given);
      }
    } else {
      TF_CHECK_INPUT(has_wildcard(given), key, ": '", given, "' does not exist (looked for ",
                     fs::absolute(given, ec).string(), "; relative paths start from the current folder)");
      found = expand_glob(given, key);
      TF_CHECK_INPUT(!found.empty(), key, ": the glob '", given, "' matches no files (looked from ",
                     fs::absolute(given, ec).parent_path().string(), ")");
    }
    // Absolute: the same files named from another folder, or relatively, are the same listing.
    files.reserve(files.size() + found.size());
    for (std::string& f : found) {
      if (f.empty() || f[0] != '/') f = fs::absolute(f, ec).lexically_normal().native();
      if (seen.insert(f).second) files.push_back(stat_source(f, key));
    }
  }
  return files;
}

uint64_t listing_fingerprint(const std::vector<SourceFile>& files) {
  uint64_t h = fnv1a64(std::to_string(files.size()) + "\n");
  for (const SourceFile& f : files)
    h = fnv1a64(f.path + "\t" + std::to_string(f.size) + "\t" + std::to_string(f.mtime_ns) + "\n", h);
  return h;
}

std::optional<std::string> source_change(const SourceFile& file) {
  struct stat st {};
  if (::stat(file.path.c_str(), &st) != 0) return "vanished (" + std::string(std::strerror(errno)) + ")";
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size != file.size) return "is " + std::to_string(size) + " bytes, was " + std::to_string(file.size);
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (mtime != file.mtime_ns) return "was modified (its modification time changed)";
  return std::nullopt;
}

// ---- TextStream ---------------------------------------------------------------------------

TextStream::TextStream(std::vector<SourceFile> files, size_t chunk_bytes, SplitPoint split)
    : files_(std::move(files)), chunk_bytes_(std::max<size_t>(chunk_bytes, 1)), split_(std::move(split)) {}

void TextStream::open_file() {
  const SourceFile& f = files_[file_];
  const auto changed = source_change(f);
  TF_CHECK_INPUT(!changed, "'", f.path, "' ", changed.value_or(""),
                 " since the corpus was listed: preparation reads a stable corpus; run it again");
  in_ = std::ifstream(f.path, std::ios::binary);
  TF_CHECK_INPUT(in_, "'", f.path, "': cannot open: ", std::strerror(errno));
  open_ = true;
  offset_ = std::min(f.begin, f.size);
  in_.seekg(static_cast<std::streamoff>(offset_));
  pending_.clear();
}

bool TextStream::fill() {
  const SourceFile& f = files_[file_];
  const size_t had = pending_.size();
  const uint64_t left = std::min(f.end, f.size) - std::min(offset_ + had, std::min(f.end, f.size));
  const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk_bytes_, left));
  pending_.resize(had + want);
  in_.read(pending_.data() + had, static_cast<std::streamsize>(want));
  const auto got = static_cast<size_t>(in_.gcount());
  pending_.resize(had + got);
  TF_CHECK_INPUT(!in_.bad(), "'", f.path, "': a read error after ", offset_ + had + got, " bytes");
  return got > 0 && got == want && want < left;
}

TextStream::Chunk TextStream::take(size_t n, bool file_end) {
  Chunk c;
  // The chunk takes the buffer; only the few bytes after the cut are copied, into a recycled one.
  std::string rest;
  if (!spare_.empty()) {
    rest = std::move(spare_.back());
    spare_.pop_back();
  }
  rest.assign(pending_, n);
  pending_.resize(n);
  c.text = std::move(pending_);
  pending_ = std::move(rest);
  c.file = file_;
  c.offset = offset_;
  c.file_start = offset_ == std::min(files_[file_].begin, files_[file_].size);
  c.file_end = file_end;
  offset_ += n;
  return c;
}

void TextStream::recycle(std::string&& buffer) {
  buffer.clear();
  spare_.push_back(std::move(buffer));
}

void TextStream::check_utf8(const Chunk& c, size_t bad) const {
  TF_CHECK_INPUT(bad == std::string::npos, "'", files_[c.file].path, "' is not valid UTF-8: byte offset ",
                 c.offset + bad, " (byte 0x", std::hex, static_cast<int>(static_cast<unsigned char>(c.text[bad])), ")");
}

std::optional<TextStream::Chunk> TextStream::next() {
  if (file_ >= files_.size()) return std::nullopt;
  if (!open_) open_file();
  bool more = true;
  for (;;) {
    while (more && pending_.size() < chunk_bytes_) more = fill();
    if (more) {
      // A cut near the buffer's end (in its last 64 KB), so that little is copied over to the next chunk.
      const size_t cut = split_(pending_, pending_.size() - std::min<size_t>(pending_.size() / 4, 64u << 10));
      if (cut < pending_.size() && cut > 0) return take(cut, false);
      more = fill();  // no split point yet: read on until one comes or the file ends
      continue;
    }
    // The file's end: it must be what was listed (a file growing or shrinking while read is refused).
    const SourceFile& f = files_[file_];
    const uint64_t read = offset_ + pending_.size();
    const auto changed = source_change(f);
    TF_CHECK_INPUT(!changed && read == std::min(f.end, f.size), "'", f.path, "' ",
                   changed.value_or("ended after " + std::to_string(read) + " bytes, was " + std::to_string(f.size)),
                   " while it was being read: preparation reads a stable corpus; run it again");
    Chunk last = take(pending_.size(), true);
    in_.close();
    open_ = false;
    ++file_;
    return last;
  }
}

}  // namespace tf::data
