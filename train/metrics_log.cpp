// metrics.jsonl reader; see metrics_log.h.
#include "train/metrics_log.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "framework/error.h"
#include "framework/looked_for.h"

namespace tf::train {

namespace {

// A scanner over one line: { "key": value, ... } with values a number, null or a string without
// escapes (what the trainer writes).
struct LineScanner {
  const std::string& line;
  size_t at = 0;
  void skip_spaces() {
    while (at < line.size() && std::isspace(static_cast<unsigned char>(line[at]))) ++at;
  }
  bool take(char c) {
    skip_spaces();
    if (at < line.size() && line[at] == c) return ++at, true;
    return false;
  }
  bool string(std::string& out) {
    if (!take('"')) return false;
    const size_t close = line.find('"', at);
    if (close == std::string::npos) return false;
    out = line.substr(at, close - at);
    at = close + 1;
    return true;
  }
};

// The fields docs/recipes.md ("The run folder") gives as numbers besides the step; null is a figure
// not measured at that step (no evaluation, a non-finite loss).
constexpr const char* kNumberFields[] = {"train_loss", "val_loss", "val_perplexity", "val_bits_per_char",
                                         "val_mlm_accuracy", "lr", "grad_norm", "tokens_per_s", "elapsed_s"};

// A record whose fields are what plot and report read them as: the step a whole number, the figures
// numbers or null. `where`: "<file>:<line>".
void check_record(const MetricsRecord& record, const std::string& where) {
  for (const char* key : kNumberFields) {
    const auto text = record.texts.find(key);
    TF_CHECK_INPUT(text == record.texts.end(), where, ": \"", key, "\" must be a number or null, got the string \"",
                   text->second, "\"");
  }
  const double step = record.number("step");
  if (std::isfinite(step) && step >= 0 && step == std::floor(step)) return;
  const auto text = record.texts.find("step");
  std::string got = concat(step);
  if (text != record.texts.end()) got = "the string \"" + text->second + "\"";
  else if (!record.numbers.count("step")) got = "no \"step\" field";
  else if (std::isnan(step)) got = "null";
  throw InputError(concat(where, ": \"step\" must be a whole number >= 0 (the optimizer steps done), got ", got));
}

}  // namespace

bool parse_metrics_line(const std::string& line, MetricsRecord& record) {
  LineScanner s{line};
  if (!s.take('{')) return false;
  if (s.take('}')) return true;
  do {
    std::string key;
    if (!s.string(key) || !s.take(':')) return false;
    s.skip_spaces();
    if (line.compare(s.at, 4, "null") == 0) {
      record.numbers[key] = std::numeric_limits<double>::quiet_NaN();
      s.at += 4;
    } else if (s.at < line.size() && line[s.at] == '"') {
      if (!s.string(record.texts[key])) return false;
    } else {
      // JSON's numbers start with a digit or '-' and a digit: from_chars would also take nan, inf, .5.
      const size_t digit = s.at + (s.at < line.size() && line[s.at] == '-');
      if (digit >= line.size() || !std::isdigit(static_cast<unsigned char>(line[digit]))) return false;
      double value = 0;
      const auto [end, ec] = std::from_chars(line.data() + s.at, line.data() + line.size(), value);
      if (ec != std::errc()) return false;
      record.numbers[key] = value;
      s.at = end - line.data();
    }
  } while (s.take(','));
  if (!s.take('}')) return false;
  s.skip_spaces();
  return s.at == line.size();
}

double MetricsRecord::number(const std::string& key) const {
  const auto it = numbers.find(key);
  return it == numbers.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
}

std::vector<MetricsRecord> read_metrics_log(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  TF_CHECK_INPUT(in, file.string(), ": cannot read the metrics log (does the run folder hold a run? ", looked_for(file),
                 ")");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::vector<MetricsRecord> records;
  size_t start = 0, line_number = 1;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1, ++line_number) {
    const std::string line = text.substr(start, end - start);
    MetricsRecord record;
    TF_CHECK_INPUT(parse_metrics_line(line, record), file.string(), ":", line_number,
                   ": not a metrics record (one JSON object of numbers, nulls and strings per line): '",
                   line.substr(0, 80), "'");
    check_record(record, concat(file.string(), ":", line_number));
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace tf::train
