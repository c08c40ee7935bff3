// Tiled float32 attention (Dao et al. 2022, FlashAttention, Algorithms 1 and 4): register-tiled
// block products as plain loops, an online softmax per query block, a backward over key blocks.
// B, H, H_kv, T_q, T_k, D, D_v as in kernels/reference/attention.h; Br = query rows of a block,
// Bc = keys of a block.
#include "framework/kernels/cpu/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "framework/error.h"
#include "framework/kernels/cpu/block_product.h"
#include "framework/kernels/cpu/exp.h"
#include "framework/kernels/cpu/softmax.h"
#include "framework/sanitize.h"
#include "framework/storage_pool.h"

namespace tf::kernels {

namespace {

using blocks::block_product;
using blocks::kTileN;
using blocks::Operand;
using blocks::padded;
using blocks::padded_block;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kBlockQ = 64;  // Br
constexpr int64_t kBlockK = 64;  // Bc, a multiple of kTileN
constexpr int64_t kMinTasks = 8; // Note [flash determinism]

// --- Blocks of the inputs -------------------------------------------------------------------------

// The resolved row strides of one operand (FlashLayout): row i of head h of batch entry b starts
// at at(b, h, i).
struct Rows {
  int64_t batch, head, row;
  int64_t at(int64_t b, int64_t h, int64_t i) const { return b * batch + h * head + i * row; }
};

Rows resolve(const RowStrides& s, int64_t heads, int64_t len, int64_t width) {
  if (s.batch == 0 && s.head == 0 && s.row == 0) return {heads * len * width, len * width, width};  // contiguous
  return {s.batch, s.head, s.row};
}

bool contiguous(const FlashLayout& l) {
  for (const RowStrides& s : {l.queries, l.keys, l.values, l.out})
    if (s.batch != 0 || s.head != 0 || s.row != 0) return false;
  return true;
}

struct Layout {
  Rows q, k, v, o;  // dQ, dK, dV and dO share them (FlashLayout)
};

Layout resolve(const AttentionDims& d, const FlashLayout& l) {
  return {resolve(l.queries, d.heads, d.q_len, d.head_dim), resolve(l.keys, d.kv_heads, d.kv_len, d.head_dim),
          resolve(l.values, d.kv_heads, d.kv_len, d.value_dim), resolve(l.out, d.heads, d.q_len, d.value_dim)};
}

// dst (cols, Bc) = src (rows, cols)^T, src's rows `ld` apart, with zero columns from rows to Bc:
// K^T or V^T of a key block.
void transpose_block(const float* src, int64_t rows, int64_t cols, int64_t ld, float* dst) {
  for (int64_t c = 0; c < cols; ++c) {
    float* out = dst + c * kBlockK;
    for (int64_t r = 0; r < rows; ++r) out[r] = src[r * ld + c];
    for (int64_t r = rows; r < kBlockK; ++r) out[r] = 0;
  }
}

// The union over rows i0 <= i < i1 of their visible runs [key_begin(i), key_end(i)); empty when
// lo >= hi. Key blocks outside it are skipped for the whole query block.
struct Run {
  int64_t lo, hi;
  bool meets(int64_t j0, int64_t j1) const { return lo < j1 && hi > j0; }
};
Run visible_run(const AttentionDims& d, const AttentionMask& mask, int64_t i0, int64_t i1) {
  Run run{d.kv_len, 0};
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t begin = mask.key_begin(d, i), end = mask.key_end(d, i);
    if (begin < end) run = {std::min(run.lo, begin), std::max(run.hi, end)};
  }
  return run;
}

// Whether batch entry b has a real (unpadded) key among keys [j0, j1).
bool any_key_kept(const AttentionDims& d, const AttentionMask& mask, int64_t b, int64_t j0, int64_t j1) {
  if (!mask.key_keep) return true;
  const uint8_t* keep = mask.key_keep + b * d.kv_len;
  for (int64_t j = j0; j < j1; ++j)
    if (keep[j]) return true;
  return false;
}

// s (nr, Bc) holds raw q.k of rows i0.. of head h and keys j0..j0 + nc: scale the visible ones and
// apply the score modifiers to them, set the rest (outside row i's run, padding, columns past the
// block's last key) to -inf (Notes [attention masks] and [attention variants]).
void mask_scores(const AttentionDims& d, const AttentionMask& mask, const AttentionScores& scores, int64_t b, int64_t h, int64_t i0, int64_t nr,
                 int64_t j0, int64_t nc, float* s) {
  const float scale = static_cast<float>(d.scale);
  const uint8_t* keep = mask.key_keep ? mask.key_keep + b * d.kv_len + j0 : nullptr;  // (nc)
  for (int64_t ii = 0; ii < nr; ++ii) {
    float* row = s + ii * kBlockK;  // (Bc)
    const int64_t begin = std::clamp<int64_t>(mask.key_begin(d, i0 + ii) - j0, 0, nc);
    const int64_t end = std::clamp<int64_t>(mask.key_end(d, i0 + ii) - j0, begin, nc);
    for (int64_t jj = 0; jj < begin; ++jj) row[jj] = kNegInf;
#pragma omp simd
    for (int64_t jj = begin; jj < end; ++jj) row[jj] *= scale;
    scores.modify(d, h, i0 + ii, j0 + begin, end - begin, row + begin);
    mask.mask_sparse(d, i0 + ii, j0 + begin, end - begin, row + begin);
    for (int64_t jj = end; jj < kBlockK; ++jj) row[jj] = kNegInf;
    if (keep)
      for (int64_t jj = begin; jj < end; ++jj) row[jj] = keep[jj] ? row[jj] : kNegInf;
  }
}

// p (nr, Bc) *= the dropout keep factor of P's element ((row0 + ii) T_k + j0 + jj), where p != 0.
void apply_dropout(const AttentionDims& d, int64_t row0, int64_t nr, int64_t j0, int64_t nc, float* p) {
  for (int64_t ii = 0; ii < nr; ++ii)
    for (int64_t jj = 0; jj < nc; ++jj) {
      float& x = p[ii * kBlockK + jj];
      if (x != 0) x *= static_cast<float>(attention_dropout_factor(d, (row0 + ii) * d.kv_len + j0 + jj));
    }
}

// Per-thread scratch that grows to the largest need seen and is then reused.
float* thread_scratch(int64_t n) {
  thread_local std::vector<float> buffer;
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(n);
  return buffer.data();
}

bool degenerate(const AttentionDims& d) {
  return d.batch * d.heads * d.q_len * d.kv_len * d.head_dim * d.value_dim == 0;
}

// Keeps the OpenMP fork out of tiny problems (decoding one token, unit tests).
bool parallel_worth_it(const AttentionDims& d) { return d.batch * d.heads * d.q_len * d.kv_len > 4096; }

int64_t blocks_of(int64_t n, int64_t block) { return (n + block - 1) / block; }

// --- Forward (Algorithm 1) ------------------------------------------------------------------------
// Algorithm 1 loops over key blocks outside and query blocks inside, re-reading and rewriting O;
// we swap the loops (as FlashAttention-2, Dao 2023, does): a task owns one query block, keeps its
// output in a (Br, D_v) accumulator across all key blocks and writes it once, so tasks share nothing.

// One thread's buffers for a query block; sizes in floats.
struct ForwardScratch {
  float *kt, *v, *s, *acc, *m, *l;
  static int64_t floats(const AttentionDims& d) {
    return d.head_dim * kBlockK + (kBlockK + kBlockQ) * padded(d.value_dim) + kBlockQ * kBlockK + 2 * kBlockQ;
  }
  explicit ForwardScratch(const AttentionDims& d) {
    float* p = thread_scratch(floats(d));
    kt = p, p += d.head_dim * kBlockK;               // (D, Bc) K^T of the key block
    v = p, p += kBlockK * padded(d.value_dim);       // (Bc, D_v padded) V of the key block
    s = p, p += kBlockQ * kBlockK;                   // (Br, Bc) scores, then probabilities
    acc = p, p += kBlockQ * padded(d.value_dim);     // (Br, D_v padded) unnormalised output
    m = p, p += kBlockQ;                             // (Br) running row max
    l = p;                                           // (Br) running row sum of exp(s - m)
  }
};

// The score block S = scale Q K^T of rows i0.. against keys j0.., masked: the first steps of both
// the forward and the probabilities sweep.
void score_block(const AttentionDims& d, const AttentionMask& mask, const AttentionScores& scores, const Layout& L,
                 int64_t b, int64_t h, int64_t i0, int64_t nr, const Operand& q_rows, const float* k_head,
                 int64_t j0, int64_t nc, float* kt, float* s) {
  transpose_block(k_head + j0 * L.k.row, nc, d.head_dim, L.k.row, kt);
  block_product<false>(nr, kBlockK, d.head_dim, q_rows.data, q_rows.ld, 1, kt, kBlockK, s, kBlockK);
  mask_scores(d, mask, scores, b, h, i0, nr, j0, nc, s);
}

void forward_query_block(const AttentionDims& d, const AttentionMask& mask, const AttentionScores& scores,
                         const Layout& L, const float* q, const float* k, const float* v, float* out, float* lse,
                         float* probs, int64_t b, int64_t h, int64_t qb) {
  const int64_t i0 = qb * kBlockQ, nr = std::min(kBlockQ, d.q_len - i0);
  const int64_t row0 = (b * d.heads + h) * d.q_len + i0;  // first row of the block in (B, H, T_q)
  const int64_t kvh = h / d.group();
  const float* k_head = k + L.k.at(b, kvh, 0);  // (T_k, D), rows L.k.row apart
  const float* v_head = v + L.v.at(b, kvh, 0);  // (T_k, D_v), rows L.v.row apart
  const int64_t dvp = padded(d.value_dim);
  ForwardScratch w(d);
  const Operand q_rows{q + L.q.at(b, h, i0), L.q.row};  // (nr, D)
  std::fill(w.acc, w.acc + nr * dvp, 0.0f);
  std::fill(w.m, w.m + nr, kNegInf);
  std::fill(w.l, w.l + nr, 0.0f);

  const Run run = visible_run(d, mask, i0, i0 + nr);
  for (int64_t j0 = run.lo / kBlockK * kBlockK; j0 < run.hi; j0 += kBlockK) {
    const int64_t nc = std::min(kBlockK, d.kv_len - j0);
    if (!any_key_kept(d, mask, b, j0, j0 + nc) || !mask.block_allowed(d, i0, i0 + nr, j0, j0 + nc)) continue;
    score_block(d, mask, scores, L, b, h, i0, nr, q_rows, k_head, j0, nc, w.kt, w.s);
    // Online softmax (Algorithm 1's running m and l): m_new = max(m, rowmax S), P = exp(S - m_new),
    // l = exp(m - m_new) l + rowsum P, and the accumulator is rescaled by the same exp(m - m_new).
    for (int64_t ii = 0; ii < nr; ++ii) {
      float* p = w.s + ii * kBlockK;  // (Bc)
      const float block_max = row_max(p, kBlockK);  // NaN when the block's row holds only NaN
      const float m_new = block_max != block_max ? block_max : std::max(w.m[ii], block_max);
      if (m_new == kNegInf) {  // nothing visible in this row yet
        std::fill(p, p + kBlockK, 0.0f);
        continue;
      }
      const float alpha = exp_fast(w.m[ii] - m_new);  // 0 at the row's first visible block
      w.l[ii] = alpha * w.l[ii] + exp_shifted(p, m_new, kBlockK, p);
      w.m[ii] = m_new;
      if (alpha != 1.0f) {
        float* o = w.acc + ii * dvp;
#pragma omp simd
        for (int64_t c = 0; c < dvp; ++c) o[c] *= alpha;
      }
    }
    if (d.dropout > 0) apply_dropout(d, row0, nr, j0, nc, w.s);  // l keeps the undropped sum
    const Operand v_block = padded_block(v_head + j0 * L.v.row, nc, d.value_dim, L.v.row, w.v);  // (nc, D_v padded)
    block_product<true>(nr, dvp, nc, w.s, kBlockK, 1, v_block.data, v_block.ld, w.acc, dvp);  // acc += P V
  }

  for (int64_t ii = 0; ii < nr; ++ii) {
    float* o = out + L.o.at(b, h, i0 + ii);  // (D_v)
    if (w.m[ii] == kNegInf) {  // no visible key: output 0, lse -inf (Note [attention masks])
      std::fill(o, o + d.value_dim, 0.0f);
      lse[row0 + ii] = kNegInf;
      continue;
    }
    const float inv = 1.0f / w.l[ii];
    for (int64_t c = 0; c < d.value_dim; ++c) o[c] = w.acc[ii * dvp + c] * inv;
    lse[row0 + ii] = w.m[ii] + std::log(w.l[ii]);
  }

  if (!probs) return;
  // The caller asked for P itself: a second sweep writes exp(S - lse) over the visible blocks.
  std::fill(probs + row0 * d.kv_len, probs + (row0 + nr) * d.kv_len, 0.0f);
  for (int64_t j0 = run.lo / kBlockK * kBlockK; j0 < run.hi; j0 += kBlockK) {
    const int64_t nc = std::min(kBlockK, d.kv_len - j0);
    if (!any_key_kept(d, mask, b, j0, j0 + nc) || !mask.block_allowed(d, i0, i0 + nr, j0, j0 + nc)) continue;
    score_block(d, mask, scores, L, b, h, i0, nr, q_rows, k_head, j0, nc, w.kt, w.s);
    for (int64_t ii = 0; ii < nr; ++ii)
      if (lse[row0 + ii] != kNegInf) exp_shifted(w.s + ii * kBlockK, lse[row0 + ii], nc, probs + (row0 + ii) * d.kv_len + j0);
  }
}

// --- Backward (Algorithm 4) -----------------------------------------------------------------------

// Note [flash determinism]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// dK and dV of a key block sum over every query block (and every query head of its group) that
// sees it; dQ of a query block sums over every key block. Tasks own key blocks: a task computes
// the dK, dV rows of its key blocks completely, in a fixed order, and writes them, so nothing is
// shared. dQ rows are shared between the tasks of one (batch, kv head) pair; when there are at
// least kMinTasks pairs, one task per pair owns all its key blocks and adds into dQ directly.
// With fewer pairs (B = 1, few heads: the long-sequence case) each pair's key blocks are split into
// `chunks` tasks, each adding into its own copy of dQ, summed in chunk order at the end. Chunks and
// block orders depend on the dims only, never on the thread count or on which thread runs a task,
// so results are bit-identical run to run and across thread counts. Key block kb goes to chunk
// kb % chunks on even rounds and chunks - 1 - kb % chunks on odd rounds, so that under a causal
// mask (key block kb is seen by the n_q - kb query blocks after it) the chunks' work is balanced.
int64_t dq_chunks(const AttentionDims& d) {
  const int64_t pairs = d.batch * d.kv_heads;
  if (pairs >= kMinTasks) return 1;
  return std::min(blocks_of(d.kv_len, kBlockK), (kMinTasks + pairs - 1) / pairs);
}

int64_t chunk_of(int64_t kb, int64_t chunks) {
  const int64_t pos = kb % chunks;
  return (kb / chunks) % 2 == 0 ? pos : chunks - 1 - pos;
}

// One thread's buffers for a key block; sizes in floats.
struct BackwardScratch {
  float *kt, *vt, *k, *dk, *dv, *p, *pd, *ds, *q, *dout, *dq;
  static int64_t floats(const AttentionDims& d) {
    const int64_t dp = padded(d.head_dim), dvp = padded(d.value_dim);
    return (d.head_dim + d.value_dim) * kBlockK + kBlockK * (2 * dp + dvp) + 3 * kBlockQ * kBlockK +
           kBlockQ * (2 * dp + dvp);
  }
  explicit BackwardScratch(const AttentionDims& d) {
    const int64_t dp = padded(d.head_dim), dvp = padded(d.value_dim);
    float* x = thread_scratch(floats(d));
    kt = x, x += d.head_dim * kBlockK;   // (D, Bc) K^T of the key block
    vt = x, x += d.value_dim * kBlockK;  // (D_v, Bc) V^T of the key block
    k = x, x += kBlockK * dp;            // (Bc, D padded) K of the key block, when D needs padding
    dk = x, x += kBlockK * dp;           // (Bc, D padded) dK of the key block
    dv = x, x += kBlockK * dvp;          // (Bc, D_v padded) dV of the key block
    p = x, x += kBlockQ * kBlockK;       // (Br, Bc) scores, then P
    pd = x, x += kBlockQ * kBlockK;      // (Br, Bc) dropout(P), when dropout > 0
    ds = x, x += kBlockQ * kBlockK;      // (Br, Bc) dP, then scale dS
    q = x, x += kBlockQ * dp;            // (Br, D padded) Q rows, when D needs padding
    dout = x, x += kBlockQ * dvp;        // (Br, D_v padded) dO rows, when D_v needs padding
    dq = x;                              // (Br, D padded) this key block's share of dQ
  }
};

struct BackwardArgs {
  Layout layout;
  const float *q, *k, *v, *dout, *lse, *delta;
  float *dk, *dv;
  const Run* query_runs;  // (n_q) visible run of each query block
};

// The score modifiers' backward (Note [attention variants]) for rows i0 .. i0 + nr - 1 of head h
// against keys j0 .. j0 + nc - 1: ds (nr, Bc), scale dS' of the modified scores, becomes scale dS of
// the scaled scores, from the block's P (nr, Bc) and the rows' lse; learned modifiers add their
// gradient into dtable (the calling task's own copy).
void modifiers_backward(const AttentionDims& d, const AttentionMask& mask, const AttentionScores& scores, int64_t h,
                        int64_t i0, int64_t nr, int64_t j0, int64_t nc, const float* p, const float* lse, float* ds,
                        float* dtable) {
  const float inv_scale = static_cast<float>(1.0 / d.scale);
  for (int64_t ii = 0; ii < nr; ++ii) {
    const int64_t begin = std::clamp<int64_t>(mask.key_begin(d, i0 + ii) - j0, 0, nc);
    const int64_t end = std::clamp<int64_t>(mask.key_end(d, i0 + ii) - j0, begin, nc);
    if (lse[ii] == kNegInf) continue;  // the row sees nothing: dS is 0
    scores.backward(d, h, i0 + ii, j0 + begin, end - begin, p + ii * kBlockK + begin, lse[ii],
                    ds + ii * kBlockK + begin, inv_scale, dtable);
  }
}

// dK, dV of key block [j0, j0 + nc) of kv head kvh of batch entry b, and its share of dQ, added
// into dq (B, H, T_q, D) laid out as dq_rows says.
void backward_key_block(const AttentionDims& d, const AttentionMask& mask, const AttentionScores& scores,
                        const BackwardArgs& a, int64_t b, int64_t kvh, int64_t j0, float* dq, const Rows& dq_rows_at,
                        float* drelative_bias) {
  const Layout& L = a.layout;
  const int64_t nc = std::min(kBlockK, d.kv_len - j0), dp = padded(d.head_dim), dvp = padded(d.value_dim);
  const float* k_block = a.k + L.k.at(b, kvh, j0);  // (nc, D), rows L.k.row apart
  const float* v_block = a.v + L.v.at(b, kvh, j0);  // (nc, D_v), rows L.v.row apart
  BackwardScratch w(d);
  std::fill(w.dk, w.dk + nc * dp, 0.0f);
  std::fill(w.dv, w.dv + nc * dvp, 0.0f);
  if (any_key_kept(d, mask, b, j0, j0 + nc)) {
    transpose_block(k_block, nc, d.head_dim, L.k.row, w.kt);
    transpose_block(v_block, nc, d.value_dim, L.v.row, w.vt);
    const Operand k_padded = padded_block(k_block, nc, d.head_dim, L.k.row, w.k);  // (nc, D padded)
    const float scale = static_cast<float>(d.scale);
    for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h) {
      for (int64_t i0 = 0, qb = 0; i0 < d.q_len; i0 += kBlockQ, ++qb) {
        const int64_t nr = std::min(kBlockQ, d.q_len - i0), row0 = (b * d.heads + h) * d.q_len + i0;
        if (!a.query_runs[qb].meets(j0, j0 + nc) || !mask.block_allowed(d, i0, i0 + nr, j0, j0 + nc)) continue;
        const Operand q_rows = padded_block(a.q + L.q.at(b, h, i0), nr, d.head_dim, L.q.row, w.q);  // (nr, D)
        const Operand dout_rows = padded_block(a.dout + L.o.at(b, h, i0), nr, d.value_dim, L.o.row, w.dout);  // (nr, D_v)
        // P = exp(S - lse), recomputed from the saved lse; rows with lse = -inf see nothing.
        block_product<false>(nr, kBlockK, d.head_dim, q_rows.data, q_rows.ld, 1, w.kt, kBlockK, w.p, kBlockK);
        mask_scores(d, mask, scores, b, h, i0, nr, j0, nc, w.p);
        for (int64_t ii = 0; ii < nr; ++ii) {
          float* p = w.p + ii * kBlockK;  // (Bc)
          const float l = a.lse[row0 + ii];
          if (l == kNegInf) std::fill(p, p + kBlockK, 0.0f);
          else exp_shifted(p, l, kBlockK, p);
        }
        const float* pd = w.p;  // dropout(P)
        if (d.dropout > 0) {
          std::copy(w.p, w.p + nr * kBlockK, w.pd);
          apply_dropout(d, row0, nr, j0, nc, w.pd);
          pd = w.pd;
        }
        // dV += dropout(P)^T dO: A = P^T read through swapped strides.
        block_product<true>(nc, dvp, nr, pd, 1, kBlockK, dout_rows.data, dout_rows.ld, w.dv, dvp);
        // dP = dO V^T; with dropout dP_ij picks up P's keep factor, so that
        // dS = P (keep dP - delta) = dropout(P) dP - P delta, times the scale.
        block_product<false>(nr, kBlockK, d.value_dim, dout_rows.data, dout_rows.ld, 1, w.vt, kBlockK, w.ds, kBlockK);
        for (int64_t ii = 0; ii < nr; ++ii) {
          const float* p = w.p + ii * kBlockK;   // (Bc)
          const float* pk = pd + ii * kBlockK;   // (Bc)
          float* ds = w.ds + ii * kBlockK;       // (Bc)
          const float delta = a.delta[row0 + ii];
#pragma omp simd
          for (int64_t jj = 0; jj < kBlockK; ++jj) ds[jj] = scale * (pk[jj] * ds[jj] - p[jj] * delta);
        }
        modifiers_backward(d, mask, scores, h, i0, nr, j0, nc, w.p, a.lse + row0, w.ds, drelative_bias);
        // dK += scale dS^T Q and dQ += scale dS K.
        block_product<true>(nc, dp, nr, w.ds, 1, kBlockK, q_rows.data, q_rows.ld, w.dk, dp);
        float* dq_rows = dq + dq_rows_at.at(b, h, i0);  // (nr, D), rows dq_rows_at.row apart
        if (dp == d.head_dim) {
          block_product<true>(nr, dp, nc, w.ds, kBlockK, 1, k_padded.data, k_padded.ld, dq_rows, dq_rows_at.row);
        } else {  // through a padded block
          block_product<false>(nr, dp, nc, w.ds, kBlockK, 1, k_padded.data, k_padded.ld, w.dq, dp);
          for (int64_t ii = 0; ii < nr; ++ii)
#pragma omp simd
            for (int64_t c = 0; c < d.head_dim; ++c) dq_rows[ii * dq_rows_at.row + c] += w.dq[ii * dp + c];
        }
      }
    }
  }
  float* dk_rows = a.dk + L.k.at(b, kvh, j0);  // (nc, D), rows L.k.row apart
  float* dv_rows = a.dv + L.v.at(b, kvh, j0);  // (nc, D_v), rows L.v.row apart
  for (int64_t jj = 0; jj < nc; ++jj) {
    std::copy(w.dk + jj * dp, w.dk + jj * dp + d.head_dim, dk_rows + jj * L.k.row);
    std::copy(w.dv + jj * dvp, w.dv + jj * dvp + d.value_dim, dv_rows + jj * L.v.row);
  }
}

}  // namespace

