// A run's report: one self-contained HTML file (pictures embedded as data: URIs, styles inline, no
// script, nothing fetched) with the recipe, the training curves, the last evaluation, a sample (GPT),
// the attention of every layer and head over the start of the validation text, and the head table.
#pragma once
#include <filesystem>

namespace tf::inspect {

// Writes `out` (default run_dir/report.html) from the run folder's newest checkpoint and its
// metrics.jsonl; returns the file written.
std::filesystem::path write_run_report(const std::filesystem::path& run_dir, const std::filesystem::path& out = {});
// The file write_run_report writes: `out`, or report.html in the run folder.
std::filesystem::path report_file(const std::filesystem::path& run_dir, const std::filesystem::path& out = {});

// RFC 4648 base64 of `bytes`, for data: URIs.
std::string base64(std::string_view bytes);

}  // namespace tf::inspect
