// Head importance and the loss with one head masked; see head_importance.h, Note [head importance].
//
// B = batch, L = layers, H = query heads per layer.
#include "inspect/head_importance.h"

#include <algorithm>
#include <cmath>

#include "framework/autograd/tape.h"
#include "framework/error.h"
#include "train/evaluate.h"

namespace tf::inspect {
namespace {

Tensor key_padding_of(const data::CausalBatch&) { return Tensor(); }
Tensor key_padding_of(const data::MaskedLmBatch& b) { return b.attention_mask; }

// The same loss figures as `tapeformer eval` (token-weighted mean cross-entropy), under a context.
train::EvalResult evaluate(const layers::LanguageModel& model, data::CausalBatcher& batcher, int64_t max_batches,
                    const layers::Context& ctx) {
  return train::evaluate_causal(model, batcher, max_batches, /*chars_in_text=*/0, ctx);
}
train::EvalResult evaluate(const layers::LanguageModel& model, data::MaskedLmBatcher& batcher, int64_t max_batches,
                    const layers::Context& ctx) {
  return train::evaluate_masked(model, batcher, max_batches, ctx);
}

// Turns requires_grad off on the parameters for its lifetime, then back to what it was: the gates'
// derivative needs no parameter gradient, and the caller's accumulated gradients stay untouched.
class FrozenParameters {
 public:
  explicit FrozenParameters(layers::ParamList params) : params_(std::move(params)) {
    for (auto& p : params_) {
      was_.push_back(p.tensor.requires_grad());
      p.tensor.set_requires_grad(false);
    }
  }
  ~FrozenParameters() {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].tensor.set_requires_grad(was_[i]);
  }
  FrozenParameters(const FrozenParameters&) = delete;
  FrozenParameters& operator=(const FrozenParameters&) = delete;

 private:
  layers::ParamList params_;
  std::vector<bool> was_;
};

// Adds |dL(x_b)/dxi_{b,h}| of every row b with a predicted token to raw (L H), from one backward pass
// over the batch with a (B, H) gate per layer (Note [head importance]); returns the rows counted.
// inputs, targets (B, T) i32; key_padding (B, T) or undefined.
int64_t add_gate_derivatives(const layers::LanguageModel& model, const Tensor& inputs, const Tensor& targets,
                             const Tensor& key_padding, DType dtype, std::vector<double>& raw) {
  const layers::ModelConfig& config = model.config();
  const int64_t L = config.n_layers, B = targets.dim(0), T = targets.dim(1);
  std::vector<int64_t> predicted(static_cast<size_t>(B), 0);  // n_b
  const int32_t* target = targets.data<int32_t>();             // (B, T)
  for (int64_t i = 0; i < B * T; ++i) predicted[static_cast<size_t>(i / T)] += target[i] != data::kIgnoreIndex;
  int64_t N = 0;
  for (int64_t n : predicted) N += n;
  if (N == 0) return 0;
  std::vector<Tensor> gates;  // L x (B, H_l), all 1
  for (int64_t l = 0; l < L; ++l) gates.push_back(Tensor::full({B, config.heads(l)}, 1.0, dtype).set_requires_grad());
  layers::Context ctx;
  ctx.head_gates = &gates;
  backward(model.loss(inputs, targets, key_padding, ctx));
  for (int64_t l = 0, first = 0; l < L; first += config.heads(l), ++l) {
    const int64_t H = config.heads(l);
    const Tensor grad = gates[static_cast<size_t>(l)].grad();  // (B, H); undefined: the loss ignores the layer
    if (!grad.defined()) continue;
    const std::vector<double> g = grad.to_vector();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = predicted[static_cast<size_t>(b)];
      if (n == 0) continue;
      for (int64_t h = 0; h < H; ++h)
        raw[static_cast<size_t>(first + h)] += std::abs(static_cast<double>(N) / static_cast<double>(n) * g[b * H + h]);
    }
  }
  int64_t rows = 0;
  for (int64_t n : predicted) rows += n > 0;
  return rows;
}

template <class Batcher>
HeadImportance measure(const layers::LanguageModel& model, Batcher& batcher, int64_t max_batches,
                       bool masked_losses) {
  const layers::ModelConfig& config = model.config();
  const int64_t L = config.n_layers;
  const DType dtype = model.parameters().front().tensor.dtype();
  HeadImportance r;
  const train::EvalResult all_heads = evaluate(model, batcher, max_batches, layers::Context());
  // Unreachable from eval's batchers: every window but a lone token's has a target, and every BERT row one.
  TF_CHECK(all_heads.tokens > 0, "head_importance: the ", all_heads.batches, " batches read hold no token to predict");
  r.loss = all_heads.loss;
  r.tokens = all_heads.tokens;
  r.batches = all_heads.batches;

  std::vector<double> raw(static_cast<size_t>(config.total_heads()), 0.0);  // layer by layer: sum over sequences of |dL(x)/dxi|
  {
    const FrozenParameters frozen(model.parameters());
    train::for_each_batch(batcher, max_batches, "head_importance", [&](const auto& batch) {
      r.sequences += add_gate_derivatives(model, batch.inputs, batch.targets, key_padding_of(batch), dtype, raw);
    });
  }
  for (int64_t l = 0, first = 0; l < L; first += config.heads(l), ++l) {
    const int64_t H = config.heads(l);
    auto mean = [&](int64_t h) { return raw[static_cast<size_t>(first + h)] / static_cast<double>(r.sequences); };
    double norm = 0;  // l2 norm of the layer's mean importances
    for (int64_t h = 0; h < H; ++h) norm += mean(h) * mean(h);
    norm = std::sqrt(norm);
    for (int64_t h = 0; h < H; ++h) {
      HeadScore s;
      s.layer = l;
      s.head = h;
      s.raw_importance = mean(h);
      s.importance = norm > 0 ? s.raw_importance / norm : 0.0;
      if (masked_losses) {
        // Gates of 1 leave the other heads exactly as they are (layers/attention.cpp, gate_heads).
        std::vector<Tensor> gates = all_open_gates(config, dtype);
        std::vector<double> masked(static_cast<size_t>(H), 1.0);
        masked[static_cast<size_t>(h)] = 0.0;
        gates[static_cast<size_t>(l)] = Tensor::from_vector(masked, {H}, dtype);
        layers::Context ctx;
        ctx.head_gates = &gates;
        s.masked_loss = evaluate(model, batcher, max_batches, ctx).loss;
      }
      r.heads.push_back(s);
    }
  }
  std::stable_sort(r.heads.begin(), r.heads.end(),
                   [](const HeadScore& a, const HeadScore& b) { return a.importance > b.importance; });
  return r;
}

}  // namespace

std::vector<Tensor> all_open_gates(const layers::ModelConfig& config, DType dtype) {
  std::vector<Tensor> gates;
  for (int64_t l = 0; l < config.n_layers; ++l) gates.push_back(Tensor::full({config.heads(l)}, 1.0, dtype));
  return gates;
}

HeadImportance head_importance(const layers::LanguageModel& model, data::CausalBatcher& sequential_batcher,
                               int64_t max_batches, bool masked_losses) {
  return measure(model, sequential_batcher, max_batches, masked_losses);
}

HeadImportance head_importance(const layers::LanguageModel& model, data::MaskedLmBatcher& sequential_batcher,
                               int64_t max_batches, bool masked_losses) {
  return measure(model, sequential_batcher, max_batches, masked_losses);
}

}  // namespace tf::inspect
