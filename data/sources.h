// The text files a corpus is made of: resolved from a recipe's paths, fingerprinted, read as a stream.
//
// A path is a file, a folder (every regular file under it, recursively, sorted by path; names
// beginning with '.' are skipped, as are their folders), or a glob: '*', '?' and '[...]' match within
// one folder name, and a whole '**' component matches any number of folders ("linux/**/*.c").
//
//   auto files = tf::data::resolve_sources({"my_corpus/", "extra/*.txt"}, "data.train_path");
//   uint64_t f = tf::data::listing_fingerprint(files);   // changes when any file does
//   tf::data::TextStream s(files, 4 << 20, split);       // chunks cut where `split` allows
//   while (auto chunk = s.next()) encode(chunk->text);
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tf::data {

struct SourceFile {
  std::string path;  // absolute (a string: a corpus may list 100,000 files, and an fs::path keeps
                     // a list of its components besides its text)
  uint64_t size = 0;
  int64_t mtime_ns = 0;  // last modification, nanoseconds since the epoch
  uint64_t begin = 0, end = UINT64_MAX;  // the bytes TextStream reads: [begin, min(end, size))
};

// The files of `paths` as absolute paths, in order (each path's files sorted), without repeats. An InputError names
// `key` and the path when one does not exist, a folder or glob holds no files, or a file cannot be
// examined.
std::vector<SourceFile> resolve_sources(const std::vector<std::string>& paths, const std::string& key);

// FNV-1a 64 over every file's path, size and modification time: equal listings, equal fingerprints;
// a file edited, added, removed or renamed changes it (as make and ccache judge freshness).
uint64_t listing_fingerprint(const std::vector<SourceFile>& files);

// Whether `file` is as listed; when not, what differs ("vanished", "is 12 bytes, was 10", ...).
std::optional<std::string> source_change(const SourceFile& file);

// Where a text may be cut so that both sides encode as the whole does: the smallest cut >= `at`
// that the tokenizer allows (Tokenizer::split_point), or text.size() when there is none.
using SplitPoint = std::function<size_t(std::string_view text, size_t at)>;

// Reads the files one after another in chunks of about `chunk_bytes`, each ending at a split point
// (or at its file's end), and checks that every file is unchanged since listed. UTF-8 is checked by
// the reader (in parallel, prepare.cpp), with check_utf8.
class TextStream {
 public:
  struct Chunk {
    std::string text;
    size_t file = 0;          // index into the files
    uint64_t offset = 0;      // of text[0] within that file
    bool file_start = false;  // the chunk begins its file's part (SourceFile::begin)
    bool file_end = false;    // the chunk ends it
  };
  TextStream(std::vector<SourceFile> files, size_t chunk_bytes, SplitPoint split);
  // The next chunk, or nothing after the last file. InputError: a file that cannot be read, or that
  // changed since it was listed.
  std::optional<Chunk> next();
  // InputError naming the file and byte offset when chunk.text[bad] is where its UTF-8 breaks
  // (bad: first_invalid_utf8(chunk.text), npos when valid).
  void check_utf8(const Chunk& chunk, size_t bad) const;
  // Gives a chunk's buffer back for a later chunk to read into (its memory, already paged in).
  void recycle(std::string&& buffer);

 private:
  bool fill();        // reads more of the current file into pending_; false at its end
  void open_file();   // opens files_[file_], checking it is as listed
  Chunk take(size_t n, bool file_end);
  std::vector<SourceFile> files_;
  size_t chunk_bytes_;
  SplitPoint split_;
  size_t file_ = 0;
  uint64_t offset_ = 0;  // of pending_[0] in the current file
  std::string pending_;
  std::vector<std::string> spare_;  // recycled buffers
  std::ifstream in_;
  bool open_ = false;  // in_ holds files_[file_]
};

}  // namespace tf::data
