// Sequence parallel training (docs/distributed.md, "Sequence parallel training"): under mpirun with
// train.sequence_parallel set, every rank runs every micro-batch, holding its chunks of every
// sequence (ops::ring_positions); embeddings and RoPE use the chunks' global positions, attention is
// ops::ring_attention, and the ranks' gradients are summed as in data parallel training.
#pragma once
#include <cstdint>
#include <vector>

#include "framework/dist/comm.h"
#include "framework/tensor.h"
#include "layers/module.h"
#include "train/recipe.h"

namespace tf::train {

// Whether the recipe asks for it.
bool sequence_parallel(const Recipe& recipe);

// Throws InputError naming train.sequence_parallel and the key in the way when the recipe's model
// cannot be split over `ranks` ranks (one rank has nothing to split it over): a GPT of softmax-attention layers, positions none, sinusoidal,
// learned or rope, no window, sparse pattern or attention dropout, and data.seq_len a multiple of
// the chunks (N, or 2N for zigzag).
void check_sequence_parallel(const Recipe& recipe, int64_t ranks);

// This rank's share of every sequence: its chunks, and the global position of each of its T / N rows.
struct SequenceSplit {
  layers::SequenceShard shard;
  std::vector<int64_t> positions;
};
SequenceSplit split_sequences(const Recipe& recipe, dist::Comm& comm);

// The columns `positions` of a (B, T) id or target tensor: (B, |positions|).
Tensor columns(const Tensor& ids, const std::vector<int64_t>& positions);

}  // namespace tf::train
