// FLOPs and memory estimates for a recipe's model.
#include "train/plan.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "layers/models/model.h"
#include "optim/factory.h"

namespace tf::train {

RunPlan plan_run(const Recipe& r, int64_t corpus_bytes) {
  RunPlan p;
  const layers::ParamList params = layers::parameter_shapes(r.model);
  for (const auto& param : params) {
    p.parameters += param.tensor.numel();
    if (param.kind != layers::ParamKind::embedding) p.non_embedding_parameters += param.tensor.numel();
  }
  const auto& m = r.model;
  const double L = m.n_layers, d = m.d_model, T = r.data.seq_len, B = r.train.batch_size, V = m.vocab_size;
  const double F = m.ff_width();
  p.flops_per_token = training_flops_per_token(params, m, r.data.seq_len);
  const double optimizer_slots = optim::state_slots(r.optim);
  const double state_bytes = 4.0 * p.parameters * (2 + optimizer_slots);  // weights, grads, slots
  // Saved activations per token per layer, in floats: block input, two layer-norm outputs, qkv
  // (3d), attention output (d), projection input, MLP input, hidden before and after the activation
  // (2F; a gated kind's fc makes 2F, 3F in all), residual sums; the attention op keeps only a
  // log-sum-exp per row, not T x T weights.
  const double per_token_layer = 10 * d + (kernels::gated(m.feed_forward) ? 3 : 2) * F + m.n_heads;
  // train.recompute blocks (Note [recomputed blocks] in layers/block.cpp): every block's input, and
  // one block's activations while backward replays it.
  const double kept_layers = r.train.recompute == "blocks" ? L * d + per_token_layer : L * per_token_layer;
  const double activations = 4.0 * B * T * (kept_layers + 3 * V);  // + logits, their grad
  // Writing a checkpoint: the optimizer's state is copied (Optimizer::state()) and the whole file is
  // built in memory first (Note [writing through memory] in framework/io/hdf5_io.cpp): weights and
  // slots once more, and the slots again. It adds to the activations rather than taking turns with
  // them: the storage pool keeps a step's blocks for the next step, so their pages stay resident.
  // Measured (tests/train/memory_estimate_test.cpp and nine gpt_brown_char sizes, d_model 32-512,
  // batch 1-32): estimate / peak RSS 1.03-1.24, the threads sharing each op. Split by rows
  // (Note [batch-split threads]) the parts hold their rows' activations at moments of their own,
  // so the peak is lower (1.22-1.30 at d_model 256, the thread's private gradients included) and
  // this is an upper bound.
  const double checkpoint = 4.0 * p.parameters * (1 + 2 * optimizer_slots);
  // The corpus: its token shards, mapped; at most every page of them is resident (random windows over
  // a long run touch them all; the kernel may drop them again, as they are the files' pages).
  const double data = static_cast<double>(corpus_bytes);
  p.peak_bytes = kProcessBytes + data + state_bytes + activations + checkpoint;
  return p;
}

int64_t non_embedding_parameters(const layers::ParamList& params) {
  int64_t n = 0;
  for (const auto& p : params)
    if (p.kind != layers::ParamKind::embedding) n += p.tensor.numel();
  return n;
}

// 6 N: one multiply-add (2 FLOPs) per weight forward, twice that backward; 12 L d T: attention's
// Q K^T and P V, 2 T d each per layer forward, times 3 with backward, every key for every query.
// A linear-attention layer instead reads and updates a (D, D + 1) state per head, 4 D (D + 1) per
// head forward, and its backward is three such products: 16 H D (D + 1), whatever T (the sums
// inside a chunk, of the same order at D = 32, are left out as the softmax term leaves out softmax).
// A differential layer's H / 2 heads each form two maps, Q K^T over D and P V over 2D: 6 T D per
// head pair forward, 18 H D T with backward (1.5 times softmax attention's). A Mamba layer's scan
// makes 2 multiply-adds per channel and state forward (h and C . h), 12 E N with backward, whatever
// T (its projections and convolution are weights, in 6 N; the exponentials are left out).
double training_flops_per_token(const layers::ParamList& params, const layers::ModelConfig& m, int64_t seq_len) {
  const double D = static_cast<double>(m.head_dim());
  double mixing = 0;
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const double H = static_cast<double>(m.heads(l));
    switch (m.mixer(l)) {
      case layers::MixerKind::attention: mixing += 12.0 * H * D * static_cast<double>(seq_len); break;
      case layers::MixerKind::linear: mixing += 16.0 * H * D * (D + 1); break;
      case layers::MixerKind::differential: mixing += 18.0 * H * D * static_cast<double>(seq_len); break;
      case layers::MixerKind::mamba:
        mixing += 12.0 * static_cast<double>(m.mamba_expand * m.d_model * m.mamba_state);
        break;
    }
  }
  return 6.0 * static_cast<double>(non_embedding_parameters(params)) + mixing;
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
                "FLOPs per token       %.3g (training: 6 N + 12 L d T; a linear-attention layer 16 H D (D + 1))\n"
                "peak memory estimate  %.1f MiB (program, corpus, weights, gradients, optimizer state, and the larger of activations and a checkpoint being written)\n",
                static_cast<long long>(parameters), static_cast<long long>(non_embedding_parameters),
                flops_per_token, peak_bytes / (1 << 20));
  return buf;
}

}  // namespace tf::train
