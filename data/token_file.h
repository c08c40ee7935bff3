// Token files: a tokenized text on disk, mapped (never read whole) for training (docs/data.md).
//
// Two formats share one shape: a header of 256 little-endian int32 slots (1,024 bytes), then the ids
// as a plain array, so numpy.memmap(path, dtype, offset=1024, shape=(count,)) reads either.
//
// tapeformer's shard (slot 0 = kShardMagic):
//   slot 0       magic 20261203            slot 1    version 1
//   slot 2       bytes per id: 2 (uint16, vocabularies up to 65,536) or 4 (int32)
//   slots 4-5    uint64 id count           slots 6-7 uint64 document count
//   slots 8-9    uint64 tokenizer fingerprint (fnv1a64 of Tokenizer::to_string())
//   slots 10-11  uint64 source fingerprint (the text files it was made from, sources.h)
//   slots 12-13  uint64 characters (code points) of that text, for bits per character
//   slots 14-15  uint64 vocabulary size: every id is below it
//   slots 16-17  uint64 ids that are the tokenizer's unknown token (text outside a char vocabulary)
//   then the ids; then, at the next multiple of 8 bytes, one uint64 per document: its first id's index.
// llm.c's token file (Karpathy's llm.c, dev/data/data_common.py): slot 0 = 20240520, slot 1 = 1,
// slot 2 = id count, uint16 ids; no documents or fingerprints.
//
// A file's size must be exactly what its header declares: a truncated or padded file is refused.
// Writers write `<file>.partial-<pid>` and rename it only when complete, so a failed write (a full
// disk) never leaves a file that looks whole.
//
//   tf::data::TokenFileWriter w(path, info);            // info: width, fingerprints, vocabulary
//   w.start_document(); w.append(ids);                  // as many as needed, in order
//   w.finish();                                         // header written, fsync, rename
//   tf::data::TokenFile f = tf::data::open_token_file(path);  // mapped; f.tokens[i]
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <vector>

#include "data/tokens.h"

namespace tf::data {

inline constexpr int32_t kShardMagic = 20261203;
inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int64_t kTokenFileHeaderBytes = 1024;

enum class TokenFileFormat { shard, llmc };

struct TokenFileInfo {
  TokenFileFormat format = TokenFileFormat::shard;
  int width = 2;                      // bytes per id
  uint64_t tokenizer_fingerprint = 0;  // shard only, as are the fields below
  uint64_t source_fingerprint = 0;
  uint64_t characters = 0;
  uint64_t vocab_size = 0;
  uint64_t unknown = 0;
};

// The id width a vocabulary needs: 2 up to 65,536 ids, else 4.
int token_width(int64_t vocab_size);

struct TokenFile {
  TokenFileInfo info;
  Tokens tokens;
  std::vector<uint64_t> document_starts;  // shard: one per document, ascending, the first 0
};

// Maps `path` (either format). An InputError names the file and what is wrong: missing, not a token
// file, another version, or a size that does not match its header (truncated).
TokenFile open_token_file(const std::filesystem::path& path);

class TokenFileWriter {
 public:
  TokenFileWriter(std::filesystem::path path, TokenFileInfo info);
  ~TokenFileWriter();  // unfinished: the partial file is removed
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  void start_document();  // the next id appended begins a document (shard only; empty ones are not kept)
  // InputError when an id does not fit the width (or the vocabulary), or the disk is full.
  void append(std::span<const int32_t> ids);
  // append() in two halves, the first for other threads (prepare.cpp packs in parallel): pack checks
  // the ids and lays them out at the file's width; append_packed writes them.
  void pack(std::span<const int32_t> ids, std::vector<char>& packed) const;
  void append_packed(std::span<const char> packed);
  int64_t count() const { return count_; }
  // Known only at the end: the text's characters and unknown ids.
  void set_counts(uint64_t characters, uint64_t unknown) {
    info_.characters = characters;
    info_.unknown = unknown;
  }
  void finish();

 private:
  void write(const void* bytes, size_t n);
  void start_writeback();  // Note [write-behind]
  std::filesystem::path path_, partial_;
  TokenFileInfo info_;
  std::FILE* file_ = nullptr;
  int64_t count_ = 0;
  int64_t written_back_ = 0;  // bytes whose write-back start_writeback() has asked for
  std::vector<uint64_t> document_starts_;
  std::vector<char> packed_;  // append's staging
};

}  // namespace tf::data
