// The fused decoding step of a GPT; see gpt_decode.h.
//
// C = d_model, H = query heads, G = key/value heads, Hg = H / G query heads per key/value head,
// D = head size, F = d_ff, V = vocabulary, L = the cache's capacity, P = threads.
//
// Note [fused decoding step]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A step reads every weight once (43 MB for config B, more than the L3), so it is bound by memory
// bandwidth, and one core does not saturate it: two threads must stream weights at once, all the
// time. On the op path each gemv, layer norm and GELU was a parallel region of its own, and the
// attention of the heads ran on one thread: 57 GOMP_parallel calls per token (perf probe on
// libgomp, config B), 25 of them two-thread forks of OpenBLAS's sgemv. With
// OMP_WAIT_POLICY=PASSIVE (how bench/compare_torch.py runs) each fork and join is a futex wake-up
// (~7 us per barrier measured on the loaded machine). Here one parallel region runs the whole
// step and each thread owns fixed shares of every weight:
//  - attention: the thread's key/value groups, whole: their query, key and value rows of W_qkv,
//    the key and value written into the cache, attention_step_fast over them. No other thread
//    needs them: nothing to wait for;
//  - W_O: the columns of its own heads, a partial product (C) of the output projection;
//  - barrier; every thread sums the P partials (in thread order, so all threads hold the same
//    residual stream bit for bit) into its private copy of x, then layer norm 2 (each thread
//    computes it whole: C values, cheaper than a barrier);
//  - MLP: its slice of the hidden units (rows of W_fc, then GELU), then the same columns of the
//    MLP's W_proj: a partial product again; barrier; sum into x.
// So a block costs two barriers: 12 per token for config B, and one fork and join. (The one-row
// layer norm and GELU kernels still open a nested region of one thread, which wakes nobody.)
// The partial buffers alternate between the two barriers: a thread writes attention partials only
// after the next barrier past every thread's last read of them.
// Summing partials adds the output projections in another order than one gemv: float32 rounding
// (tests/layers/kv_cache_test.cpp compares with the op path and the full forward).
// Measured (bench_decode, docs/performance.md): on the loaded shared machine, where DRAM gave
// 2.6 - 4 GB/s, both paths run at the read bound at one thread; at two threads the fused step ran
// 1.2x the op path with OMP_WAIT_POLICY=PASSIVE and 1.9x with the default (spinning) policy.
// perf over fused decoding: the gemv loop is nearly all of a step's samples, attention ~1%.
#include "layers/models/gpt_decode.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/activation.h"
#include "framework/kernels/cpu/gemv.h"
#include "framework/kernels/cpu/layer_norm.h"
#include "framework/kernels/mode.h"
#include "framework/storage_pool.h"

