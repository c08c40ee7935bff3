// Sampling from a GPT; see sample.h.
//
// V = vocabulary size, T = context length (at most max_seq_len).
#include "train/sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

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

// The last row (V) of logits (1, T, V), as doubles: the prediction after the last id.
std::vector<double> last_row(const Tensor& logits) {
  const int64_t T = logits.dim(1), V = logits.dim(2);
  return dispatch(logits.dtype(), [&](auto zero) {
    using Scalar = decltype(zero);
    const Scalar* last = logits.data<Scalar>() + (T - 1) * V;  // (V)
    return std::vector<double>(last, last + V);
  });
}

// The logits (V) of the token after `context` (1 <= T <= max_seq_len ids), recomputing the whole
// forward pass over the context: O(T) positions for each new token.
std::vector<double> next_logits(const layers::Gpt& model, std::span<const int32_t> context,
                                const layers::Context& ctx) {
  const auto T = static_cast<int64_t>(context.size());
  const Tensor ids = Tensor::from_ids(std::vector<int32_t>(context.begin(), context.end()), {1, T});  // (1, T)
  return last_row(model.logits(ids, Tensor(), ctx));                                                // (1, T, V)
}

// The same logits with a KV cache that holds the first cache.length() ids of `context`: runs only
// the ids after them, as one chunk (the whole prompt after a clear, then the newest id), and
// leaves the cache holding the whole context.
std::vector<double> next_logits_cached(const layers::Gpt& model, std::span<const int32_t> context,
                                       layers::KvCache& cache, const layers::Context& ctx) {
  const std::span<const int32_t> fresh = context.subspan(cache.length());
  const auto T = static_cast<int64_t>(fresh.size());
  const Tensor ids = Tensor::from_ids(std::vector<int32_t>(fresh.begin(), fresh.end()), {1, T});  // (1, T)
  return last_row(model.logits_cached(ids, cache, ctx));                                       // (1, T, V)
}

}  // namespace

// Note [context window]
// ~~~~~~~~~~~~~~~~~~~~~
// The model sees at most L = max_seq_len positions (a learned position table has L rows). The
// context is ids[start ..): at first the last L ids of the prompt; when a new token makes it
// longer than L, it restarts from its last max(1, L / 2) ids and grows again from there (the
// "context shift" of llama.cpp, keeping half the window). Both decoders follow the same window:
//  - without a cache (SampleOptions::kv_cache false), each token runs the whole context again;
//  - with a KV cache (layers/kv_cache.h), the cache holds the first cache.length() ids of the
//    context and each call runs only the ids after them: the prompt as one chunk (prefill), then
//    one id per token. A restart moves every kept id to a new position (its learned or sinusoidal
//    row, its RoPE angle), so it clears the cache and the kept half runs as one prefill chunk.
// Cropping to the last L ids at every token instead (nanoGPT's sliding window) would show the model
// more context, but every token past L would then need a fresh prefill of L ids, as slow as no
// cache; halving costs one prefill of L / 2 ids per L / 2 tokens.
// The decoders differ only in float rounding (float32; they agree exactly in float64), so with a
// seed they draw the same tokens; tests/train/sample_test.cpp compares them across restarts.

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
  // Note [context window]: ids[start ..) is what the model sees.
  const auto window = static_cast<size_t>(max_seq_len), keep = std::max<size_t>(1, window / 2);
  size_t start = ids.size() > window ? ids.size() - window : 0;
  std::optional<layers::KvCache> cache;
  if (options.kv_cache) cache = model.make_cache();
  for (int64_t i = 0; i < options.tokens; ++i) {
    if (ids.size() - start > window) {
      start = ids.size() - keep;
      if (cache) cache->clear();
    }
    const std::span<const int32_t> context = std::span<const int32_t>(ids).subspan(start);
    const std::vector<double> logits =
        cache ? next_logits_cached(model, context, *cache, eval) : next_logits(model, context, eval);  // (V)
    const int32_t next = draw_token(filter_probabilities(logits, options), rng);
    ids.push_back(next);
    if (on_token) on_token(next);
  }
  return ids;
}

}  // namespace tf::train
