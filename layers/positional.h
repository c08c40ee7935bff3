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

#include "framework/kind_table.h"
#include "layers/embedding.h"
#include "layers/module.h"

namespace tf::layers {

enum class PositionEncoding { none, sinusoidal, learned, rope, alibi, t5 };

// Note [position support]
// ~~~~~~~~~~~~~~~~~~~~~~~
// What each encoding supports, declared once in its row; the configuration check (layers that form
// no scores, differential attention, a pruned model's heads), sequence parallelism and `tapeformer
// prune` read the row rather than naming encodings. (What llama.cpp's and Hugging Face's
// architectures take is a fact about them, so the exports keep it.)
struct PositionRow {
  PositionEncoding kind;
  const char* name;
  bool absolute;        // depends on a token's own position only (nothing, or a table added to the
                        // embeddings): the only kind layers without scores (linear, mamba) take
  bool ring;            // sequence parallelism runs it round the ring (T5's table gradient would have to travel it)
  bool differential;    // differential attention takes it (T5's table has a row per softmax head)
  bool heads_removable; // heads can be removed (`tapeformer prune`, model.heads_per_layer); ALiBi's slope
                        // follows a head's index among n_heads (Press et al. 2022, section 3)
};
inline constexpr PositionRow kPositionTable[] = {
    {PositionEncoding::none, "none", true, true, true, true},
    {PositionEncoding::sinusoidal, "sinusoidal", true, true, true, true},
    {PositionEncoding::learned, "learned", true, true, true, true},
    {PositionEncoding::rope, "rope", false, true, true, true},
    {PositionEncoding::alibi, "alibi", false, true, true, false},
    {PositionEncoding::t5, "t5", false, false, false, true},
};
inline constexpr const PositionRow& position_row(PositionEncoding p) { return row_of(kPositionTable, p); }
inline constexpr auto kPositionEncodings = kinds_of(kPositionTable);  // the recipe's choices, in the table's order
inline const char* position_encoding_name(PositionEncoding p) { return position_row(p).name; }
// The names of the encodings whose row has `column` set, "a, b or c" (for messages).
std::string position_names_with(bool PositionRow::*column);
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
