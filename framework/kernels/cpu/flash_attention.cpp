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
#include "framework/kernels/cpu/exp.h"
#include "framework/kernels/cpu/softmax.h"
#include "framework/sanitize.h"
#include "framework/storage_pool.h"

namespace tf::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kBlockQ = 64;  // Br
constexpr int64_t kBlockK = 64;  // Bc, a multiple of kTileN
constexpr int64_t kTileN = 16;   // columns of a register tile: two AVX2 vectors
constexpr int64_t kTileM = 6;    // rows of a register tile: 12 accumulators + 2 loads of B + 1 broadcast <= 16 ymm
constexpr int64_t kMinTasks = 8; // Note [flash determinism]

int64_t padded(int64_t n) { return (n + kTileN - 1) / kTileN * kTileN; }

// Note [block products]
// ~~~~~~~~~~~~~~~~~~~~~
// C (m, n) = A (m, k) B (k, n), or C += A B when Accumulate. A is read through two strides,
// a(i, p) = a[i a_row + p a_col], so a transposed block (P^T, dS^T in backward) costs no copy; B and
// C are row-major with n a multiple of kTileN, B's padding columns zero. A register tile keeps
// kTileM x kTileN sums for the whole k loop and broadcasts one element of A per row against one
// contiguous row of B, so the innermost `omp simd` loop over 16 columns is two FMAs on registers.
// Measured (one thread, process CPU time, 64 x 64 x 32 and 64 x 32 x 64 blocks): 34-42 GFLOP/s,
// against 39-44 for cblas_sgemm on the same blocks, 15-22 for a row-at-a-time axpy loop (C through
// memory) and 8-11 for dot products over D (a horizontal sum per score).
template <int R, bool Accumulate>
TF_UNINSTRUMENTED  // Note [uninstrumented micro-kernels] (framework/sanitize.h)
inline void tile(int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb, float* c,
                 int64_t ldc) {
  float acc[R * kTileN];  // (R, kTileN)
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma omp simd
    for (int j = 0; j < kTileN; ++j) acc[r * kTileN + j] = Accumulate ? c[r * ldc + j] : 0.0f;
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;  // (kTileN)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float ar = a[r * a_row + p * a_col];
#pragma omp simd
      for (int j = 0; j < kTileN; ++j) acc[r * kTileN + j] += ar * bp[j];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma omp simd
    for (int j = 0; j < kTileN; ++j) c[r * ldc + j] = acc[r * kTileN + j];
}

template <int R, bool Accumulate>
void tile_row(int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb,
              float* c, int64_t ldc) {
  for (int64_t j = 0; j < n; j += kTileN) tile<R, Accumulate>(k, a, a_row, a_col, b + j, ldb, c + j, ldc);
}

template <bool Accumulate>
void block_product(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b,
                   int64_t ldb, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // The tiles run uninstrumented (Note [uninstrumented micro-kernels]); the spans they touch:
  // a(i, p) for i < m, p < k; B's rows p < k of n columns; C's rows i < m.
  if (k > 0) {
    check_addressable(a, ((m - 1) * a_row + (k - 1) * a_col + 1) * sizeof(float));
    check_addressable(b, ((k - 1) * ldb + n) * sizeof(float));
  }
  check_addressable(c, ((m - 1) * ldc + n) * sizeof(float));
  int64_t i = 0;
  for (; i + kTileM <= m; i += kTileM)
    tile_row<kTileM, Accumulate>(n, k, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc);
  const float* ai = a + i * a_row;
  float* ci = c + i * ldc;
  switch (m - i) {  // the last m % kTileM rows
    case 1: return tile_row<1, Accumulate>(n, k, ai, a_row, a_col, b, ldb, ci, ldc);
    case 2: return tile_row<2, Accumulate>(n, k, ai, a_row, a_col, b, ldb, ci, ldc);
    case 3: return tile_row<3, Accumulate>(n, k, ai, a_row, a_col, b, ldb, ci, ldc);
    case 4: return tile_row<4, Accumulate>(n, k, ai, a_row, a_col, b, ldb, ci, ldc);
    case 5: return tile_row<5, Accumulate>(n, k, ai, a_row, a_col, b, ldb, ci, ldc);
    default: return;
  }
}

