// The model factory.
#include "layers/models/model.h"

#include "layers/models/bert.h"
#include "layers/models/gpt.h"

namespace tf::layers {

std::unique_ptr<LanguageModel> build_model(const ModelConfig& config, Init& init) {
  if (config.arch == Architecture::bert) return std::make_unique<Bert>(config, init);
  return std::make_unique<Gpt>(config, init);
}

ParamList parameter_shapes(const ModelConfig& config, DType dtype) {
  Init init{Rng(0), dtype, /*shapes_only=*/true};
  return build_model(config, init)->parameters();
}

}  // namespace tf::layers
