// Batch-size warm-up; see batch_warmup.h.
#include "train/batch_warmup.h"

#include <algorithm>

#include "framework/error.h"
#include "train/thread_split.h"

namespace tf::train {

int64_t batch_start(const TrainConfig& train) {
  return train.batch_start > 0 ? std::min(train.batch_start, train.batch_size)
                               : std::max<int64_t>(1, train.batch_size / 4);
}

int64_t batch_rows(const TrainConfig& train, int64_t step) {
  if (step >= train.batch_warmup) return train.batch_size;
  const int64_t start = batch_start(train);
  return std::clamp<int64_t>(start + (train.batch_size - start) * step / train.batch_warmup, start, train.batch_size);
}

Tensor first_rows(const Tensor& t, int64_t n) {
  if (!t.defined() || t.dim(0) == n) return t;
  TF_CHECK(t.rank() >= 1 && n >= 1 && n <= t.dim(0), "first_rows: expected 1 <= n <= ", t.dim(0), ", got n = ", n);
  return rows(t, 0, n);
}

int64_t shape_warmup_steps(const Recipe& recipe) {
  return std::max(recipe.data.seq_len_warmup, recipe.train.batch_warmup);
}

}  // namespace tf::train
