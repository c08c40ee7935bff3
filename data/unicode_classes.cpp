// Unicode classes by binary search over generated code point ranges (data/unicode_classes.h).
#include "data/unicode_classes.h"

#include <algorithm>
#include <iterator>

namespace tf::data {

namespace {

struct CodePointRange {
  char32_t first, last;
};

#include "data/unicode_classes_table.inc"

template <size_t N>
bool in(const CodePointRange (&ranges)[N], char32_t cp) {
  const auto* it = std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                                    [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}

}  // namespace

CodePointClass code_point_class(char32_t cp) {
  if (cp < 0x80) {  // ASCII, the common case, without a search
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return CodePointClass::letter;
    if (cp >= '0' && cp <= '9') return CodePointClass::number;
    if (cp == ' ' || (cp >= '\t' && cp <= '\r')) return CodePointClass::white_space;
    return CodePointClass::other;
  }
  if (in(kLetters, cp)) return CodePointClass::letter;
  if (in(kNumbers, cp)) return CodePointClass::number;
  if (in(kWhiteSpace, cp)) return CodePointClass::white_space;
  return CodePointClass::other;
}

DecodedCodePoint decode_utf8_at(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return {lead, 1};
  // The lead byte's high bits announce the length: 110xxxxx 2, 1110xxxx 3, 11110xxx 4.
  const size_t length = lead >= 0xF0 ? (lead >= 0xF8 ? 0 : 4) : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
  if (length == 0 || at + length > text.size()) return {0xFFFD, 1};
  char32_t cp = lead & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    if ((byte(at + k) & 0xC0) != 0x80) return {0xFFFD, 1};
    cp = cp << 6 | (byte(at + k) & 0x3F);
  }
  return {cp, length};
}

}  // namespace tf::data
