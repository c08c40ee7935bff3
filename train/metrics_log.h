// Reading a run's metrics.jsonl (written by the trainer; its fields: docs/recipes.md, "Run folder").
// Each complete line is one flat JSON object of numbers, nulls and strings; a last line without its
// newline (a process killed mid-write) is not a record yet.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace tf::train {

struct MetricsRecord {
  std::map<std::string, double> numbers;     // null is NaN
  std::map<std::string, std::string> texts;  // string fields ("run")
  double number(const std::string& key) const;  // NaN when absent or null
};

// One line (without its newline) as a record; false when it is not such an object.
bool parse_metrics_line(const std::string& line, MetricsRecord& record);

// Throws InputError naming the file and line ("<file>:<line>: ...") for a line that is not such an
// object, or whose step is not a whole number >= 0, or whose documented figures (train_loss, val_loss,
// lr, ...) are not numbers or null.
std::vector<MetricsRecord> read_metrics_log(const std::filesystem::path& file);

}  // namespace tf::train
