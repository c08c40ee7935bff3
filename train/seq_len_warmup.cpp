// Sequence-length warm-up; see seq_len_warmup.h.
#include "train/seq_len_warmup.h"

#include <algorithm>
#include <cstring>

#include "framework/error.h"

namespace tf::train {

int64_t seq_len_start(const DataConfig& data) {
  return data.seq_len_start > 0 ? std::min(data.seq_len_start, data.seq_len) : std::max<int64_t>(1, data.seq_len / 4);
}

int64_t window_length(const DataConfig& data, int64_t step) {
  if (step >= data.seq_len_warmup) return data.seq_len;
  const int64_t start = seq_len_start(data);
  const int64_t grown = start + (data.seq_len - start) * step / data.seq_len_warmup;  // exact in integers
  return std::clamp<int64_t>(grown / 8 * 8, start, data.seq_len);  // multiples of 8 (Li et al. 2022)
}

Tensor first_columns(const Tensor& ids, int64_t n) {
  TF_CHECK(ids.rank() == 2 && ids.dtype() == DType::i32 && n >= 1 && n <= ids.dim(1),
           "first_columns: expected (B, T) i32 and 1 <= n <= T, got ", ids.describe(), " and n = ", n);
  const int64_t rows = ids.dim(0), width = ids.dim(1);
  if (n == width) return ids;
  Tensor out = Tensor::empty({rows, n}, DType::i32);
  const int32_t* in = ids.data<int32_t>();
  int32_t* o = out.data<int32_t>();
  for (int64_t b = 0; b < rows; ++b) std::memcpy(o + b * n, in + b * width, static_cast<size_t>(n) * sizeof(int32_t));
  return out;
}

}  // namespace tf::train
