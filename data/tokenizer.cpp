// Special tokens, the serialised form's shared parts, and Tokenizer::from_string.
#include "data/tokenizer.h"

#include <algorithm>
#include <charconv>

#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "data/ids_tokenizer.h"
#include "framework/error.h"

namespace tf::data {

int32_t Tokenizer::add_special(std::string_view name) {
  TF_CHECK_INPUT(!name.empty(), "add_special: empty special token name");
  for (char c : name)
    TF_CHECK_INPUT(!std::isspace(static_cast<unsigned char>(c)), "add_special: special token name '", name,
                   "' holds whitespace");
  if (has_special(name)) return id_of(name);
  specials_.emplace_back(name);
  return vocab_size() - 1;
}

bool Tokenizer::has_special(std::string_view name) const {
  return is_builtin_special(name) || std::find(specials_.begin(), specials_.end(), name) != specials_.end();
}

int32_t Tokenizer::id_of(std::string_view special) const {
  const auto it = std::find(specials_.begin(), specials_.end(), special);
  if (it != specials_.end()) return base_vocab_size() + static_cast<int32_t>(it - specials_.begin());
  std::string known;
  for (const auto& s : specials_) known += (known.empty() ? "" : " ") + s;
  throw InputError(concat("tokenizer (", kind(), "): no special token '", special, "' (specials: ",
                          known.empty() ? "none" : known, ")"));
}

int64_t Tokenizer::count_unknown(std::span<const int32_t> ids) const {
  if (!has_special("<unk>")) return 0;
  const int32_t unk = id_of("<unk>");
  return std::count(ids.begin(), ids.end(), unk);
}

std::vector<int32_t> Tokenizer::special_ids() const {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < specials_.size(); ++i) ids.push_back(base_vocab_size() + static_cast<int32_t>(i));
  return ids;
}

std::string Tokenizer::specials_to_string() const {
  std::string out = "specials " + std::to_string(specials_.size()) + "\n";
  for (const auto& s : specials_) out += s + "\n";
  return out;
}

void Tokenizer::specials_from_lines(const std::vector<std::string_view>& lines, size_t& at) {
  TF_CHECK_INPUT(at < lines.size() && lines[at].starts_with("specials "),
                 "tokenizer: serialised form lacks its 'specials <n>' line");
  const int64_t n = serial::parse_int(lines[at].substr(9), "special token count");
  ++at;
  TF_CHECK_INPUT(n >= 0 && at + n <= lines.size(), "tokenizer: serialised form lists ", n,
                 " specials but has ", lines.size() - at, " lines left");
  specials_.clear();
  for (int64_t i = 0; i < n; ++i) add_special(lines[at++]);
  TF_CHECK_INPUT(at == lines.size(), "tokenizer: ", lines.size() - at, " unexpected lines after the specials");
}

std::unique_ptr<Tokenizer> Tokenizer::from_string(std::string_view serialised) {
  const std::string_view header = serialised.substr(0, serialised.find('\n'));
  if (header == "tapeformer-tokenizer char 1") return std::make_unique<CharTokenizer>(CharTokenizer::from_string(serialised));
  if (header == "tapeformer-tokenizer bpe 1") return std::make_unique<BpeTokenizer>(BpeTokenizer::from_string(serialised));
  if (header == "tapeformer-tokenizer ids 1") return std::make_unique<IdsTokenizer>(IdsTokenizer::from_string(serialised));
  throw InputError(concat("tokenizer: unknown serialised form, header '", header.substr(0, 80),
                          "' (expected 'tapeformer-tokenizer char 1', 'bpe 1' or 'ids 1')"));
}

namespace serial {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

std::vector<std::string_view> body_lines(std::string_view text, std::string_view kind) {
  std::vector<std::string_view> lines = split_lines(text);
  const std::string header = concat("tapeformer-tokenizer ", kind, " 1");
  TF_CHECK_INPUT(!lines.empty() && lines[0] == header, "tokenizer: expected header '", header, "', got '",
                 lines.empty() ? std::string_view() : lines[0].substr(0, 80), "'");
  lines.erase(lines.begin());
  return lines;
}

int64_t parse_int(std::string_view field, std::string_view what) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  TF_CHECK_INPUT(ec == std::errc() && end == field.data() + field.size(), "tokenizer: bad ", what, " '", field, "'");
  return value;
}

}  // namespace serial
}  // namespace tf::data
