// Preparing a corpus: text files -> a tokenizer and two token shards (training, validation), once.
//
// A streaming pass (docs/data.md, "Preparation"): the files are read in chunks, each checked to be
// UTF-8; the tokenizer is trained (char: every code point of the training split; bpe: on a sample of
// at most `sample_bytes`, spread over it); then the chunks are encoded in parallel and appended in
// order to `<cache_dir>/<key>/train.tokens` and `val.tokens`. Memory is bounded by a few chunks per
// thread, not by the corpus. A later call finds the shards and maps them (a warm start reads no text),
// unless a file changed since (then it prepares again, saying which).
//
// Each file is a document, encoded on its own and followed by a line break unless it is the last of
// its split (so no token spans two files); the char tokenizer gives exactly the ids of the files
// joined with '\n'.
//
// The validation split, when no validation paths are given: with 10 or more files, every tenth file
// (the 10th, 20th, ... in order) is held out; with fewer, the last 10% of the text (files joined with
// '\n'), cut at the first line break at or after the 90% mark.
//
//   tf::data::CorpusSpec corpus{{"my_corpus/"}, {}};
//   tf::data::TokenizerSpec tok{"char"};
//   tf::data::PreparedCorpus p = tf::data::prepare_corpus(corpus, tok, {"cache"});
//   p.train.tokens.size();  p.tokenizer->decode(...);
#pragma once
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "data/token_file.h"
#include "data/tokenizer.h"

namespace tf::data {

struct CorpusSpec {
  std::vector<std::string> train_paths;  // files, folders or globs (sources.h)
  std::vector<std::string> val_paths;    // empty: held out from the training files by the rule above
  std::string train_key = "data.train_path", val_key = "data.val_path";  // named in errors
};

struct TokenizerSpec {
  std::string kind = "char";  // char | bpe
  int64_t bpe_vocab_size = 1024;
  std::vector<std::string> specials;  // added after the learned vocabulary ([PAD] ... for BERT)
  uint64_t sample_bytes = 64000000;  // bpe: the most text its merges are learned from (data.bpe_sample_mb)
  // A tokenizer to use instead of training one (a checkpoint's: its embedding rows are these ids).
  const Tokenizer* given = nullptr;
};

struct PrepareOptions {
  std::filesystem::path cache_dir = "shards";  // a recipe gives <data root>/shards (data/root.h)
  int threads = 0;                 // 0: OpenMP's default
  std::ostream* progress = nullptr;  // where "preparing ..." lines go; nullptr: silent
  bool write = true;               // false (train --dry-run): reuse shards, else only count the ids
  size_t chunk_bytes = 1u << 20;
};

struct PreparedCorpus {
  std::unique_ptr<Tokenizer> tokenizer;
  TokenFile train, val;           // with write false and no shards: counts in the info, no tokens
  int64_t train_count = 0, val_count = 0;
  std::filesystem::path folder;  // <cache_dir>/<key>
  bool reused = false;           // the shards were there and current
  uint64_t sample_bytes = 0;     // bpe, prepared now: the text its merges were learned from
  std::string description;       // "3 files (12.0 MB), validation: every tenth file (1 file)"
};

PreparedCorpus prepare_corpus(const CorpusSpec& corpus, const TokenizerSpec& tokenizer, const PrepareOptions& options);

}  // namespace tf::data
