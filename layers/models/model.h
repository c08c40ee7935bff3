// The interface the trainer, evaluator and sampler use for either model, and its factory.
//
// ids: (B, T) i32 token ids; targets: (B, T) i32 (-100 = no loss at that position);
// key_padding: (B, T) float, 1 = real token, 0 = padding, or undefined (GPT never pads).
#pragma once
#include <memory>

#include "layers/models/config.h"
#include "layers/module.h"

namespace tf::layers {

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  virtual const ModelConfig& config() const = 0;
  // (B, T, V) logits.
  virtual Tensor logits(const Tensor& ids, const Tensor& key_padding, const Context& ctx) const = 0;
  // Mean cross-entropy over positions whose target is not -100.
  virtual Tensor loss(const Tensor& ids, const Tensor& targets, const Tensor& key_padding, const Context& ctx) const = 0;
  // Every parameter once (a tied weight appears under its first name only), in a stable order.
  virtual ParamList parameters() const = 0;
};

std::unique_ptr<LanguageModel> build_model(const ModelConfig& config, Init& init);

// The parameters a model of this config has (names, shapes, kinds), from the model's own
// parameters() built with Init::shapes_only: nothing allocated, so a config of any size can be
// planned or checked before it is built. The tensors have shapes only.
ParamList parameter_shapes(const ModelConfig& config, DType dtype = DType::f32);

}  // namespace tf::layers