// --- Blocks of the inputs -------------------------------------------------------------------------

// dst (cols, Bc) = src (rows, cols)^T, with zero columns from rows to Bc: K^T or V^T of a key block.
void transpose_block(const float* src, int64_t rows, int64_t cols, float* dst) {
  for (int64_t c = 0; c < cols; ++c) {
    float* out = dst + c * kBlockK;
    for (int64_t r = 0; r < rows; ++r) out[r] = src[r * cols + c];
    for (int64_t r = rows; r < kBlockK; ++r) out[r] = 0;
  }
}

// src (rows, cols) as a B operand of row stride padded(cols): itself when cols is already a
// multiple of kTileN, else a copy into dst with zero padding columns.
const float* padded_block(const float* src, int64_t rows, int64_t cols, float* dst) {
  const int64_t ld = padded(cols);
  if (ld == cols) return src;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * ld, src + r * cols, cols * sizeof(float));
    std::fill(dst + r * ld + cols, dst + (r + 1) * ld, 0.0f);
  }
  return dst;
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
void score_block(const AttentionDims& d, const AttentionMask& mask, const AttentionScores& scores, int64_t b, int64_t h, int64_t i0, int64_t nr,
                 const float* q_rows, const float* k_head, int64_t j0, int64_t nc, float* kt, float* s) {
  transpose_block(k_head + j0 * d.head_dim, nc, d.head_dim, kt);
  block_product<false>(nr, kBlockK, d.head_dim, q_rows, d.head_dim, 1, kt, kBlockK, s, kBlockK);
  mask_scores(d, mask, scores, b, h, i0, nr, j0, nc, s);
}

