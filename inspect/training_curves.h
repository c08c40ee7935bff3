// A run's training curves from its metrics.jsonl: the loss (training per step, validation per
// evaluation), the validation figure (bits/char or masked-token accuracy) and the learning rate
// against steps; several runs overlaid in distinct colours. `tapeformer plot` and report.html.
#pragma once
#include <filesystem>
#include <vector>

#include "inspect/canvas.h"

namespace tf::inspect {

PictureSize write_training_curves(const std::filesystem::path& file, const std::vector<std::filesystem::path>& run_dirs);

}  // namespace tf::inspect
