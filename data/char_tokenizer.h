// Character-level tokenizer over Unicode code points (nanoGPT's shakespeare_char, but UTF-8 aware).
//
// Ids: 0 is <unk>; 1..n are the code points seen in the training text, in ascending order (so the
// vocabulary is a pure function of the set of characters); then the special tokens. A code point
// absent from the vocabulary, or a byte that is not valid UTF-8, encodes to <unk>.
//
//   auto tok = tf::data::CharTokenizer::train(text, {"[PAD]", "[MASK]", "[CLS]", "[SEP]"});
//   tok.decode(tok.encode("hi")) == "hi"     // when 'h' and 'i' occur in text
//
// Serialised body (after the header line, see tokenizer.h):
//   code_points <n>
//   U+0041                                 n lines, ascending, hexadecimal
//   specials <k> ...
#pragma once
#include <array>
#include <unordered_map>

#include "data/tokenizer.h"

namespace tf::data {

class CharTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kUnknown = 0;

  // Every distinct code point of `text` (invalid UTF-8 bytes are skipped), then `specials`.
  static CharTokenizer train(std::string_view text, const std::vector<std::string>& specials = {});
  explicit CharTokenizer(std::vector<char32_t> code_points);  // sorted and deduplicated here
  // The distinct code points of `text`, ascending (invalid UTF-8 bytes are skipped): train's
  // vocabulary, gathered a chunk at a time for a corpus read as a stream.
  static std::vector<char32_t> distinct_code_points(std::string_view text);

  std::string_view kind() const override { return "char"; }
  void encode_into(std::string_view text, std::vector<int32_t>& ids) const override;
  size_t split_point(std::string_view text, size_t at) const override;  // any code point boundary
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t id_of(std::string_view special) const override;  // also knows "<unk>" (id 0)
  std::vector<int32_t> special_ids() const override;       // 0 and the added specials
  std::string to_string() const override;
  static CharTokenizer from_string(std::string_view serialised);

  const std::vector<char32_t>& code_points() const { return code_points_; }

 protected:
  int32_t base_vocab_size() const override { return 1 + static_cast<int32_t>(code_points_.size()); }
  bool is_builtin_special(std::string_view name) const override { return name == "<unk>"; }

 private:
  std::vector<char32_t> code_points_;              // id i + 1 <-> code_points_[i]
  std::unordered_map<char32_t, int32_t> id_of_cp_;
  std::array<int32_t, 128> ascii_ids_{};  // encode's fast path: the id of each ASCII code point
};

// Decodes the well-formed UTF-8 sequence of `length` bytes at s (see utf8_sequence_length).
char32_t utf8_decode(const char* s, size_t length);
// Appends the UTF-8 encoding of a code point (<= U+10FFFF, not a surrogate).
void utf8_append(std::string& out, char32_t cp);

}  // namespace tf::data
