// FLOPs and memory estimates for a recipe's model.
#include "train/plan.h"

#include <unistd.h>

#include <cstdio>

#include "layers/models/model.h"
#include "optim/factory.h"

namespace tf::train {

RunPlan plan_run(const Recipe& r) {
  RunPlan p;
  const layers::ParamList params = layers::parameter_shapes(r.model);
  for (const auto& param : params) {
    p.parameters += param.tensor.numel();
    if (param.kind != layers::ParamKind::embedding) p.non_embedding_parameters += param.tensor.numel();
  }
  const auto& m = r.model;
  const double L = m.n_layers, d = m.d_model, T = r.data.seq_len, B = r.train.batch_size, V = m.vocab_size;
  const double F = m.ff_width();
  // Forward + backward: 2 FLOPs per multiply-add, backward twice the forward; attention's two
  // T x T products add 12 L d T per token. The LM head is counted: it is a real matmul even when tied.
  p.flops_per_token = 6.0 * (p.non_embedding_parameters + V * d) + 12.0 * L * d * T;
  const double optimizer_slots = optim::state_slots(r.optim);
  const double state_bytes = 4.0 * p.parameters * (2 + optimizer_slots);  // weights, grads, slots
  // Saved activations per token per layer, in floats: block input, two layer-norm outputs, qkv
  // (3d), attention output (d), projection input, MLP input, hidden before and after GELU (2F),
  // residual sums; the attention op keeps only a log-sum-exp per row, not T x T weights.
  const double per_token_layer = 10 * d + 2 * F + m.n_heads;
  const double activations = 4.0 * B * T * (L * per_token_layer + 3 * V);  // + logits, their grad
  p.peak_bytes = state_bytes + activations;
  return p;
}

double machine_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::string gibibytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string RunPlan::to_string() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "parameters            %lld (%lld outside embeddings)\n"
                "FLOPs per token       %.3g (training: 6 N + 12 L d T)\n"
                "peak memory estimate  %.1f MiB (weights, gradients, optimizer state, activations)\n",
                static_cast<long long>(parameters), static_cast<long long>(non_embedding_parameters),
                flops_per_token, peak_bytes / (1 << 20));
  return buf;
}

}  // namespace tf::train
