// Ring attention; see ring_attention.h, Note [ring attention].
#include "framework/ops/ring_attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "framework/autograd/tape.h"
#include "framework/ops/attention.h"

namespace tf::ops {

namespace {

using kernels::AttentionDims;
using kernels::AttentionMask;
using kernels::AttentionScores;

constexpr int kTagBlock = 17, kTagGrads = 18;

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// What a query chunk sees of a key chunk.
enum class Pair { empty, diagonal, full };

Pair pair_kind(bool causal, int64_t query_chunk, int64_t key_chunk) {
  if (!causal || key_chunk < query_chunk) return Pair::full;
  return key_chunk == query_chunk ? Pair::diagonal : Pair::empty;
}

// The shapes of one call: local (B, heads, T_l, width) tensors and their chunk-major copies
// [chunk][B][heads][C][width], in which one chunk of every (batch, head) is contiguous, as the
// kernels want their (B, H, C, D) arguments.
struct Chunking {
  int64_t batch, chunks, chunk_len;
  // local (B, heads, chunks * C, width) <-> chunk-major; to_chunks = false copies back.
  template <class T>
  void copy(const T* local, T* chunked, int64_t heads, int64_t width, bool to_chunks) const {
    const int64_t rows = chunk_len * width;  // one chunk of one (batch, head)
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t bh = 0; bh < batch * heads; ++bh) {
        T* part = chunked + (c * batch * heads + bh) * rows;
        T* whole = const_cast<T*>(local) + (bh * chunks + c) * rows;
        if (to_chunks) std::memcpy(part, whole, static_cast<size_t>(rows) * sizeof(T));
        else std::memcpy(whole, part, static_cast<size_t>(rows) * sizeof(T));
      }
  }
  int64_t chunk_size(int64_t heads, int64_t width) const { return batch * heads * chunk_len * width; }
};

// One rank's part of the ring: its layout, who it sends to and receives from.
struct Ring {
  RingLayout layout;
  int rank, ranks;
  int next() const { return (rank + 1) % ranks; }
  int previous() const { return (rank + ranks - 1) % ranks; }
  int holder_at(int step) const { return (rank - step % ranks + ranks) % ranks; }  // whose block at step s
};

bool any_key_visible(const AttentionDims& d, const AttentionMask& mask) {
  for (int64_t i = 0; i < d.q_len; ++i)
    if (mask.key_begin(d, i) < mask.key_end(d, i)) return true;
  return false;
}

// Merges a block's (out_b, lse_b) into the running (out, lse) of the same rows (the online softmax).
template <class T>
void merge_block(int64_t rows, int64_t width, const T* out_b, const T* lse_b, T* out, T* lse) {
  for (int64_t i = 0; i < rows; ++i) {
    const T a = lse[i], b = lse_b[i];
    if (b == -std::numeric_limits<T>::infinity()) continue;  // the block shows the row nothing
    const T m = std::max(a, b);
    const T merged = m + std::log(std::exp(a - m) + std::exp(b - m));
    const T wa = std::exp(a - merged), wb = std::exp(b - merged);
    for (int64_t e = 0; e < width; ++e) out[i * width + e] = wa * out[i * width + e] + wb * out_b[i * width + e];
    lse[i] = merged;
  }
}

// Element counts of one chunk of each tensor (all (batch, head) rows of it), and of a travelling
// block: every chunk of one rank's K, then every chunk of its V.
struct ChunkSizes {
  int64_t q, o, k, v, lse, block;
  ChunkSizes(const AttentionDims& d, const Chunking& ch)
      : q(ch.chunk_size(d.heads, d.head_dim)), o(ch.chunk_size(d.heads, d.value_dim)),
        k(ch.chunk_size(d.kv_heads, d.head_dim)), v(ch.chunk_size(d.kv_heads, d.value_dim)),
        lse(d.batch * d.heads * d.q_len), block(ch.chunks * (k + v)) {}
};

struct RingAttentionNode : Node {
  // Saved: the inputs and the output as they are (backward packs them into chunks again, so that
  // nothing is stored twice), and the final lse [chunk][B][H][C].
  Tensor queries, keys, values, out, lse_chunks;
  AttentionDims dims;             // of one chunk pair: q_len = kv_len = C
  Chunking chunking;
  Ring ring;
  bool causal;
  kernels::AttentionVariant variant;
  dist::Comm* comm;
  const char* op_name() const override { return "ring_attention"; }
  void backward() override;

