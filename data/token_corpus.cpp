// A corpus of token files; see token_corpus.h.
#include "data/token_corpus.h"

#include <algorithm>

#include "data/ids_tokenizer.h"
#include "framework/error.h"

namespace tf::data {

namespace {

struct Largest {
  int32_t id = -1;
  int64_t at = 0;  // the index of its first occurrence
};

// The largest id of `tokens`, read a slice at a time; the pages leave the resident set behind the scan.
Largest largest_id(const Tokens& tokens) {
  constexpr int64_t kSlice = 1 << 20;
  std::vector<int32_t> slice;
  Largest largest;
  for (int64_t at = 0; at < tokens.size(); at += kSlice) {
    slice.resize(static_cast<size_t>(std::min(kSlice, tokens.size() - at)));
    tokens.copy(at, static_cast<int64_t>(slice.size()), slice.data());
    tokens.release_before(at + static_cast<int64_t>(slice.size()));
    const auto top = std::max_element(slice.begin(), slice.end());
    if (*top > largest.id) largest = {*top, at + (top - slice.begin())};
  }
  return largest;
}

std::string describe(const TokenFile& file, const std::string& path) {
  const bool llmc = file.info.format == TokenFileFormat::llmc;
  return (llmc ? "llm.c token file '" : "token shard '") + path + "' (" + std::to_string(file.tokens.size()) +
         " ids, " + (file.info.width == 2 ? "uint16" : "int32") + ")";
}

}  // namespace

PreparedCorpus open_token_corpus(const TokenCorpusSpec& spec) {
  TF_CHECK_INPUT(!spec.train_path.empty(), spec.train_key, " is empty: name a token file (llm.c's .bin, or a shard)");
  PreparedCorpus result;
  result.train = open_token_file(spec.train_path);
  result.description = describe(result.train, spec.train_path);
  if (!spec.val_path.empty()) {
    result.val = open_token_file(spec.val_path);
    result.description += ", validation " + describe(result.val, spec.val_path);
  } else {
    // Held out: the last 10% of the ids.
    const int64_t n = result.train.tokens.size(), cut = n - n / 10;
    result.val.info = result.train.info;
    result.val.tokens = result.train.tokens.slice(cut, n);
    result.train.tokens = result.train.tokens.slice(0, cut);
    result.train.document_starts.clear();
    result.description += ", validation: its last 10% (" + std::to_string(n - cut) + " ids)";
  }

  // Every id must have an embedding row: the vocabulary is the checkpoint's, data.vocab_size, or what
  // the files hold.
  int32_t top = -1;
  for (const auto& [file, path, key] : {std::tuple{&result.train, &spec.train_path, &spec.train_key},
                                        std::tuple{&result.val, &spec.val_path, &spec.val_key}}) {
    const std::string& named = path->empty() ? spec.train_path : *path;
    const int64_t offset = file == &result.val && path->empty() ? result.train.tokens.size() : 0;
    Largest largest;
    if (file->info.format == TokenFileFormat::shard && file->info.vocab_size > 0)
      largest.id = static_cast<int32_t>(file->info.vocab_size) - 1;  // the writer checked every id below it
    else
      largest = largest_id(file->tokens);
    const int64_t limit = spec.given ? spec.given->vocab_size() : spec.vocab_size;
    TF_CHECK_INPUT(limit == 0 || largest.id < limit, *key, " '", named, "': id ", largest.id, " at index ",
                   largest.at + offset, " is outside the vocabulary of ", limit,
                   spec.given ? " ids of the checkpoint's tokenizer" : " ids that " + spec.vocab_key + " gives",
                   spec.given ? std::string() : ": set " + spec.vocab_key + " to at least " + std::to_string(largest.id + 1) +
                                                    " (or 0: the largest id + 1)");
    top = std::max(top, largest.id);
  }
  TF_CHECK_INPUT(top >= 0, spec.train_key, " '", spec.train_path, "': the token file holds no ids");

  if (spec.given) {
    result.tokenizer = Tokenizer::from_string(spec.given->to_string());
  } else {
    auto ids = std::make_unique<IdsTokenizer>(static_cast<int32_t>(spec.vocab_size > 0 ? spec.vocab_size : top + 1));
    for (const std::string& special : spec.specials) ids->add_special(special);
    result.tokenizer = std::move(ids);
  }
  // Ids have no characters: the figures are per token (a shard's count of its text's characters
  // describes another tokenizer's tokens).
  result.train.info.characters = result.val.info.characters = 0;
  result.train_count = result.train.tokens.size();
  result.val_count = result.val.tokens.size();
  result.folder = std::filesystem::path(spec.train_path).parent_path();
  result.reused = true;  // nothing to prepare: every rank maps the same files
  return result;
}

}  // namespace tf::data
