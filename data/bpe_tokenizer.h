// Byte-level byte-pair encoding (Sennrich et al. 2016, "Neural Machine Translation of Rare Words
// with Subword Units"; byte-level base vocabulary as in GPT-2, Radford et al. 2019).
//
// Ids 0..255 are the bytes; id 256 + r is the token made by merge r (the r-th most frequent pair
// during training, a pair of earlier ids); then the special tokens. Any byte string encodes, and
// decode(encode(s)) == s exactly, valid UTF-8 or not.
//
// Text is first split into chunks (Note [pre-tokenisation]) and merges never cross a chunk boundary,
// so no token spans two words or a word and its punctuation.
//
//   auto tok = tf::data::BpeTokenizer::train(text, 4096, {"[PAD]", "[MASK]", "[CLS]", "[SEP]"});
//   std::vector<int32_t> ids = tok.encode(" the jury");   // e.g. {" the", " jury"} as 2 ids
//
// Serialised body (after the header line, see tokenizer.h):
//   pretokenizer gpt2-classes
//   merges <m>
//   <left id> <right id>                   m lines, in merge order (rank 0 first)
//   specials <k> ...
#pragma once
#include <unordered_map>
#include <utility>

#include "data/tokenizer.h"

namespace tf::data {

// Note [pre-tokenisation]: a simplified GPT-2 split. A chunk is an optional single leading space
// followed by a maximal run of one class: letters (ASCII letters and every byte >= 0x80, so UTF-8
// letters stay whole), digits, or other non-space bytes; GPT-2's contractions 's 't 're 've 'm 'll 'd
// are chunks of their own. Whitespace not taken as a leading space forms its own chunks. The chunks
// partition the text, which is what makes decode(encode(s)) == s hold for every byte string.
std::vector<std::string_view> pretokenize(std::string_view text);

class BpeTokenizer : public Tokenizer {
 public:
  using Merge = std::pair<int32_t, int32_t>;  // (left id, right id)
  // The longest token, in bytes. Merging a token with itself doubles it, so a serialised form of
  // m merges could otherwise describe a token of 2^m bytes; with the cap a tokenizer's memory is
  // linear in its form. Training never learns a longer token (such a pair is skipped), and
  // from_string refuses one; natural text has no 1 KB word, so this only bounds forged input.
  static constexpr size_t kMaxTokenBytes = 1024;

  // Learns merges until 256 + merges + specials.size() == vocab_size, or until no pair occurs
  // twice (pairs making a token longer than kMaxTokenBytes are never merged). Ties between equally frequent pairs go to the smaller (left id, right id), so training
  // is a pure function of the text. Pair counts are updated incrementally after each merge, only
  // for the words that hold the merged pair.
  static BpeTokenizer train(std::string_view text, int32_t vocab_size, const std::vector<std::string>& specials = {});
  explicit BpeTokenizer(std::vector<Merge> merges);

  std::string_view kind() const override { return "bpe"; }
  void encode_into(std::string_view text, std::vector<int32_t>& ids) const override;
  // Before a single space that sits between two non-space bytes: a pre-tokenisation boundary that
  // does not depend on the text around it (Note [pre-tokenisation]).
  size_t split_point(std::string_view text, size_t at) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  std::string to_string() const override;
  static BpeTokenizer from_string(std::string_view serialised);

  const std::vector<Merge>& merges() const { return merges_; }
  const std::string& token_bytes(int32_t id) const { return token_bytes_.at(id); }  // learned ids only

 protected:
  int32_t base_vocab_size() const override { return 256 + static_cast<int32_t>(merges_.size()); }

 private:
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;

  std::vector<Merge> merges_;
  std::vector<std::string> token_bytes_;        // id -> the bytes it stands for
  std::unordered_map<uint64_t, int32_t> rank_;  // pair key (left << 32 | right) -> merge rank
};

}  // namespace tf::data