void forward_query_block(const AttentionDims& d, const AttentionMask& mask, const AttentionScores& scores, const float* q, const float* k,
                         const float* v, float* out, float* lse, float* probs, int64_t b, int64_t h, int64_t qb) {
  const int64_t i0 = qb * kBlockQ, nr = std::min(kBlockQ, d.q_len - i0);
  const int64_t row0 = (b * d.heads + h) * d.q_len + i0;  // first row of the block in (B, H, T_q)
  const int64_t kv = b * d.kv_heads + h / d.group();
  const float* q_rows = q + row0 * d.head_dim;                // (nr, D)
  const float* k_head = k + kv * d.kv_len * d.head_dim;       // (T_k, D)
  const float* v_head = v + kv * d.kv_len * d.value_dim;      // (T_k, D_v)
  const int64_t dvp = padded(d.value_dim);
  ForwardScratch w(d);
  std::fill(w.acc, w.acc + nr * dvp, 0.0f);
  std::fill(w.m, w.m + nr, kNegInf);
  std::fill(w.l, w.l + nr, 0.0f);

  const Run run = visible_run(d, mask, i0, i0 + nr);
  for (int64_t j0 = run.lo / kBlockK * kBlockK; j0 < run.hi; j0 += kBlockK) {
    const int64_t nc = std::min(kBlockK, d.kv_len - j0);
    if (!any_key_kept(d, mask, b, j0, j0 + nc) || !mask.block_allowed(d, i0, i0 + nr, j0, j0 + nc)) continue;
    score_block(d, mask, scores, b, h, i0, nr, q_rows, k_head, j0, nc, w.kt, w.s);
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
    const float* v_block = padded_block(v_head + j0 * d.value_dim, nc, d.value_dim, w.v);  // (nc, D_v padded)
    block_product<true>(nr, dvp, nc, w.s, kBlockK, 1, v_block, dvp, w.acc, dvp);          // acc += P V
  }

  for (int64_t ii = 0; ii < nr; ++ii) {
    float* o = out + (row0 + ii) * d.value_dim;  // (D_v)
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
    score_block(d, mask, scores, b, h, i0, nr, q_rows, k_head, j0, nc, w.kt, w.s);
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
// into dq (B, H, T_q, D).
void backward_key_block(const AttentionDims& d, const AttentionMask& mask, const AttentionScores& scores,
                        const BackwardArgs& a, int64_t b,
                        int64_t kvh, int64_t j0, float* dq, float* drelative_bias) {
  const int64_t nc = std::min(kBlockK, d.kv_len - j0), dp = padded(d.head_dim), dvp = padded(d.value_dim);
  const int64_t kv = b * d.kv_heads + kvh;
  const float* k_block = a.k + (kv * d.kv_len + j0) * d.head_dim;   // (nc, D)
  const float* v_block = a.v + (kv * d.kv_len + j0) * d.value_dim;  // (nc, D_v)
  BackwardScratch w(d);
  std::fill(w.dk, w.dk + nc * dp, 0.0f);
  std::fill(w.dv, w.dv + nc * dvp, 0.0f);
  if (any_key_kept(d, mask, b, j0, j0 + nc)) {
    transpose_block(k_block, nc, d.head_dim, w.kt);
    transpose_block(v_block, nc, d.value_dim, w.vt);
    const float* k_padded = padded_block(k_block, nc, d.head_dim, w.k);  // (nc, D padded)
    const float scale = static_cast<float>(d.scale);
    for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h) {
      for (int64_t i0 = 0, qb = 0; i0 < d.q_len; i0 += kBlockQ, ++qb) {
        const int64_t nr = std::min(kBlockQ, d.q_len - i0), row0 = (b * d.heads + h) * d.q_len + i0;
        if (!a.query_runs[qb].meets(j0, j0 + nc) || !mask.block_allowed(d, i0, i0 + nr, j0, j0 + nc)) continue;
        const float* q_rows = a.q + row0 * d.head_dim;      // (nr, D)
        const float* dout_rows = a.dout + row0 * d.value_dim;  // (nr, D_v)
        // P = exp(S - lse), recomputed from the saved lse; rows with lse = -inf see nothing.
        block_product<false>(nr, kBlockK, d.head_dim, q_rows, d.head_dim, 1, w.kt, kBlockK, w.p, kBlockK);
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
        const float* dout_padded = padded_block(dout_rows, nr, d.value_dim, w.dout);  // (nr, D_v padded)
        block_product<true>(nc, dvp, nr, pd, 1, kBlockK, dout_padded, dvp, w.dv, dvp);
        // dP = dO V^T; with dropout dP_ij picks up P's keep factor, so that
        // dS = P (keep dP - delta) = dropout(P) dP - P delta, times the scale.
        block_product<false>(nr, kBlockK, d.value_dim, dout_rows, d.value_dim, 1, w.vt, kBlockK, w.ds, kBlockK);
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
        const float* q_padded = padded_block(q_rows, nr, d.head_dim, w.q);  // (nr, D padded)
        block_product<true>(nc, dp, nr, w.ds, 1, kBlockK, q_padded, dp, w.dk, dp);
        float* dq_rows = dq + row0 * d.head_dim;  // (nr, D)
        if (dp == d.head_dim) {
          block_product<true>(nr, dp, nc, w.ds, kBlockK, 1, k_padded, dp, dq_rows, dp);
        } else {  // through a padded block
          block_product<false>(nr, dp, nc, w.ds, kBlockK, 1, k_padded, dp, w.dq, dp);
          for (int64_t ii = 0; ii < nr; ++ii)
#pragma omp simd
            for (int64_t c = 0; c < d.head_dim; ++c) dq_rows[ii * d.head_dim + c] += w.dq[ii * dp + c];
        }
      }
    }
  }
  float* dk_rows = a.dk + (kv * d.kv_len + j0) * d.head_dim;   // (nc, D)
  float* dv_rows = a.dv + (kv * d.kv_len + j0) * d.value_dim;  // (nc, D_v)
  for (int64_t jj = 0; jj < nc; ++jj) {
    std::copy(w.dk + jj * dp, w.dk + jj * dp + d.head_dim, dk_rows + jj * d.head_dim);
    std::copy(w.dv + jj * dvp, w.dv + jj * dvp + d.value_dim, dv_rows + jj * d.value_dim);
  }
}

}  // namespace

