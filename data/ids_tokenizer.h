// The tokenizer of a corpus that came tokenized (data.corpus: tokens, docs/data.md): token files
// made elsewhere, such as llm.c's GPT-2 ids, whose tokenizer tapeformer does not have. Its tokens
// are the ids themselves, written as decimal numbers each after a space: a sample prints the ids for
// the tokenizer that made them to turn into text, and a prompt or an --text file gives ids the
// same way.
//
//   tf::data::IdsTokenizer tok(50257);
//   tok.encode("464 3290 257");     // {464, 3290, 257}
//   tok.decode({464, 3290});        // " 464 3290": decode(a) + decode(b) == decode(a + b)
//
// Serialised body (after the header line, see tokenizer.h):
//   vocab <n>
//   specials <k> ...
#pragma once
#include "data/tokenizer.h"

namespace tf::data {

class IdsTokenizer : public Tokenizer {
 public:
  explicit IdsTokenizer(int32_t vocab_size);  // ids 0 .. vocab_size - 1, then any specials

  std::string_view kind() const override { return "ids"; }
  // Whitespace-separated decimal ids below the vocabulary, or the names of specials; anything else
  // is an InputError naming the word and its byte offset.
  void encode_into(std::string_view text, std::vector<int32_t>& ids) const override;
  size_t split_point(std::string_view text, size_t at) const override;  // at whitespace
  std::string decode(std::span<const int32_t> ids) const override;
  std::string to_string() const override;
  static IdsTokenizer from_string(std::string_view serialised);

 protected:
  int32_t base_vocab_size() const override { return vocab_; }

 private:
  int32_t vocab_;
};

}  // namespace tf::data
