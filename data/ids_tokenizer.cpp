// Token ids as their own tokens; see ids_tokenizer.h.
#include "data/ids_tokenizer.h"

#include <cctype>
#include <charconv>

#include "framework/error.h"

namespace tf::data {

namespace {
bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
}  // namespace

IdsTokenizer::IdsTokenizer(int32_t vocab_size) : vocab_(vocab_size) {
  TF_CHECK_INPUT(vocab_size >= 1, "IdsTokenizer: the vocabulary size must be at least 1, got ", vocab_size);
}

void IdsTokenizer::encode_into(std::string_view text, std::vector<int32_t>& ids) const {
  ids.clear();
  for (size_t at = 0; at < text.size();) {
    if (is_space(text[at])) {
      ++at;
      continue;
    }
    size_t end = at;
    while (end < text.size() && !is_space(text[end])) ++end;
    const std::string_view word = text.substr(at, end - at);
    int64_t id = -1;
    const auto [stop, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
    if (ec == std::errc() && stop == word.data() + word.size() && id >= 0 && id < vocab_) {
      ids.push_back(static_cast<int32_t>(id));
    } else {
      TF_CHECK_INPUT(has_special(word), "tokenizer ids: '", word.substr(0, 40), "' at byte ", at,
                     " is not a token id: this model's tokens are ids in [0, ", vocab_,
                     "), written as decimal numbers separated by spaces");
      ids.push_back(id_of(word));
    }
    at = end;
  }
}

size_t IdsTokenizer::split_point(std::string_view text, size_t at) const {
  for (size_t p = std::max<size_t>(at, 1); p < text.size(); ++p)
    if (is_space(text[p])) return p;
  return text.size();
}

std::string IdsTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size() * 6);
  for (const int32_t id : ids) {
    TF_CHECK(id >= 0 && id < vocab_size(), "IdsTokenizer::decode: id ", id, " outside [0, ", vocab_size(), ")");
    out += ' ';
    out += id < vocab_ ? std::to_string(id) : special_name(id);
  }
  return out;
}

std::string IdsTokenizer::to_string() const {
  return "tapeformer-tokenizer ids 1\nvocab " + std::to_string(vocab_) + "\n" + specials_to_string();
}

IdsTokenizer IdsTokenizer::from_string(std::string_view serialised) {
  const std::vector<std::string_view> lines = serial::body_lines(serialised, "ids");
  TF_CHECK_INPUT(!lines.empty() && lines[0].starts_with("vocab "), "tokenizer ids: serialised form lacks its 'vocab <n>' line");
  const int64_t vocab = serial::parse_int(lines[0].substr(6), "vocabulary size");
  TF_CHECK_INPUT(vocab >= 1 && vocab <= (int64_t{1} << 31) - 1, "tokenizer ids: vocabulary size ", vocab, " out of range");
  IdsTokenizer tokenizer(static_cast<int32_t>(vocab));
  size_t at = 1;
  tokenizer.specials_from_lines(lines, at);
  return tokenizer;
}

}  // namespace tf::data
