// Ring attention: scaled dot-product attention over a sequence split across the ranks of an MPI
// run, each rank holding T / N of the queries, keys and values (Liu, Zaharia and Abbeel 2023,
// "Ring Attention with Blockwise Transformers for Near-Infinite Context").
//
// B = batch, H = query heads, H_kv = key/value heads, T = the whole sequence, T_l = T / N the
// positions one rank holds, C = a chunk's length, D = head size, N = ranks.
//
//   RingAttentionOptions o{.causal = true, .layout = RingLayout::zigzag};
//   Tensor out = ops::ring_attention(q, k, v, o, dist::Comm::world());   // q (B, H, T_l, D)
//
// Note [ring attention]
// ~~~~~~~~~~~~~~~~~~~~~
// Forward: N steps. At step s rank r holds the key/value block of rank (r - s) mod N; it starts
// sending that block on to rank r + 1 and receiving the next one from rank r - 1 (non-blocking),
// computes its queries against the block it holds, and waits. Each block's result is an output O_b
// and a log-sum-exp lse_b per query (the flash kernel's, kernels/cpu/flash_attention.h); blocks
// merge exactly, in any order, by the online softmax (Milakov and Gimelshein 2018):
//   lse = log(exp(lse_a) + exp(lse_b)),  O = exp(lse_a - lse) O_a + exp(lse_b - lse) O_b.
// Only the final O and lse are kept for backward, with this rank's own K and V.
// Backward (the paper's section 3 and its appendix code): the blocks go round again, each with its
// dK and dV accumulators. For the block it holds, a rank computes P = exp(S - lse) with the final
// lse, so P is the block's part of the true softmax, and the per-block backward of FlashAttention
// (Dao et al. 2022, Algorithm 4; delta = rowsum(dO * O) from the final O) gives dQ (kept), and dK,
// dV (added to the travelling accumulators). After N steps the accumulators have visited every
// rank and one more hop brings them home.
//
// Layouts: the sequence is cut into chunks of C positions. contiguous: N chunks, rank r holds
// chunk r. zigzag: 2N chunks, rank r holds chunks r and 2N - 1 - r (as in Brandon et al. 2023,
// "Striped Attention", and the zig-zag of ring-flash-attention): under a causal mask a pair (query
// chunk, key chunk) is fully visible, diagonal (causal inside) or empty, and with contiguous chunks
// the last rank has N times the work of the first, while each zigzag rank pairs an early chunk with
// a late one and all ranks do the same work (ring_visible_pairs counts it).
//
// Every rank must call the op (and its backward) together, like any collective. With one rank it
// is ops::attention.
#pragma once
#include <cstdint>
#include <vector>

#include "framework/dist/comm.h"
#include "framework/kernels/reference/attention_variant.h"
#include "framework/tensor.h"

namespace tf::ops {

enum class RingLayout { contiguous, zigzag };

struct RingAttentionOptions {
  bool causal = false;
  RingLayout layout = RingLayout::zigzag;
  double scale = 0;  // 0 means 1 / sqrt(D)
  // The options of Note [variant options] whose row says `ring`: each chunk pair runs the kernels
  // with the pair's distance as AttentionDims::query_offset, so windows and position-dependent
  // scores see true positions. The others are refused.
  kernels::AttentionVariant variant = {};
};

// Chunks per rank: 1 (contiguous) or 2 (zigzag); the global chunk index of local chunk c of `rank`.
int64_t ring_chunks_per_rank(RingLayout layout);
int64_t ring_chunk_of(RingLayout layout, int rank, int ranks, int64_t local_chunk);
// The global position of each of this rank's T_l = T / N rows, in order: the rows of a sequence a
// rank must hold (T must be a multiple of N times ring_chunks_per_rank).
std::vector<int64_t> ring_positions(RingLayout layout, int rank, int ranks, int64_t seq_len);
// (query, key) pairs whose scores `rank` computes for one head of one sequence: its share of the work.
int64_t ring_visible_pairs(RingLayout layout, bool causal, int rank, int ranks, int64_t seq_len);

// Where this process's ring attention time went, since the start (bench/ring_attention.cpp reads it
// on every rank to show the load balance): kernel time, and time blocked waiting for a block or the
// accumulators to arrive.
struct RingAttentionStats {
  double compute_seconds = 0, wait_seconds = 0;
  int64_t bytes_sent = 0;
};
RingAttentionStats& ring_attention_stats();

// q (B, H, T_l, D), k (B, H_kv, T_l, D), v (B, H_kv, T_l, D_v): this rank's rows (ring_positions).
// Returns this rank's rows of attention(Q, K, V) over the whole sequence, (B, H, T_l, D_v).
Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, const RingAttentionOptions& options,
                      dist::Comm& comm);

}  // namespace tf::ops
