// Character-level tokenizer over UTF-8 code points.
#include "data/char_tokenizer.h"

#include <algorithm>
#include <cstdio>

#include "data/text.h"
#include "framework/error.h"

namespace tf::data {

char32_t utf8_decode(const char* s, size_t length) {
  const auto b = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[k])); };
  switch (length) {
    case 1: return b(0);
    case 2: return (b(0) & 0x1F) << 6 | (b(1) & 0x3F);
    case 3: return (b(0) & 0x0F) << 12 | (b(1) & 0x3F) << 6 | (b(2) & 0x3F);
    default: return (b(0) & 0x07) << 18 | (b(1) & 0x3F) << 12 | (b(2) & 0x3F) << 6 | (b(3) & 0x3F);
  }
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

CharTokenizer::CharTokenizer(std::vector<char32_t> code_points) : code_points_(std::move(code_points)) {
  std::sort(code_points_.begin(), code_points_.end());
  code_points_.erase(std::unique(code_points_.begin(), code_points_.end()), code_points_.end());
  for (size_t i = 0; i < code_points_.size(); ++i) {
    const char32_t cp = code_points_[i];
    TF_CHECK_INPUT(cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF), "CharTokenizer: U+", std::hex,
                   static_cast<uint32_t>(cp), " is not a Unicode scalar value");
    id_of_cp_[cp] = static_cast<int32_t>(i) + 1;
    if (cp < 128) ascii_ids_[cp] = static_cast<int32_t>(i) + 1;
  }
}

std::vector<char32_t> CharTokenizer::distinct_code_points(std::string_view text) {
  std::array<bool, 128> seen_ascii{};
  std::vector<bool> seen_bmp;  // the Basic Multilingual Plane beyond ASCII, made at the first such character
  std::vector<char32_t> code_points;
  for (size_t i = 0; i < text.size();) {
    if (const auto byte = static_cast<unsigned char>(text[i]); byte < 0x80) {
      seen_ascii[byte] = true;
      ++i;
      continue;
    }
    if (seen_bmp.empty()) seen_bmp.assign(0x10000, false);
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      ++i;
      continue;
    }
    const char32_t cp = utf8_decode(text.data() + i, length);
    if (cp >= 0x10000 || !seen_bmp[cp]) code_points.push_back(cp);
    if (cp < 0x10000) seen_bmp[cp] = true;
    i += length;
  }
  for (char32_t c = 0; c < 128; ++c)
    if (seen_ascii[c]) code_points.push_back(c);
  std::sort(code_points.begin(), code_points.end());
  code_points.erase(std::unique(code_points.begin(), code_points.end()), code_points.end());
  return code_points;
}

CharTokenizer CharTokenizer::train(std::string_view text, const std::vector<std::string>& specials) {
  CharTokenizer tok(distinct_code_points(text));
  for (const auto& s : specials) tok.add_special(s);
  return tok;
}

void CharTokenizer::encode_into(std::string_view text, std::vector<int32_t>& ids) const {
  // At most one id per byte: written through a pointer, then cut to length (no capacity check per
  // id, in the loop that encodes a whole corpus).
  ids.resize(text.size());
  int32_t* out = ids.data();
  for (size_t i = 0; i < text.size();) {
    if (const auto byte = static_cast<unsigned char>(text[i]); byte < 128) {  // kUnknown (0) when unseen
      *out++ = ascii_ids_[byte];
      ++i;
      continue;
    }
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) {  // an invalid byte: one <unk>, then resynchronise on the next byte
      *out++ = kUnknown;
      ++i;
      continue;
    }
    const auto it = id_of_cp_.find(utf8_decode(text.data() + i, length));
    *out++ = it == id_of_cp_.end() ? kUnknown : it->second;
    i += length;
  }
  ids.resize(static_cast<size_t>(out - ids.data()));
}

size_t CharTokenizer::split_point(std::string_view text, size_t at) const {
  for (size_t p = std::max<size_t>(at, 1); p < text.size(); ++p)
    if ((static_cast<unsigned char>(text[p]) & 0xC0) != 0x80) return p;  // not a continuation byte
  return text.size();
}

std::string CharTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (const int32_t id : ids) {
    TF_CHECK(id >= 0 && id < vocab_size(), "CharTokenizer::decode: id ", id, " outside [0, ", vocab_size(), ")");
    if (id == kUnknown) out += "<unk>";
    else if (id < base_vocab_size()) utf8_append(out, code_points_[id - 1]);
    else out += special_name(id);
  }
  return out;
}

int32_t CharTokenizer::id_of(std::string_view special) const {
  return special == "<unk>" ? kUnknown : Tokenizer::id_of(special);
}

std::vector<int32_t> CharTokenizer::special_ids() const {
  std::vector<int32_t> ids = Tokenizer::special_ids();
  ids.insert(ids.begin(), kUnknown);
  return ids;
}

std::string CharTokenizer::to_string() const {
  std::string out = "tapeformer-tokenizer char 1\ncode_points " + std::to_string(code_points_.size()) + "\n";
  char line[16];
  for (const char32_t cp : code_points_) {
    std::snprintf(line, sizeof line, "U+%04X\n", static_cast<unsigned>(cp));
    out += line;
  }
  return out + specials_to_string();
}

CharTokenizer CharTokenizer::from_string(std::string_view serialised) {
  const std::vector<std::string_view> lines = serial::body_lines(serialised, "char");
  TF_CHECK_INPUT(!lines.empty() && lines[0].starts_with("code_points "),
                 "CharTokenizer: serialised form lacks its 'code_points <n>' line");
  const int64_t n = serial::parse_int(lines[0].substr(12), "code point count");
  TF_CHECK_INPUT(n >= 0 && static_cast<size_t>(n) + 1 <= lines.size(), "CharTokenizer: serialised form lists ", n,
                 " code points but has ", lines.size() - 1, " lines left");
  std::vector<char32_t> code_points;
  for (int64_t i = 1; i <= n; ++i) {
    const std::string_view line = lines[i];
    TF_CHECK_INPUT(line.starts_with("U+") && line.size() > 2 && line.size() <= 8,
                   "CharTokenizer: bad code point line '", line, "'");
    uint32_t cp = 0;
    for (char c : line.substr(2)) {
      const int digit = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                        : (c >= 'A' && c <= 'F')                   ? c - 'A' + 10
                                                                   : -1;
      TF_CHECK_INPUT(digit >= 0, "CharTokenizer: bad code point line '", line, "'");
      cp = cp * 16 + digit;
    }
    TF_CHECK_INPUT(code_points.empty() || cp > code_points.back(), "CharTokenizer: code points not ascending at '",
                   line, "'");
    code_points.push_back(cp);
  }
  CharTokenizer tok(std::move(code_points));
  size_t at = static_cast<size_t>(n) + 1;
  tok.specials_from_lines(lines, at);
  return tok;
}

}  // namespace tf::data
