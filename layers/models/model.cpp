// The model factory.
#include "layers/models/model.h"

#include "layers/models/bert.h"
#include "layers/models/gpt.h"

namespace tf::layers {

std::unique_ptr<LanguageModel> build_model(const ModelConfig& config, Init& init) {
  if (config.arch == Architecture::bert) return std::make_unique<Bert>(config, init);
  return std::make_unique<Gpt>(config, init);
}

}  // namespace tf::layers
