// Sequence parallel training; see sequence_parallel.h.
#include "train/sequence_parallel.h"

#include "framework/ops/ring_attention.h"
#include "layers/mixer.h"
#include "layers/positional.h"

namespace tf::train {

namespace {
ops::RingLayout layout_of(const Recipe& r) {
  return r.train.sequence_parallel == "contiguous" ? ops::RingLayout::contiguous : ops::RingLayout::zigzag;
}
}  // namespace

bool sequence_parallel(const Recipe& recipe) { return recipe.train.sequence_parallel != "off"; }

void check_sequence_parallel(const Recipe& r, int64_t ranks) {
  if (!sequence_parallel(r)) return;
  const layers::ModelConfig& m = r.model;
  const std::string key = "train.sequence_parallel: " + r.train.sequence_parallel;
  // The rank count is known only here, not when the recipe is read: one process would hold every chunk.
  TF_CHECK_INPUT(ranks > 1, key, " splits each sequence over the ranks of mpirun, and this run is one process, "
                 "so it has no effect: run under mpirun -np N (N >= 2), or set train.sequence_parallel: off");
  TF_CHECK_INPUT(m.arch == layers::Architecture::gpt, key, " splits the sequences of a GPT; model.arch is bert");
  for (int64_t l = 0; l < m.n_layers; ++l)
    TF_CHECK_INPUT(layers::mixer_row(m.mixer(l)).ring, key, " runs softmax attention round the ring; layer ", l,
                   " has model.mixer ", layers::mixer_name(m.mixer(l)));
  TF_CHECK_INPUT(layers::position_row(m.position).ring, key, " takes no model.position ",
                 layers::position_encoding_name(m.position),
                 " (ring attention does not carry its learned table's gradient; Note [position support])");
  for (const std::string& refused : kernels::variant_keys_used(m.attention, true))
    TF_CHECK_INPUT(false, key, " takes no ", refused, " (ring attention does not honour it; Note [variant options])");
  TF_CHECK_INPUT(m.attn_dropout == 0, key, " takes no model.attn_dropout (got ", m.attn_dropout, ")");
  const int64_t chunks = ops::ring_chunks_per_rank(layout_of(r)) * ranks;
  TF_CHECK_INPUT(r.data.seq_len % chunks == 0, key, " on ", ranks, " ranks cuts each sequence into ", chunks,
                 " chunks: data.seq_len (", r.data.seq_len, ") must be a multiple of ", chunks);
}

SequenceSplit split_sequences(const Recipe& r, dist::Comm& comm) {
  SequenceSplit s;
  const ops::RingLayout layout = layout_of(r);
  const int64_t per_rank = ops::ring_chunks_per_rank(layout);
  s.shard.layout = layout;
  s.shard.comm = &comm;
  s.shard.chunk_len = r.data.seq_len / (per_rank * comm.size());
  for (int64_t c = 0; c < per_rank; ++c)
    s.shard.chunk_starts.push_back(ops::ring_chunk_of(layout, comm.rank(), comm.size(), c) * s.shard.chunk_len);
  s.positions = ops::ring_positions(layout, comm.rank(), comm.size(), r.data.seq_len);
  return s;
}

Tensor columns(const Tensor& ids, const std::vector<int64_t>& positions) {
  TF_CHECK(ids.rank() == 2 && ids.dtype() == DType::i32, "columns: expected (B, T) i32, got ", ids.describe());
  const int64_t rows = ids.dim(0), width = ids.dim(1), n = static_cast<int64_t>(positions.size());
  Tensor out = Tensor::empty({rows, n}, DType::i32);
  const int32_t* in = ids.data<int32_t>();
  int32_t* o = out.data<int32_t>();
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t i = 0; i < n; ++i) o[b * n + i] = in[b * width + positions[static_cast<size_t>(i)]];
  return out;
}

}  // namespace tf::train
