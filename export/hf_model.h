// A tapeformer model as a Hugging Face model folder: model.safetensors under the tensor names of
// transformers' LlamaForCausalLM or GPT2LMHeadModel (a GPT), BertForMaskedLM or RoFormerForMaskedLM (a
// BERT with learned positions or RoPE), and a config.json with their keys, so that transformers,
// candle or mlx load it by those names (docs/export.md, "safetensors").
//
//   const HfModel hf = hf_model(config, params, SafetensorsType::f32);   // InputError: what does not map
//   hf.weights.write(dir / "model.safetensors");  write_file_atomically(dir / "config.json", hf.config_json);
//
// A GPT's two blocks are those of export/gguf_model.h (the same refusals): the modern one as Llama, the
// classic one as GPT-2. What changes on the way:
//   - Llama's rotary embedding turns dimension j with j + D/2 (rotate_half), tapeformer's turns 2i with
//     2i + 1 (docs/models.md): each head's query and key rows are permuted, even rows first, so that
//     Llama's pair (j, j + D/2) is tapeformer's pair (2j, 2j + 1). Scores are unchanged.
//   - GPT-2's layers are Conv1D: their weights are stored (in, out), the transpose of tapeformer's.
#pragma once
#include <string>

#include "export/safetensors.h"
#include "layers/models/config.h"
#include "layers/module.h"

namespace tf::exporting {

struct HfModel {
  std::string architecture;  // "LlamaForCausalLM", "GPT2LMHeadModel", "BertForMaskedLM", "RoFormerForMaskedLM"
  SafetensorsFile weights;
  std::string config_json;
};

HfModel hf_model(const layers::ModelConfig& config, const layers::ParamList& params, SafetensorsType type);

}  // namespace tf::exporting
