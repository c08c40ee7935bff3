// A tapeformer GPT as a GGUF file that llama.cpp runs (docs/export.md).
//
// Two llama.cpp architectures express tapeformer's two classic blocks exactly:
//   llama: RoPE (pairs 2i, 2i+1, llama.cpp's default rotation for it), RMSNorm, SwiGLU, no biases,
//          grouped-query attention allowed;
//   gpt2:  learned positions, LayerNorm, GELU (tanh), biases, the fused QKV projection.
// Anything else (BERT, windows, ALiBi, T5 buckets, linear or differential or Mamba mixers, a pruned
// model, post-norm, ...) is refused, every difference from the nearer of the two named.
//
//   const GgufArch arch = gguf_arch(config);                 // InputError listing what no target expresses
//   GgufFile file = gguf_of_model(config, params, tokenizer, GgufType::f16, "gpt_brown_char", notes);
//   file.write("model.gguf");
#pragma once
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "export/gguf.h"
#include "export/gguf_read.h"
#include "layers/models/config.h"
#include "layers/module.h"

namespace tf::exporting {

enum class GgufArch { llama, gpt2 };
const char* gguf_arch_name(GgufArch arch);

// What keeps `config` from each architecture, one line per recipe key ("model.position is learned;
// llama needs rope"); empty when it maps exactly.
std::vector<std::string> gguf_mismatches(const layers::ModelConfig& config, GgufArch arch);
// The architecture that expresses the model, or an InputError that lists, for each, what differs;
// `target` names what was looked for in that message ("llama.cpp architecture").
GgufArch gguf_arch(const layers::ModelConfig& config, const std::string& target = "llama.cpp architecture");

// How tapeformer's parameters become the architecture's tensors: rows [first, first + rows) of `ours`
// (all rows when rows is -1) are the GGUF tensor `gguf`. Export and import both read this list.
struct GgufPiece {
  std::string gguf, ours;
  int64_t first = 0, rows = -1;
};
std::vector<GgufPiece> gguf_pieces(const layers::ModelConfig& config, GgufArch arch);

// train --init-from model.gguf: the file's tensors (decoded to float32) into `params` of a model built
// from the recipe the file carries (tapeformer.recipe). InputError naming `name` for every tensor that
// is missing or shaped otherwise.
void load_gguf_parameters(const GgufContents& file, const std::string& name, const layers::ModelConfig& config,
                          const layers::ParamList& params);

// The whole file: metadata, tokenizer and tensors. `type` applies to the matrices (2-D tensors); norms
// and biases stay f32, as llama.cpp's own converter keeps them. Under q8_0 a matrix whose rows are not
// a multiple of 32 values is written as f16 instead, and a line saying so is appended to `notes`.
GgufFile gguf_of_model(const layers::ModelConfig& config, const layers::ParamList& params,
                       const data::Tokenizer& tokenizer, GgufType type, const std::string& name,
                       std::vector<std::string>& notes);

}  // namespace tf::exporting
