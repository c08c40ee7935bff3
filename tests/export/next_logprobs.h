// The next-token log-probabilities tapeformer's GPT gives after a prompt, for the export tests to set
// beside what another implementation computes from an exported file.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "framework/autograd/tape.h"
#include "layers/models/gpt.h"
#include "layers/models/model.h"

namespace tf::testing {

// ln softmax of the model's logits at every position of `ids`, in double: (T) rows of (V).
inline std::vector<std::vector<double>> all_logprobs(const layers::LanguageModel& model, const std::vector<int32_t>& ids) {
  NoGradGuard no_grad;
  const Tensor logits = model.logits(Tensor::from_ids(ids, {1, static_cast<int64_t>(ids.size())}), Tensor(), {});
  const int64_t T = logits.dim(1), V = logits.dim(2);
  std::vector<std::vector<double>> out(T, std::vector<double>(V));
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits.data<float>() + t * V;
    double max = -INFINITY, sum = 0;
    for (int64_t v = 0; v < V; ++v) max = std::max(max, static_cast<double>(row[v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - max);
    for (int64_t v = 0; v < V; ++v) out[t][v] = row[v] - max - std::log(sum);
  }
  return out;
}

// The next-token log-probabilities after the last of `ids`.
inline std::vector<double> next_logprobs(const layers::Gpt& gpt, const std::vector<int32_t>& ids) {
  return all_logprobs(gpt, ids).back();
}

}  // namespace tf::testing