  // The N steps of Note [ring attention]: `held` starts as this rank's block; at each step the next
  // block is received into `arriving` while compute(qi, kj, dims, mask) runs for every pair of a
  // local query chunk qi and a chunk kj of the block held in which some query sees some key; then
  // after_step() (the accumulators' hop). A pair's dims place its query chunk after its key chunk by
  // their distance in positions, so the variant's mask and score modifiers see true positions.
  template <class T, class Compute, class AfterStep>
  void ring_steps(Tensor& held, Tensor& arriving, Compute&& compute, AfterStep&& after_step) {
    const int64_t block = ChunkSizes(dims, chunking).block;
    for (int step = 0; step < ring.ranks; ++step) {
      dist::Request receive, send;
      if (step + 1 < ring.ranks) {  // the next block travels while this one is computed
        receive = comm->irecv(arriving.data<T>(), block, ring.previous(), kTagBlock);
        send = comm->isend(held.data<T>(), block, ring.next(), kTagBlock);
      }
      const int holder = ring.holder_at(step);
      const auto start = Clock::now();
      for (int64_t qi = 0; qi < chunking.chunks; ++qi)
        for (int64_t kj = 0; kj < chunking.chunks; ++kj) {
          const int64_t query_chunk = ring_chunk_of(ring.layout, ring.rank, ring.ranks, qi);
          const int64_t key_chunk = ring_chunk_of(ring.layout, holder, ring.ranks, kj);
          if (pair_kind(causal, query_chunk, key_chunk) == Pair::empty) continue;
          AttentionDims pair = dims;
          pair.query_offset = (query_chunk - key_chunk) * dims.q_len;
          const AttentionMask mask = AttentionMask::of(variant, causal);
          if (!any_key_visible(pair, mask)) continue;  // e.g. a key chunk wholly outside the window
          compute(qi, kj, pair, mask);
        }
      const auto computed = Clock::now();
      receive.wait();
      send.wait();
      std::swap(held, arriving);
      after_step();
      RingAttentionStats& stats = ring_attention_stats();
      stats.compute_seconds += seconds(start, computed);
      stats.wait_seconds += seconds(computed, Clock::now());
      stats.bytes_sent += step + 1 < ring.ranks ? block * static_cast<int64_t>(dtype_size(held.dtype())) : 0;
    }
  }
};

// This rank's block: its K chunks, then its V chunks, chunk-major.
template <class T>
Tensor pack_block(const Tensor& k, const Tensor& v, const AttentionDims& d, const Chunking& ch) {
  Tensor block = Tensor::empty({ChunkSizes(d, ch).block}, k.dtype());
  ch.copy(k.data<T>(), block.data<T>(), d.kv_heads, d.head_dim, true);
  ch.copy(v.data<T>(), block.data<T>() + ch.chunks * ChunkSizes(d, ch).k, d.kv_heads, d.value_dim, true);
  return block;
}

// x (B, heads, T_l, width) chunk-major.
template <class T>
Tensor pack(const Tensor& x, int64_t heads, int64_t width, const Chunking& ch) {
  Tensor chunks = Tensor::empty({x.numel()}, x.dtype());
  ch.copy(x.data<T>(), chunks.data<T>(), heads, width, true);
  return chunks;
}

template <class T>
void ring_forward(const Tensor& q, const Tensor& k, const Tensor& v, RingAttentionNode& n, Tensor& out) {
  const AttentionDims& d = n.dims;
  const Chunking& ch = n.chunking;
  const ChunkSizes size(d, ch);
  const Tensor q_chunks = pack<T>(q, d.heads, d.head_dim, ch);
  const T* qc = q_chunks.data<T>();
  Tensor o_chunks = Tensor::zeros({ch.chunks * size.o}, q.dtype());
  T* o = o_chunks.data<T>();
  T* lse = n.lse_chunks.data<T>();
  std::fill(lse, lse + ch.chunks * size.lse, -std::numeric_limits<T>::infinity());
  Tensor held = pack_block<T>(k, v, d, ch), arriving = Tensor::empty({size.block}, q.dtype());
  Tensor o_b = Tensor::empty({size.o}, q.dtype()), lse_b = Tensor::empty({size.lse}, q.dtype());
  const AttentionScores scores = AttentionScores::of(n.variant);
  n.ring_steps<T>(
      held, arriving,
      [&](int64_t qi, int64_t kj, const AttentionDims& pair, const AttentionMask& mask) {
        attention_forward_kernel<T>({.dims = pair, .mask = mask, .scores = scores, .queries = qc + qi * size.q,
                                     .keys = held.data<T>() + kj * size.k,
                                     .values = held.data<T>() + ch.chunks * size.k + kj * size.v,
                                     .out = o_b.data<T>(), .lse = lse_b.data<T>()});
        merge_block<T>(size.lse, d.value_dim, o_b.data<T>(), lse_b.data<T>(), o + qi * size.o, lse + qi * size.lse);
      },
      [] {});
  ch.copy(out.data<T>(), o, d.heads, d.value_dim, false);
}

template <class T>
void ring_backward(RingAttentionNode& n, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  const AttentionDims& d = n.dims;
  const Chunking& ch = n.chunking;
  const ChunkSizes size(d, ch);
  const DType dtype = dout.dtype();
  const Tensor dout_chunks = pack<T>(dout, d.heads, d.value_dim, ch);
  const Tensor q_chunks = pack<T>(n.queries, d.heads, d.head_dim, ch), out_chunks = pack<T>(n.out, d.heads, d.value_dim, ch);
  Tensor dq_chunks = Tensor::zeros({ch.chunks * size.q}, dtype);
  // The travelling block and its gradient accumulators [dK chunks][dV chunks], in two messages: the
  // block leaves before its compute, the accumulators after it.
  Tensor held = pack_block<T>(n.keys, n.values, d, ch), arriving = Tensor::empty({size.block}, dtype);
  Tensor grads = Tensor::zeros({size.block}, dtype), grads_arriving = Tensor::empty({size.block}, dtype);
  const AttentionScores scores = AttentionScores::of(n.variant);
  Tensor dq_b = Tensor::empty({size.q}, dtype), dk_b = Tensor::empty({size.k}, dtype),
         dv_b = Tensor::empty({size.v}, dtype);
  auto add = [](T* into, const Tensor& part, int64_t n) {
    for (int64_t e = 0; e < n; ++e) into[e] += part.data<T>()[e];
  };
  n.ring_steps<T>(
      held, arriving,
      [&](int64_t qi, int64_t kj, const AttentionDims& pair, const AttentionMask& mask) {
        attention_backward_kernel<T>(
            {.dims = pair, .mask = mask, .scores = scores, .queries = q_chunks.data<T>() + qi * size.q,
             .keys = held.data<T>() + kj * size.k, .values = held.data<T>() + ch.chunks * size.k + kj * size.v,
             .out = out_chunks.data<T>() + qi * size.o, .lse = n.lse_chunks.data<T>() + qi * size.lse,
             .dout = dout_chunks.data<T>() + qi * size.o, .dqueries = dq_b.data<T>(), .dkeys = dk_b.data<T>(),
             .dvalues = dv_b.data<T>()});
        add(dq_chunks.data<T>() + qi * size.q, dq_b, size.q);
        add(grads.data<T>() + kj * size.k, dk_b, size.k);
        add(grads.data<T>() + ch.chunks * size.k + kj * size.v, dv_b, size.v);
      },
      [&] {  // the accumulators follow their block; after the last step this hop takes them home
        if (n.ring.ranks == 1) return;
        dist::Request grads_in = n.comm->irecv(grads_arriving.data<T>(), size.block, n.ring.previous(), kTagGrads);
        dist::Request grads_out = n.comm->isend(grads.data<T>(), size.block, n.ring.next(), kTagGrads);
        grads_in.wait();
        grads_out.wait();
        std::swap(grads, grads_arriving);
        ring_attention_stats().bytes_sent += size.block * static_cast<int64_t>(sizeof(T));
      });
  ch.copy(dq.data<T>(), dq_chunks.data<T>(), d.heads, d.head_dim, false);
  ch.copy(dk.data<T>(), grads.data<T>(), d.kv_heads, d.head_dim, false);
  ch.copy(dv.data<T>(), grads.data<T>() + ch.chunks * size.k, d.kv_heads, d.value_dim, false);
}

void RingAttentionNode::backward() {
  const Tensor dout = take_output_grad();
  const int64_t local = chunking.chunks * chunking.chunk_len;
  Tensor dq = Tensor::empty({dims.batch, dims.heads, local, dims.head_dim}, dout.dtype());
  Tensor dk = Tensor::empty({dims.batch, dims.kv_heads, local, dims.head_dim}, dout.dtype());
  Tensor dv = Tensor::empty({dims.batch, dims.kv_heads, local, dims.value_dim}, dout.dtype());
  dispatch(dout.dtype(), [&](auto zero) { ring_backward<decltype(zero)>(*this, dout, dq, dk, dv); });
  accumulate_grad(queries, std::move(dq));
  accumulate_grad(keys, std::move(dk));
  accumulate_grad(values, std::move(dv));
}

}  // namespace

