// Absolute position encodings (sinusoidal and learned); RoPE lives in the attention layer.
#include "layers/positional.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/ops/elementwise.h"

namespace tf::layers {

std::string position_names_with(bool PositionRow::*column) {
  std::vector<std::string> names;
  for (const PositionRow& row : kPositionTable)
    if (row.*column) names.emplace_back(row.name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

PositionEncoding parse_position_encoding(const std::string& name) {
  std::string expected;
  for (auto p : kPositionEncodings) {
    if (name == position_encoding_name(p)) return p;
    expected += (expected.empty() ? "" : ", ") + std::string(position_encoding_name(p));
  }
  throw InputError("unknown position encoding '" + name + "' (expected one of " + expected + ")");
}

Tensor sinusoidal_table(int64_t max_len, int64_t dim, DType dtype) {
  std::vector<double> table(max_len * dim);
  for (int64_t pos = 0; pos < max_len; ++pos) {
    for (int64_t i = 0; 2 * i < dim; ++i) {
      const double angle = pos / std::pow(10000.0, 2.0 * i / dim);
      table[pos * dim + 2 * i] = std::sin(angle);
      if (2 * i + 1 < dim) table[pos * dim + 2 * i + 1] = std::cos(angle);
    }
  }
  return Tensor::from_vector(table, {max_len, dim}, dtype);
}

AbsolutePosition::AbsolutePosition(const Options& o, Init& init) : options(o) {
  if (o.kind == PositionEncoding::learned) learned = Embedding({o.max_seq_len, o.dim}, init);
  if (o.kind == PositionEncoding::sinusoidal)  // a fixed table, not a parameter
    sinusoid = init.shapes_only ? Tensor::shape_only({o.max_seq_len, o.dim}, init.dtype)
                                : sinusoidal_table(o.max_seq_len, o.dim, init.dtype);
}

Tensor AbsolutePosition::add_to(const Tensor& x, int64_t offset) const {
  if (options.kind != PositionEncoding::learned && options.kind != PositionEncoding::sinusoidal) return x;
  const int64_t t = x.dim(-2);
  TF_CHECK_INPUT(offset + t <= options.max_seq_len, "sequence of ", offset + t,
                 " positions is longer than max_seq_len ", options.max_seq_len);
  Tensor rows;  // (T, dim)
  if (options.kind == PositionEncoding::learned) {
    const Tensor positions = Tensor::empty({t}, DType::i32);  // (T) written in place: no vector to copy from
    for (int64_t i = 0; i < t; ++i) positions.data<int32_t>()[i] = static_cast<int32_t>(offset + i);
    rows = learned.forward(positions);
  } else {
    // A (T, dim) window of the fixed table, starting at `offset`.
    Tensor window = Tensor::empty({t, options.dim}, x.dtype());
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* src = sinusoid.data<T>() + offset * options.dim;
      std::copy(src, src + t * options.dim, window.data<T>());
    });
    rows = window;
  }
  return ops::add(x, rows);  // broadcast over the batch
}

void AbsolutePosition::parameters(ParamList& out, const std::string& prefix) const {
  if (options.kind == PositionEncoding::learned) learned.parameters(out, prefix);
}

}  // namespace tf::layers
