// Autoregressive sampling from a GPT: temperature, top-k and nucleus (top-p) filtering of the
// next-token distribution, one token at a time.
//
// V = vocabulary size.
//
//   tf::train::SampleOptions o;
//   o.tokens = 200; o.temperature = 0.8; o.top_k = 40; o.seed = 7;
//   std::vector<int32_t> ids = tf::train::sample(gpt, tokenizer.encode("The jury"), o,
//                                                [&](int32_t id) { std::cout << tokenizer.decode({&id, 1}); });
//   // ids = the prompt followed by o.tokens new ids
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "framework/random.h"
#include "layers/models/gpt.h"

namespace tf::train {

struct SampleOptions {
  int64_t tokens = 100;      // new tokens to generate
  double temperature = 1.0;  // logits are divided by it; 0 = greedy (argmax, no randomness)
  int64_t top_k = 0;         // keep the k most probable tokens; 0 = all
  double top_p = 1.0;        // keep the smallest most-probable set with mass >= p (0, 1]; 1 = all
  uint64_t seed = 0;         // the tf::Rng drawing every token
  bool kv_cache = true;      // decode with a KV cache; false recomputes the whole context per token
                             // (same tokens: Note [context window] in sample.cpp)
};

// The distribution the next token is drawn from, given one row of logits (V): the filters of
// Note [sampling filters] applied in order. Sums to 1; the tokens filtered out are exactly 0.
// tf::InputError for a temperature < 0 or not finite, top_k < 0, top_p outside (0, 1], or an
// empty row.
std::vector<double> filter_probabilities(std::span<const double> logits, const SampleOptions& options);

// An index drawn from probs (V, summing to 1, as filter_probabilities returns) with one uniform
// draw of rng (inverse CDF). Never returns an index of probability 0.
int32_t draw_token(std::span<const double> probs, Rng& rng);

// Continues `prompt` by options.tokens ids and returns the prompt followed by them; on_token, when
// given, is called with each new id as soon as it is chosen (to stream the decoded text). The
// model runs in eval mode (no dropout) under NoGradGuard on a window of at most max_seq_len ids:
// the last max_seq_len of the prompt, and when generation fills it, the last max_seq_len / 2 ids
// (Note [context window] in sample.cpp; a learned position table has no row beyond max_seq_len).
// tf::InputError for an empty prompt, an id outside [0, V), tokens < 0 or bad filter options.
std::vector<int32_t> sample(const layers::Gpt& model, std::vector<int32_t> prompt, const SampleOptions& options,
                            const std::function<void(int32_t)>& on_token = {});

}  // namespace tf::train
