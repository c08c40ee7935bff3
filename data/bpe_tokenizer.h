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
//   pretokenizer gpt2                      or gpt2-classes (Note [pre-tokenisation])
//   merges <m>
//   <left id> <right id>                   m lines, in merge order (rank 0 first)
//   specials <k> ...
#pragma once
#include <unordered_map>
#include <utility>

#include "data/tokenizer.h"

namespace tf::data {

// Note [pre-tokenisation]: text is cut into chunks before merging, and the chunks partition the text
// (which is what makes decode(encode(s)) == s hold for every byte string). Two versions, named in the
// serialised form:
// - gpt2 (every tokenizer trained now): GPT-2's regular expression exactly,
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   with Unicode 15.1's classes (data/unicode_classes.h), as llama.cpp's "gpt-2" pre-tokenizer reads
//   it: a chunk is a contraction, or an optional single leading space and a run of letters, of
//   numbers, or of anything else but whitespace; a run of whitespace before a non-space leaves its
//   last character to the next chunk ("\n\nThe" is "\n", "\n", "The"; "  the" is " ", " the").
//   A byte that is not UTF-8 counts as U+FFFD, a symbol.
// - gpt2-classes (tokenizers trained before; still read): the same shape over byte classes, where
//   every byte >= 0x80 is a letter and whitespace leaves only a last space to the next word
//   ("\n\nThe" is "\n\n", "The").
enum class Pretokenizer { gpt2, gpt2_classes };
std::vector<std::string_view> pretokenize(std::string_view text, Pretokenizer kind = Pretokenizer::gpt2);
std::string_view pretokenizer_name(Pretokenizer kind);

class BpeTokenizer : public Tokenizer {
 public:
  using Merge = std::pair<int32_t, int32_t>;  // (left id, right id)
  // The longest token, in bytes. Merging a token with itself doubles it, so a serialised form of
  // m merges could otherwise describe a token of 2^m bytes; with the cap a tokenizer's memory is
  // linear in its form. Training never learns a longer token (such a pair is skipped), and
  // from_string refuses one; natural text has no 1 KB word, so this only bounds forged input.
  static constexpr size_t kMaxTokenBytes = 1024;

  // Learns merges until 256 + merges + specials.size() == vocab_size, or until no pair occurs
  // twice (pairs making a token longer than kMaxTokenBytes are never merged, nor pairs spelling a
  // token already learned: every id's bytes are distinct, so a GGUF vocabulary of byte strings names
  // each id once). Chunks by the gpt2 pre-tokenizer. Ties between equally frequent pairs go to the smaller (left id, right id), so training
  // is a pure function of the text. Pair counts are updated incrementally after each merge, only
  // for the words that hold the merged pair.
  static BpeTokenizer train(std::string_view text, int32_t vocab_size, const std::vector<std::string>& specials = {});
  explicit BpeTokenizer(std::vector<Merge> merges, Pretokenizer pretokenizer = Pretokenizer::gpt2);

  std::string_view kind() const override { return "bpe"; }
  void encode_into(std::string_view text, std::vector<int32_t>& ids) const override;
  // Before a single space that a non-space follows (gpt2; gpt2-classes also wants a non-space
  // before it): a pre-tokenisation boundary that does not depend on the text around it.
  size_t split_point(std::string_view text, size_t at) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  std::string to_string() const override;
  static BpeTokenizer from_string(std::string_view serialised);

  const std::vector<Merge>& merges() const { return merges_; }
  Pretokenizer pretokenizer() const { return pretokenizer_; }
  const std::string& token_bytes(int32_t id) const { return token_bytes_.at(id); }  // learned ids only

 protected:
  int32_t base_vocab_size() const override { return 256 + static_cast<int32_t>(merges_.size()); }

 private:
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;

  std::vector<Merge> merges_;
  Pretokenizer pretokenizer_;
  std::vector<std::string> token_bytes_;        // id -> the bytes it stands for
  std::unordered_map<uint64_t, int32_t> rank_;  // pair key (left << 32 | right) -> merge rank
};

}  // namespace tf::data
