// Position encodings: how a transformer learns where a token is, since attention itself is blind
// to order (it is permutation-equivariant without them).
//
//   none        no position information (used by tests of permutation equivariance)
//   sinusoidal  fixed table added to the token embeddings (Vaswani et al. 2017, section 3.5):
//                 PE(pos, 2i) = sin(pos / 10000^(2i / d_model)),  PE(pos, 2i + 1) = cos(same angle)
//   learned     a trained table of max_seq_len rows added to the token embeddings (GPT-2, BERT)
//   rope        nothing is added; queries and keys are rotated inside attention (Su et al. 2021),
//               see framework/ops/rope.h for the pairing of dimensions
//   alibi       nothing is added; each head's scores get a linear penalty on the query-key distance
//               (Press et al. 2022), Note [attention variants] in framework/kernels/reference/attention.h
//   t5          nothing is added; each layer learns one scalar per head and relative-distance bucket,
//               added to the scores (Raffel et al. 2020), the same Note
#pragma once
#include <string>

#include "layers/embedding.h"
#include "layers/module.h"

namespace tf::layers {

enum class PositionEncoding { none, sinusoidal, learned, rope, alibi, t5 };
inline constexpr PositionEncoding kPositionEncodings[] = {PositionEncoding::none, PositionEncoding::sinusoidal,
                                                          PositionEncoding::learned, PositionEncoding::rope,
                                                          PositionEncoding::alibi, PositionEncoding::t5};
const char* position_encoding_name(PositionEncoding p);
PositionEncoding parse_position_encoding(const std::string& name);  // throws InputError

// The sinusoidal table (max_len, dim), in float64 math then converted.
Tensor sinusoidal_table(int64_t max_len, int64_t dim, DType dtype);

struct AbsolutePosition {
  struct Options {
    PositionEncoding kind = PositionEncoding::learned;
    int64_t max_seq_len = 256;
    int64_t dim = 64;
  };
  Options options;
  Embedding learned;   // kind == learned: "position_embedding.weight" (max_seq_len, dim)
  Tensor sinusoid;     // kind == sinusoidal: a fixed buffer, not a parameter

  AbsolutePosition() = default;
  AbsolutePosition(const Options& options, Init& init);
  // x: (B, T, dim) token embeddings of positions offset .. offset + T - 1; returns x + PE.
  Tensor add_to(const Tensor& x, int64_t offset = 0) const;
  void parameters(ParamList& out, const std::string& prefix) const;
};

}  // namespace tf::layers