void flash_attention_forward(const AttentionForwardArgs<float>& a, const FlashLayout& layout) {
  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  const float *q = a.queries, *k = a.keys, *v = a.values;
  float *out = a.out, *lse = a.lse, *probs = a.probs;
  if (degenerate(d)) {
    TF_CHECK(contiguous(layout), "flash_attention_forward: empty dims take the reference kernel, which needs "
             "contiguous operands");
    return attention_forward_reference(a);
  }
  const Layout L = resolve(d, layout);
  const int64_t n_q = blocks_of(d.q_len, kBlockQ), heads = d.batch * d.heads;
  // Tasks (b, h, query block), the last query blocks first: under a causal mask they see the most
  // keys, and dynamic scheduling then fills in with the cheap ones.
#pragma omp parallel for schedule(dynamic, 1) if (parallel_worth_it(d))
  for (int64_t t = 0; t < n_q * heads; ++t) {
    const int64_t qb = n_q - 1 - t / heads, bh = t % heads;
    forward_query_block(d, mask, a.scores, L, q, k, v, out, lse, probs, bh / d.heads, bh % d.heads, qb);
  }
}

void flash_attention_backward(const AttentionBackwardArgs<float>& a, const FlashLayout& layout) {
  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  const float *q = a.queries, *k = a.keys, *v = a.values, *out = a.out, *lse = a.lse, *dout = a.dout;
  float *dq = a.dqueries, *dk = a.dkeys, *dv = a.dvalues;
  if (degenerate(d)) {
    TF_CHECK(contiguous(layout), "flash_attention_backward: empty dims take the reference kernel, which needs "
             "contiguous operands");
    return attention_backward_reference(a);
  }
  const Layout L = resolve(d, layout);
  const int64_t rows = d.batch * d.heads * d.q_len, q_size = rows * d.head_dim;
  const bool parallel = parallel_worth_it(d);
  // (B, H, T_q) delta = rowsum(dO * O): Algorithm 4 forms it per block inside its loops; like
  // FlashAttention-2 (Dao 2023) we form it once.
  storage_pool::Scratch<float> delta(rows);  // pooled: a warm step makes no heap allocation
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
  for (int64_t bh = 0; bh < d.batch * d.heads; ++bh)
    for (int64_t i = 0; i < d.q_len; ++i) {
      const float* o = out + L.o.at(bh / d.heads, bh % d.heads, i);   // (D_v)
      const float* g = dout + L.o.at(bh / d.heads, bh % d.heads, i);  // (D_v)
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t c = 0; c < d.value_dim; ++c) sum += g[c] * o[c];
      delta[bh * d.q_len + i] = sum;
    }
  storage_pool::Scratch<Run> query_runs(blocks_of(d.q_len, kBlockQ));  // (n_q)
  for (int64_t i0 = 0; i0 < d.q_len; i0 += kBlockQ)
    query_runs[i0 / kBlockQ] = visible_run(d, mask, i0, std::min(i0 + kBlockQ, d.q_len));

  // Note [flash determinism]: chunk 0 adds into dq, chunk c > 0 into dq_parts[c - 1] (contiguous).
  const int64_t chunks = dq_chunks(d), n_k = blocks_of(d.kv_len, kBlockK);
  storage_pool::Scratch<float> dq_parts((chunks - 1) * q_size, 0.0f);  // (chunks - 1, B, H, T_q, D)
  const Rows part_rows = resolve(RowStrides{}, d.heads, d.q_len, d.head_dim);
  const BackwardArgs args{L, q, k, v, dout, lse, delta.data(), dk, dv, query_runs.data()};
  // T5 bias: each task sums into its own copy of the table's gradient, added in task order after
  // (Note [flash determinism]).
  const int64_t tasks = d.batch * d.kv_heads * chunks;
  const int64_t table_size = a.drelative_bias ? (a.scores.model_heads > 0 ? a.scores.model_heads : d.heads) *
                                                    a.scores.relative_buckets
                                              : 0;
  storage_pool::Scratch<float> bias_parts(tasks * table_size, 0.0f);  // (tasks, heads, buckets)
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t chunk = t % chunks, pair = t / chunks;
    float* dq_sum = chunk == 0 ? dq : dq_parts.data() + (chunk - 1) * q_size;
    const Rows& dq_sum_rows = chunk == 0 ? L.q : part_rows;
    float* dbias = table_size ? bias_parts.data() + t * table_size : nullptr;
    const int64_t b = pair / d.kv_heads, kvh = pair % d.kv_heads;
    if (chunk == 0)  // the only task that writes these rows of dq: it zeroes them first
      for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h)
        for (int64_t i = 0; i < d.q_len; ++i) std::fill_n(dq + L.q.at(b, h, i), d.head_dim, 0.0f);
    for (int64_t kb = 0; kb < n_k; ++kb)
      if (chunk_of(kb, chunks) == chunk)
        backward_key_block(d, mask, a.scores, args, b, kvh, kb * kBlockK, dq_sum,
                           dq_sum_rows, dbias);
  }
  for (int64_t t = 0; t < tasks && table_size; ++t)
    for (int64_t e = 0; e < table_size; ++e) a.drelative_bias[e] += bias_parts[t * table_size + e];
  if (chunks > 1) {
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
    for (int64_t bh = 0; bh < d.batch * d.heads; ++bh)
      for (int64_t i = 0; i < d.q_len; ++i) {
        float* dq_row = dq + L.q.at(bh / d.heads, bh % d.heads, i);  // (D)
        const int64_t r = bh * d.q_len + i;
        for (int64_t c = 0; c + 1 < chunks; ++c)
          for (int64_t e = 0; e < d.head_dim; ++e) dq_row[e] += dq_parts[c * q_size + r * d.head_dim + e];
      }
  }
}

