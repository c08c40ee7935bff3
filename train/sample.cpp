// Sampling from a GPT; see sample.h.
//
// V = vocabulary size, T = context length (at most max_seq_len).
#include "train/sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "framework/autograd/tape.h"
#include "framework/error.h"

namespace tf::train {
namespace {

void check_filter_options(const SampleOptions& o) {
  TF_CHECK_INPUT(std::isfinite(o.temperature) && o.temperature >= 0,
                 "sample: temperature must be a finite number >= 0 (0 = greedy), got ", o.temperature);
  TF_CHECK_INPUT(o.top_k >= 0, "sample: top_k must be >= 0 (0 = no top-k filter), got ", o.top_k);
  TF_CHECK_INPUT(o.top_p > 0 && o.top_p <= 1, "sample: top_p must be in (0, 1] (1 = no nucleus filter), got ",
                 o.top_p);
}

// The logits (V) of the token after `context` (1 <= T <= max_seq_len ids), recomputing the whole
// forward pass over the context: O(T) positions for each new token. A KV-cached decoder (each
// block keeping the keys and values of earlier positions and running only the newest id, at
// position offset T - 1, see Gpt::hidden) replaces this function and nothing else; it must start
// afresh whenever the context is cropped, because every position then shifts by one.
std::vector<double> next_logits(const layers::Gpt& model, std::span<const int32_t> context,
                                const layers::Context& ctx) {
  const auto T = static_cast<int64_t>(context.size());
  const Tensor ids = Tensor::from_ids(std::vector<int32_t>(context.begin(), context.end()), {1, T});  // (1, T)
  const Tensor logits = model.logits(ids, Tensor(), ctx);                                           // (1, T, V)
  const int64_t V = logits.dim(2);
  return dispatch(logits.dtype(), [&](auto zero) {
    using Scalar = decltype(zero);
    const Scalar* last = logits.data<Scalar>() + (T - 1) * V;  // (V): the prediction after the last id
    return std::vector<double>(last, last + V);
  });
}

}  // namespace

// Note [sampling filters]
// The order is the common one (Hugging Face's logits warpers, nanoGPT's generate):
//  1. temperature: p = softmax(logits / temperature) (Ackley, Hinton and Sejnowski 1985); below 1
//     it sharpens the distribution, above 1 it flattens it; 0 is its limit, the argmax (greedy).
//  2. top-k (Fan, Lewis and Dauphin 2018, "Hierarchical Neural Story Generation"): keep the k
//     most probable tokens, exactly k (equal logits are ranked by the lower id, so the result is
//     deterministic), and renormalise.
//  3. top-p, nucleus sampling (Holtzman et al. 2020, "The Curious Case of Neural Text
//     Degeneration", section 3.1): of what remains, keep the smallest set of most probable tokens
//     whose mass is >= p (always at least the most probable one), and renormalise.
std::vector<double> filter_probabilities(std::span<const double> logits, const SampleOptions& options) {
  check_filter_options(options);
  TF_CHECK_INPUT(!logits.empty(), "filter_probabilities: the logits row is empty (vocabulary of size 0)");
  const auto V = static_cast<int64_t>(logits.size());
  int64_t best = 0;  // the first maximum
  for (int64_t v = 0; v < V; ++v) {
    TF_CHECK(!std::isnan(logits[v]), "filter_probabilities: logit ", v, " is NaN (has training diverged?)");
    if (logits[v] > logits[best]) best = v;
  }
  TF_CHECK(std::isfinite(logits[best]), "filter_probabilities: the largest logit is ", logits[best]);

  std::vector<double> probs(V, 0.0);  // (V)
  if (options.temperature == 0) {
    probs[best] = 1.0;
    return probs;
  }
  // 1. softmax(logits / temperature), with the maximum subtracted so exp cannot overflow.
  double total = 0;
  for (int64_t v = 0; v < V; ++v) total += probs[v] = std::exp((logits[v] - logits[best]) / options.temperature);
  for (double& p : probs) p /= total;

  const bool cut_k = options.top_k > 0 && options.top_k < V;
  const bool cut_p = options.top_p < 1;
  if (!cut_k && !cut_p) return probs;
  // Token ids by decreasing logit (the order of probs for any temperature > 0), ties by lower id.
  int64_t keep = cut_k ? options.top_k : V;
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  // 2. top-k keeps order[0 .. k); 3. top-p the shortest prefix of that with mass >= p of it.
  double kept_mass = 0;
  for (int64_t i = 0; i < keep; ++i) kept_mass += probs[order[i]];
  if (cut_p) {
    double cumulative = 0;
    for (int64_t i = 0; i < keep; ++i) {
      cumulative += probs[order[i]];
      if (cumulative >= options.top_p * kept_mass) {
        keep = i + 1;
        break;
      }
    }
  }
  std::vector<double> filtered(V, 0.0);  // (V)
  double filtered_mass = 0;
  for (int64_t i = 0; i < keep; ++i) filtered_mass += probs[order[i]];
  for (int64_t i = 0; i < keep; ++i) filtered[order[i]] = probs[order[i]] / filtered_mass;
  return filtered;
}

int32_t draw_token(std::span<const double> probs, Rng& rng) {
  TF_CHECK(!probs.empty(), "draw_token: empty distribution");
  double total = 0;
  for (const double p : probs) total += p;
  TF_CHECK(total > 0 && std::isfinite(total), "draw_token: probabilities sum to ", total);
  // Inverse CDF: the first token whose cumulative mass exceeds u. Scaling u by the total absorbs
  // rounding in the sum, and the fallback below the loop takes the last possible token if u lands
  // past the final cumulative sum by a rounding error.
  const double u = rng.uniform() * total;
  double cumulative = 0;
  int32_t last_possible = 0;
  for (size_t v = 0; v < probs.size(); ++v) {
    if (probs[v] <= 0) continue;
    cumulative += probs[v];
    last_possible = static_cast<int32_t>(v);
    if (u < cumulative) return last_possible;
  }
  return last_possible;
}

std::vector<int32_t> sample(const layers::Gpt& model, std::vector<int32_t> prompt, const SampleOptions& options,
                            const std::function<void(int32_t)>& on_token) {
  TF_CHECK_INPUT(!prompt.empty(), "sample: the prompt is empty; give at least one token to continue");
  TF_CHECK_INPUT(options.tokens >= 0, "sample: tokens must be >= 0, got ", options.tokens);
  check_filter_options(options);
  const int64_t V = model.config().vocab_size, max_seq_len = model.config().max_seq_len;
  for (size_t i = 0; i < prompt.size(); ++i)
    TF_CHECK_INPUT(prompt[i] >= 0 && prompt[i] < V, "sample: prompt token ", i, " has id ", prompt[i],
                   " outside the model's vocabulary [0, ", V, ")");

  const NoGradGuard no_grad;
  const layers::Context eval;  // training = false: dropout is the identity
  Rng rng(options.seed);
  std::vector<int32_t> ids = std::move(prompt);
  ids.reserve(ids.size() + options.tokens);
  for (int64_t i = 0; i < options.tokens; ++i) {
    const std::span<const int32_t> all(ids);
    const std::span<const int32_t> context = all.last(std::min<size_t>(all.size(), max_seq_len));
    const std::vector<double> logits = next_logits(model, context, eval);  // (V)
    const int32_t next = draw_token(filter_probabilities(logits, options), rng);
    ids.push_back(next);
    if (on_token) on_token(next);
  }
  return ids;
}

}  // namespace tf::train