RingAttentionStats& ring_attention_stats() {
  static RingAttentionStats stats;
  return stats;
}

int64_t ring_chunks_per_rank(RingLayout layout) { return layout == RingLayout::zigzag ? 2 : 1; }

int64_t ring_chunk_of(RingLayout layout, int rank, int ranks, int64_t local_chunk) {
  if (layout == RingLayout::contiguous) return rank;
  return local_chunk == 0 ? rank : 2 * ranks - 1 - rank;
}

std::vector<int64_t> ring_positions(RingLayout layout, int rank, int ranks, int64_t seq_len) {
  const int64_t chunks = ring_chunks_per_rank(layout);
  TF_CHECK_INPUT(seq_len % (chunks * ranks) == 0, "ring attention: the sequence length ", seq_len,
                 " must be a multiple of ", chunks * ranks, " (", ranks, " ranks",
                 layout == RingLayout::zigzag ? " times 2 chunks each, zigzag" : "", ")");
  const int64_t c = seq_len / (chunks * ranks);
  std::vector<int64_t> positions;
  for (int64_t local = 0; local < chunks; ++local)
    for (int64_t i = 0; i < c; ++i) positions.push_back(ring_chunk_of(layout, rank, ranks, local) * c + i);
  return positions;
}

int64_t ring_visible_pairs(RingLayout layout, bool causal, int rank, int ranks, int64_t seq_len) {
  const int64_t chunks = ring_chunks_per_rank(layout), c = seq_len / (chunks * ranks);
  int64_t pairs = 0;
  for (int holder = 0; holder < ranks; ++holder)
    for (int64_t qi = 0; qi < chunks; ++qi)
      for (int64_t kj = 0; kj < chunks; ++kj) {
        const Pair kind = pair_kind(causal, ring_chunk_of(layout, rank, ranks, qi), ring_chunk_of(layout, holder, ranks, kj));
        pairs += kind == Pair::full ? c * c : kind == Pair::diagonal ? c * (c + 1) / 2 : 0;
      }
  return pairs;
}

Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, const RingAttentionOptions& options,
                      dist::Comm& comm) {
  TF_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4, "ring_attention: q, k and v must be (B, H, T_l, D), got ",
           q.shape(), ", ", k.shape(), ", ", v.shape());
  TF_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), "ring_attention: q, k and v must share a dtype");
  const int64_t local = q.dim(2), chunks = ring_chunks_per_rank(options.layout);
  TF_CHECK(k.dim(0) == q.dim(0) && v.dim(0) == q.dim(0) && k.dim(2) == local && v.dim(2) == local &&
               k.dim(1) == v.dim(1) && q.dim(1) % k.dim(1) == 0 && k.dim(3) == q.dim(3) && local % chunks == 0,
           "ring_attention: shapes q ", q.shape(), ", k ", k.shape(), ", v ", v.shape(), " do not fit (B, H, T_l, D), "
           "(B, H_kv, T_l, D), (B, H_kv, T_l, D_v) with H a multiple of H_kv and T_l a multiple of ", chunks);
  const std::vector<std::string> refused = kernels::variant_keys_used(options.variant, true);
  TF_CHECK(refused.empty(), "ring_attention: ring attention does not honour ", refused.front(),
           " (Note [variant options])");
  auto node = std::make_unique<RingAttentionNode>();
  AttentionDims& d = node->dims;
  d.batch = q.dim(0);
  d.heads = q.dim(1);
  d.kv_heads = k.dim(1);
  d.q_len = d.kv_len = local / chunks;
  d.head_dim = q.dim(3);
  d.value_dim = v.dim(3);
  d.scale = options.scale > 0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(d.head_dim));
  node->chunking = {d.batch, chunks, d.q_len};
  node->ring = {options.layout, comm.rank(), comm.size()};
  node->causal = options.causal;
  node->variant = options.variant;
  node->comm = &comm;
  const DType dtype = q.dtype();
  node->lse_chunks = Tensor::empty({d.batch * d.heads * local}, dtype);
  Tensor out = Tensor::empty({d.batch, d.heads, local, d.value_dim}, dtype);
  dispatch(dtype, [&](auto zero) { ring_forward<decltype(zero)>(q, k, v, *node, out); });
  if (needs_grad(q, k, v)) {
    node->queries = q;
    node->keys = k;
    node->values = v;
    node->out = out;
    record(std::move(node), {out});
  }
  return out;
}

}  // namespace tf::ops
