// What a run will cost, printed by `tapeformer train --dry-run`: parameters, FLOPs per token and
// an estimate of peak memory.
#pragma once
#include <cstdint>
#include <string>

#include "layers/module.h"
#include "train/recipe.h"

namespace tf::train {

struct RunPlan {
  int64_t parameters = 0;
  int64_t non_embedding_parameters = 0;
  double flops_per_token = 0;   // training_flops_per_token: 6 N + 12 L d T
  // The program (kProcessBytes), the corpus, weights, gradients, optimizer state, and the larger of
  // the saved activations and a checkpoint being written.
  double peak_bytes = 0;
  std::string to_string() const;
};

// What the program holds before any model: the libraries (oneDNN, OpenBLAS, HDF5, the C++ runtime),
// their code and pools. Measured as the peak RSS of a 1-layer, d_model 32 run on this project's
// usual machine (79 MiB on Brown when the corpus was held in memory, ~15 MiB of it), rounded.
inline constexpr double kProcessBytes = 64.0 * 1024 * 1024;

// From the recipe alone (layers::parameter_shapes): nothing of the model is allocated.
// corpus_bytes: the training and validation token shards' size in bytes (0 when unknown).
RunPlan plan_run(const Recipe& recipe, int64_t corpus_bytes = 0);

// Training FLOPs per token, the one definition used by --dry-run, bench_train_step and
// docs/performance.md ("FLOPs per token and MFU"; Kaplan et al. 2020, section 2.1; PaLM's MFU,
// Chowdhery et al. 2022, appendix B): 6 N + 12 L d T, N = the parameters that are not embedding
// tables (ParamKind::embedding: token, position, segment and T5 tables; a tied LM head is not
// counted, an untied one is).
int64_t non_embedding_parameters(const layers::ParamList& params);
double training_flops_per_token(const layers::ParamList& params, const layers::ModelConfig& model, int64_t seq_len);

// The machine's physical memory in bytes (0 when unknown), and bytes as GiB with one decimal ("23.4").
double machine_memory_bytes();
std::string gibibytes(double bytes);

}  // namespace tf::train
