// What every layer shares: named parameters, initialisation, and the forward context (train/eval).
//
// A layer is a plain struct: an Options struct (with documented defaults), its parameters as
// Tensor members, a constructor that initialises them, forward(), and parameters(), which lists
// them under dotted names that are also the checkpoint keys (PyTorch's state-dict names):
//
//   struct Linear {
//     struct Options { int64_t in = 64, out = 64; bool bias = true; };
//     Tensor weight, bias;                                   // (out, in), (out)
//     Linear(const Options& options, Init& init);
//     Tensor forward(const Tensor& x) const;
//     void parameters(ParamList& out, const std::string& prefix) const;  // prefix + "weight", ...
//   };
//
// Copying a layer copies Tensor handles, so the copy shares its parameters (see framework/tensor.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/dist/comm.h"
#include "framework/ops/ring_attention.h"
#include "framework/random.h"
#include "framework/tensor.h"

namespace tf::layers {

// Which parameters a weight-decaying optimizer should leave alone (biases, norm scales and
// embeddings, by the usual convention of GPT-2 / nanoGPT training).
enum class ParamKind { weight, bias, norm, embedding };

struct NamedParam {
  std::string name;  // "blocks.0.attn.qkv.weight"
  Tensor tensor;     // a handle on the layer's own parameter (same storage, same gradient)
  ParamKind kind;
};
using ParamList = std::vector<NamedParam>;

void add_param(ParamList& out, const std::string& name, const Tensor& t, ParamKind kind);
int64_t count_parameters(const ParamList& params);
// A tree-like table: one line per parameter with its shape and element count, then the total.
std::string summarize(const ParamList& params);

// Initialisation source: a seeded generator and the dtype to build in (f32 to train, f64 to check).
// shapes_only builds every parameter as Tensor::shape_only: the model's parameters() then give
// names, shapes and counts from the config alone, allocating nothing (plans, size checks).
struct Init {
  Rng rng;
  DType dtype = DType::f32;
  bool shapes_only = false;
  // normal(0, std), uniform(low, high), zeros, ones, as parameters that require grad.
  Tensor normal(const Shape& shape, double std);
  Tensor uniform(const Shape& shape, double low, double high);
  Tensor zeros(const Shape& shape);
  Tensor ones(const Shape& shape);
  // Element i (row-major) = value(i), called in order (it may draw from rng).
  Tensor from_values(const Shape& shape, const std::function<double(int64_t)>& value);
};

// Sequence parallel training (docs/distributed.md): this process holds some chunks of every
// sequence, the other ranks the rest. Embeddings and RoPE use the chunks' global positions, and
// attention runs ops::ring_attention.
struct SequenceShard {
  ops::RingLayout layout = ops::RingLayout::zigzag;
  dist::Comm* comm = nullptr;
  int64_t chunk_len = 0;                // C: positions per chunk
  std::vector<int64_t> chunk_starts;    // the global position of each local chunk's first token
};

// f(piece, start) on each local chunk of x along `axis` (its global first position `start`), the
// results joined again; without a shard, f(x, offset) on the whole.
Tensor per_chunk(const Tensor& x, int axis, const SequenceShard* shard, int64_t offset,
                 const std::function<Tensor(const Tensor&, int64_t)>& f);

// Passed down through forward(): train/eval mode and where dropout draws its seeds.
struct Context {
  bool training = false;            // dropout is active only when training
  Rng* rng = nullptr;               // required when training with dropout > 0
  std::vector<Tensor>* attention_weights = nullptr;  // if set, each attention layer appends
                                                     // its probabilities (B, H, T_q, T_k)
  // Head gates xi_h (Michel et al. 2019, section 4.1): if set, one tensor per block in layer order,
  // (H) shared by the batch or (B, H) one per sequence; block i's attention multiplies head h's
  // output by head_gates[i][h] before W_O mixes the heads. 1 leaves a head as it is, 0 masks it, and
  // dL/dxi_h is the head's importance. `layer` is the block being run; the model sets it (in_block).
  const std::vector<Tensor>* head_gates = nullptr;
  int64_t layer = -1;
  const SequenceShard* shard = nullptr;  // sequence parallel: this rank's chunks (see SequenceShard)
  // train.recompute blocks: each transformer block keeps only its input and runs again during
  // backward (Note [recomputed blocks] in layers/block.cpp); the same numbers, less memory.
  bool recompute = false;
  // The (B, T) i32 ids the model embeds for this forward (a rank's own chunks under sequence
  // parallelism, the new tokens of a decoding step); the model sets it, and value embeddings read it.
  Tensor token_ids{};
  uint64_t next_seed() const;       // a fresh dropout seed from rng
  Context in_block(int64_t i) const;  // this context with layer = i
  Tensor head_gate() const;           // head_gates[layer], or undefined without gates
};

// Runs run() with `name` (and `index`, if given) appended to the layer path, so that anomaly mode
// can say where an op ran: in_layer("ln_f", [&] { return ln_f.forward(x); }). See LayerScope.
template <class F>
Tensor in_layer(const char* name, F&& run, int64_t index = -1) {
  LayerScope scope(name, index);
  return run();
}

// ops::dropout when training and p > 0, identity otherwise.
Tensor dropout(const Tensor& x, double p, const Context& ctx);

}  // namespace tf::layers
