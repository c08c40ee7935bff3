// The Unicode classes GPT-2's pre-tokenizer reads (Radford et al. 2019, the regular expression in
// its encoder.py): letters \p{L}, numbers \p{N}, White_Space \s. The tables are generated from
// Unicode 15.1 (scripts/gen_unicode_classes.py), the version of llama.cpp's own tables, so that a
// text cuts into the same chunks here and in llama.cpp's "gpt-2" pre-tokenizer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tf::data {

enum class CodePointClass : uint8_t { letter, number, white_space, other };

CodePointClass code_point_class(char32_t cp);

// The code point starting at text[at] and its length in bytes. A byte that does not start a
// well-formed sequence (as llama.cpp's decoder reads it: a lead byte and the continuation bytes it
// announces) is returned alone as U+FFFD with length 1.
struct DecodedCodePoint {
  char32_t cp;
  size_t length;
};
DecodedCodePoint decode_utf8_at(std::string_view text, size_t at);

}  // namespace tf::data