namespace tf::layers {

namespace {

const float* data_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
const float* offset_or_null(const float* p, int64_t offset) { return p ? p + offset : nullptr; }

// Thread t's share [begin, end) of n items among p threads; inner boundaries are multiples of
// `align` (16 floats: a column block then starts on a 64-byte line).
struct Range {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};
Range share(int64_t n, int t, int p, int64_t align) {
  auto cut = [&](int i) { return std::min(n, (n * i / p + align - 1) / align * align); };
  return {cut(t), cut(t + 1)};
}

// y (C) = layer_norm(x (C)); y may be x.
void layer_norm_row(const LayerNorm& ln, const float* x, int64_t C, float* y) {
  float mean, rstd;
  kernels::layer_norm_forward_fast({.rows = 1, .channels = C, .eps = ln.eps, .x = x, .weight = data_or_null(ln.weight),
                                    .bias = data_or_null(ln.bias), .y = y, .mean = &mean, .rstd = &rstd});
}

// x (C) += bias + the P partial products (P, C), added in thread order.
void add_partials(float* x, const float* parts, int p, const float* bias, int64_t C) {
  for (int64_t c = 0; c < C; ++c) {
    float sum = bias ? bias[c] : 0.0f;
    for (int u = 0; u < p; ++u) sum += parts[u * C + c];
    x[c] += sum;
  }
}

// y (n) = W[:, cols] x_cols for W (n, ldw) and x_cols the inputs of those columns: one thread's
// partial product; zeros without columns.
void partial_gemv(int64_t n, Range cols, const float* w, int64_t ldw, const float* x_cols, float* y) {
  if (cols.size() == 0) {
    std::fill(y, y + n, 0.0f);
    return;
  }
  kernels::gemv_fast(n, cols.size(), w + cols.begin, ldw, x_cols, nullptr, y);
}

thread_local bool unfused = false;  // set by UnfusedDecodeGuard

}  // namespace

UnfusedDecodeGuard::UnfusedDecodeGuard() : previous_(unfused) { unfused = true; }
UnfusedDecodeGuard::~UnfusedDecodeGuard() { unfused = previous_; }

bool fused_decode_applies(const Gpt& model, const KvCache& cache, const Tensor& x) {
  if (unfused || grad_enabled() || x.rank() != 3 || x.dim(0) != 1 || x.dim(1) != 1 || x.dtype() != DType::f32 ||
      !kernels::use_fast<float>() || cache.options().batch != 1 || cache.length() >= cache.capacity())
    return false;
  for (const TransformerBlock& b : model.blocks)
    if (!b.attn.options.causal || b.attn.options.rope) return false;
  return true;
}

Tensor decode_step_fused(const Gpt& model, const Tensor& x_in, KvCache& cache) {
  const ModelConfig& config = model.config();
  const MultiHeadAttention& first = model.blocks.at(0).attn;
  const int64_t C = config.d_model, V = config.vocab_size, H = first.options.n_heads, G = first.kv_heads(),
                Hg = H / G, D = first.head_dim(), F = model.blocks[0].mlp.fc.weight.dim(0);
  const int64_t position = cache.length(), L = cache.capacity();
  const Tensor& head_weight = config.tie_embeddings ? model.token_embedding.weight : model.lm_head.weight;  // (V, C)
  const float* head_bias = config.tie_embeddings ? nullptr : data_or_null(model.lm_head.bias);

  kernels::AttentionDims d;  // one key/value group: its Hg query heads, one new query row
  d.heads = Hg;
  d.q_len = 1;
  d.kv_len = position + 1;
  d.head_dim = D;
  d.value_dim = D;
  d.scale = 1.0 / std::sqrt(static_cast<double>(D));  // as ops::attention: Vaswani et al. 2017, eq. 1
  const kernels::AttentionMask mask{.causal = true};

  // Allocated here, not inside the region, so nothing there can throw.
  const int max_threads = omp_get_max_threads();
  const int64_t private_size = 2 * C + Hg * D + F;
  // From the storage pool: a token's decoding step takes no block from malloc once warm.
  storage_pool::Scratch<float> workspace(max_threads * private_size, 0.0f);  // per thread: x, normed, queries, hidden
  storage_pool::Scratch<float> attn_parts(max_threads * C, 0.0f), mlp_parts(max_threads * C, 0.0f);  // (P, C) each
  storage_pool::Scratch<float> heads(H * D, 0.0f);  // (H D): attention outputs; thread t writes and reads its own heads
  Tensor logits = Tensor::empty({1, 1, V});  // (1, 1, V)
  const float* x0 = x_in.data<float>();      // (C)
  float* out = logits.data<float>();         // (V)

#pragma omp parallel
  {
    const int p = omp_get_num_threads(), t = omp_get_thread_num();
    const Range groups = share(G, t, p, 1), hidden = share(F, t, p, 16), vocab = share(V, t, p, 1);
    const Range head_cols{groups.begin * Hg * D, groups.end * Hg * D};  // this thread's heads in (H D)
    float* x = workspace.data() + t * private_size;  // (C): the residual stream, the same in every thread
    float* normed = x + C;                           // (C)
    float* queries = normed + C;                     // (Hg D)
    float* hid = queries + Hg * D;                   // (F / P): this thread's hidden units
    std::copy(x0, x0 + C, x);

    for (size_t l = 0; l < model.blocks.size(); ++l) {
      const TransformerBlock& block = model.blocks[l];
      const bool pre_norm = block.options.pre_norm;
      // Attention over this thread's key/value groups. W_qkv rows: [queries (H D) | keys (G D) | values (G D)].
      if (pre_norm) layer_norm_row(block.ln_1, x, C, normed);
      const float* in = pre_norm ? normed : x;  // (C)
      const float* w_qkv = block.attn.qkv.weight.data<float>();  // ((H + 2G) D, C)
      const float* b_qkv = data_or_null(block.attn.qkv.bias);
      float* keys = cache.keys(static_cast<int64_t>(l)).data<float>();      // (1, G, L, D)
      float* values = cache.values(static_cast<int64_t>(l)).data<float>();  // (1, G, L, D)
      for (int64_t g = groups.begin; g < groups.end; ++g) {
        const int64_t q_row = g * Hg * D, k_row = H * D + g * D, v_row = (H + G) * D + g * D;
        float* k_new = keys + (g * L + position) * D;    // (D): this position's row of the cache
        float* v_new = values + (g * L + position) * D;  // (D)
        kernels::gemv_fast(Hg * D, C, w_qkv + q_row * C, C, in, offset_or_null(b_qkv, q_row), queries);
        kernels::gemv_fast(D, C, w_qkv + k_row * C, C, in, offset_or_null(b_qkv, k_row), k_new);
        kernels::gemv_fast(D, C, w_qkv + v_row * C, C, in, offset_or_null(b_qkv, v_row), v_new);
        attention_step_fast(d, mask, queries, keys + g * L * D, values + g * L * D, heads.data() + q_row);
      }
      partial_gemv(C, head_cols, block.attn.proj.weight.data<float>(), H * D, heads.data() + head_cols.begin,
                   attn_parts.data() + t * C);
#pragma omp barrier
      add_partials(x, attn_parts.data(), p, data_or_null(block.attn.proj.bias), C);
      if (!pre_norm) layer_norm_row(block.ln_1, x, C, x);

      // MLP over this thread's hidden units.
      if (pre_norm) layer_norm_row(block.ln_2, x, C, normed);
      in = pre_norm ? normed : x;
      const float* w_fc = block.mlp.fc.weight.data<float>();  // (F, C)
      if (hidden.size() > 0) {
        kernels::gemv_fast(hidden.size(), C, w_fc + hidden.begin * C, C, in,
                           offset_or_null(data_or_null(block.mlp.fc.bias), hidden.begin), hid);
        kernels::gelu_forward_fast(block.mlp.gelu, hid, nullptr, 1, hidden.size(), hid);
      }
      partial_gemv(C, hidden, block.mlp.proj.weight.data<float>(), F, hid, mlp_parts.data() + t * C);
#pragma omp barrier
      add_partials(x, mlp_parts.data(), p, data_or_null(block.mlp.proj.bias), C);
      if (!pre_norm) layer_norm_row(block.ln_2, x, C, x);
    }

    // The LM head: this thread's vocabulary rows.
    layer_norm_row(model.ln_f, x, C, normed);
    if (vocab.size() > 0)
      kernels::gemv_fast(vocab.size(), C, head_weight.data<float>() + vocab.begin * C, C, normed,
                         offset_or_null(head_bias, vocab.begin), out + vocab.begin);
  }
  return logits;
}

}  // namespace tf::layers