int64_t flash_attention_scratch_bytes(const AttentionDims& d, int threads, bool backward) {
  if (!backward) return threads * ForwardScratch::floats(d) * static_cast<int64_t>(sizeof(float));
  const int64_t rows = d.batch * d.heads * d.q_len;
  const int64_t floats = threads * BackwardScratch::floats(d) + rows + (dq_chunks(d) - 1) * rows * d.head_dim;
  return floats * static_cast<int64_t>(sizeof(float));
}

bool flash_attention_preferred(const AttentionDims& d, const AttentionMask& mask) {
  enum class Choice { automatic, flash, naive };
  static const Choice choice = [] {
    const char* env = std::getenv("TAPEFORMER_ATTENTION");
    const std::string value = env ? env : "";
    if (value.empty() || value == "auto") return Choice::automatic;
    if (value == "flash") return Choice::flash;
    TF_CHECK_INPUT(value == "naive", "TAPEFORMER_ATTENTION must be naive, flash or auto, got '", value, "'");
    return Choice::naive;
  }();
  if (choice != Choice::automatic) return choice == Choice::flash;
  // Measured with bench/attention.cpp (forward + backward, one thread, process CPU time, ratio =
  // materialised time / flash time, > 1: flash faster): at the recipes' shapes B=16 H=4 T=128 D=32
  // causal 1.60 (non-causal, BERT: 1.33), B=8 H=6 T=256 D=64 causal 1.64, tiny B=4 H=2 T=32 D=16
  // 1.10; with attention dropout 0.1, 2.27 and 1.33. Long causal sequences, B=1 H=4 D=32: 3.1 at
  // T = 2048 and 3.5 at T = 8192, where the materialised kernel's workspace is 128 MiB and 2 GiB in
  // backward against flash's 1 and 4 MiB. The materialised kernel wins where its large oneDNN
  // matmuls beat our block products and there is no triangle to skip: non-causal D = 128 (0.87 at
  // B=8 H=2 T=128), and few query rows, as in a decoding step (T_q = 1: 0.53; T_q = 8: 0.8;
  // T_q = 16: 1.0-1.2).
  const int64_t workspace = d.batch * d.heads * d.q_len * d.kv_len * static_cast<int64_t>(sizeof(float));
  if (workspace >= (int64_t{64} << 20)) return true;  // memory first: S alone would take >= 64 MiB
  if (d.q_len < 16) return false;
  // A sliding window leaves a band of the score matrix: flash skips the blocks outside it.
  return mask.causal || mask.window > 0 || d.head_dim <= 64;
}

}  // namespace tf::kernels