void flash_attention_forward(const AttentionForwardArgs<float>& a) {
  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  const float *q = a.queries, *k = a.keys, *v = a.values;
  float *out = a.out, *lse = a.lse, *probs = a.probs;
  if (degenerate(d)) return attention_forward_reference(a);
  const int64_t n_q = blocks_of(d.q_len, kBlockQ), heads = d.batch * d.heads;
  // Tasks (b, h, query block), the last query blocks first: under a causal mask they see the most
  // keys, and dynamic scheduling then fills in with the cheap ones.
#pragma omp parallel for schedule(dynamic, 1) if (parallel_worth_it(d))
  for (int64_t t = 0; t < n_q * heads; ++t) {
    const int64_t qb = n_q - 1 - t / heads, bh = t % heads;
    forward_query_block(d, mask, a.scores, q, k, v, out, lse, probs, bh / d.heads, bh % d.heads, qb);
  }
}

void flash_attention_backward(const AttentionBackwardArgs<float>& a) {
  const AttentionDims& d = a.dims;
  const AttentionMask& mask = a.mask;
  const float *q = a.queries, *k = a.keys, *v = a.values, *out = a.out, *lse = a.lse, *dout = a.dout;
  float *dq = a.dqueries, *dk = a.dkeys, *dv = a.dvalues;
  if (degenerate(d)) return attention_backward_reference(a);
  const int64_t rows = d.batch * d.heads * d.q_len, q_size = rows * d.head_dim;
  const bool parallel = parallel_worth_it(d);
  // (B, H, T_q) delta = rowsum(dO * O): Algorithm 4 forms it per block inside its loops; like
  // FlashAttention-2 (Dao 2023) we form it once.
  storage_pool::Scratch<float> delta(rows);  // pooled: a warm step makes no heap allocation
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    const float* o = out + r * d.value_dim;   // (D_v)
    const float* g = dout + r * d.value_dim;  // (D_v)
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < d.value_dim; ++c) sum += g[c] * o[c];
    delta[r] = sum;
  }
  storage_pool::Scratch<Run> query_runs(blocks_of(d.q_len, kBlockQ));  // (n_q)
  for (int64_t i0 = 0; i0 < d.q_len; i0 += kBlockQ)
    query_runs[i0 / kBlockQ] = visible_run(d, mask, i0, std::min(i0 + kBlockQ, d.q_len));

  // Note [flash determinism]: chunk 0 adds into dq, chunk c > 0 into dq_parts[c - 1].
  const int64_t chunks = dq_chunks(d), n_k = blocks_of(d.kv_len, kBlockK);
  storage_pool::Scratch<float> dq_parts((chunks - 1) * q_size, 0.0f);  // (chunks - 1, B, H, T_q, D)
  std::fill(dq, dq + q_size, 0.0f);
  const BackwardArgs args{q, k, v, dout, lse, delta.data(), dk, dv, query_runs.data()};
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
    float* dbias = table_size ? bias_parts.data() + t * table_size : nullptr;
    for (int64_t kb = 0; kb < n_k; ++kb)
      if (chunk_of(kb, chunks) == chunk)
        backward_key_block(d, mask, a.scores, args, pair / d.kv_heads, pair % d.kv_heads, kb * kBlockK, dq_sum, dbias);
  }
  for (int64_t t = 0; t < tasks && table_size; ++t)
    for (int64_t e = 0; e < table_size; ++e) a.drelative_bias[e] += bias_parts[t * table_size + e];
  if (chunks > 1) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t e = 0; e < q_size; ++e)
      for (int64_t c = 0; c + 1 < chunks; ++c) dq[e] += dq_parts[c * q_size + e];
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
