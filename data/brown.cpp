// Brown corpus preparation: tag stripping, detokenisation and the train/validation split.
#include "data/brown.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <vector>

#include "data/text.h"
#include "framework/error.h"

namespace tf::data {

namespace fs = std::filesystem;

namespace {

bool is_one_of(std::string_view word, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), word) != set.end();
}

// Punctuation written before a space but never after one: ", . ; : ? ! ) ]".
bool attaches_left(std::string_view w) { return is_one_of(w, {",", ".", ";", ":", "?", "!", ")", "]", "}"}); }
bool attaches_right(std::string_view w) { return is_one_of(w, {"(", "[", "{"}); }
// Clitics split from their host word: "do n't", "John 's".
bool is_clitic(std::string_view w) {
  std::string lower(w);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return is_one_of(lower, {"n't", "'s", "'ll", "'re", "'ve", "'d", "'m"});
}
bool starts_word(std::string_view w) {
  return !w.empty() && (std::isalnum(static_cast<unsigned char>(w[0])) || w[0] == '$');
}

// The word of a `word/tag` token: everything before the last '/'.
std::string_view strip_tag(std::string_view token) {
  const size_t slash = token.rfind('/');
  return slash == std::string_view::npos ? token : token.substr(0, slash);
}

std::vector<std::string_view> split_whitespace(std::string_view line) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i) parts.push_back(line.substr(i, j - i));
    i = j;
  }
  return parts;
}

// Raw documents are named by genre letter a..r and a two-digit number: ca01 .. cr09.
bool is_document_name(std::string_view name) {
  return name.size() == 4 && name[0] == 'c' && name[1] >= 'a' && name[1] <= 'r' &&
         std::isdigit(static_cast<unsigned char>(name[2])) && std::isdigit(static_cast<unsigned char>(name[3]));
}

}  // namespace

std::string brown_sentence(std::string_view raw_line) {
  std::vector<std::string_view> words;
  for (std::string_view token : split_whitespace(raw_line)) {
    const std::string_view word = strip_tag(token);
    if (word.empty()) continue;
    // `?/. ?/.` and `;/. ;/.` end thousands of sentences: a duplicated punctuation token.
    const bool punctuation = is_one_of(word, {".", ",", ";", ":", "?", "!"});
    if (punctuation && !words.empty() && words.back() == word) continue;
    // A sentence-final period after an abbreviation ("Jr. .", "p.m. ."): English writes one.
    if (word == "." && !words.empty() && words.back().size() > 1 && words.back().ends_with('.')) continue;
    words.push_back(word);
  }

  std::string out;
  bool glue_next = true;     // no space before the next word (sentence start or after an opener)
  bool single_open = false;  // a ' quotation is open
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string_view w = words[i];
    std::string_view text = w;
    bool opens = false, closes = false;
    if (w == "``") {
      text = "\"", opens = true;
    } else if (w == "''") {
      text = "\"", closes = true;
    } else if (w == "'") {
      opens = !single_open && i + 1 < words.size() && starts_word(words[i + 1]);
      closes = !opens;
      single_open = opens;
    } else {
      opens = attaches_right(w);
      closes = attaches_left(w) || is_clitic(w);
    }
    if (!glue_next && !closes) out += ' ';
    out += text;
    glue_next = opens;
  }
  return out;
}

BrownSplits prepare_brown(const fs::path& raw_dir, const fs::path& out_dir) {
  const std::string fetch_hint = "run `scripts/setup.sh --corpus` to fetch it";
  std::error_code ec;
  TF_CHECK_INPUT(fs::is_directory(raw_dir, ec), "prepare_brown: no Brown corpus at '", raw_dir.string(), "' (",
                 fs::absolute(raw_dir, ec).string(), "): ", fetch_hint,
                 ", or set data.brown_dir (or data.root, or TAPEFORMER_DATA) to where it is (relative paths start from the current folder)");
  std::vector<fs::path> documents;
  fs::file_time_type newest_raw = fs::file_time_type::min();
  for (const fs::path& file : regular_files_in(raw_dir, "prepare_brown")) {
    if (!is_document_name(file.filename().string())) continue;
    documents.push_back(file);
    const fs::file_time_type written = fs::last_write_time(file, ec);
    TF_CHECK_INPUT(!ec, "prepare_brown: '", file.string(), "': ", ec.message());
    newest_raw = std::max(newest_raw, written);
  }
  TF_CHECK_INPUT(!documents.empty(), "prepare_brown: '", raw_dir.string(),
                 "' holds no Brown documents (ca01 .. cr09): ", fetch_hint);
  std::sort(documents.begin(), documents.end());

  BrownSplits splits;
  splits.train = out_dir / "train.txt";
  splits.val = out_dir / "val.txt";
  for (size_t i = 0; i < documents.size(); ++i) ++(i % 10 == 9 ? splits.val_documents : splits.train_documents);
  const auto up_to_date = [&](const fs::path& p) {
    std::error_code e;
    return fs::is_regular_file(p, e) && fs::last_write_time(p, e) > newest_raw;
  };
  if (up_to_date(splits.train) && up_to_date(splits.val)) return splits;

  std::string train, val;
  for (size_t i = 0; i < documents.size(); ++i) {
    std::ifstream in(documents[i], std::ios::binary);
    TF_CHECK_INPUT(in, "prepare_brown: cannot read '", documents[i].string(), "'");
    std::string& split = i % 10 == 9 ? val : train;
    if (!split.empty()) split += '\n';  // a blank line between documents
    std::string line;
    while (std::getline(in, line)) {
      const std::string sentence = brown_sentence(line);
      if (!sentence.empty()) split += sentence + '\n';
    }
  }

  fs::create_directories(out_dir, ec);
  TF_CHECK_INPUT(!ec, "prepare_brown: cannot create '", out_dir.string(), "': ", ec.message());
  for (const auto& [path, text] : {std::pair{splits.train, &train}, std::pair{splits.val, &val}}) {
    // Per process: the ranks of an mpirun job prepare the corpus at once (see data/dataset.cpp).
    const fs::path tmp = fs::path(path.string() + "." + std::to_string(::getpid()) + ".tmp");
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(text->data(), static_cast<std::streamsize>(text->size()));
      TF_CHECK_INPUT(out.good(), "prepare_brown: cannot write '", tmp.string(), "'");
    }
    fs::rename(tmp, path, ec);
    TF_CHECK_INPUT(!ec, "prepare_brown: cannot rename '", tmp.string(), "' to '", path.string(), "': ", ec.message());
  }
  splits.rebuilt = true;
  return splits;
}

}  // namespace tf::data
