// Splitting a step's micro-batch by rows among the threads; see thread_split.h.
#include "train/thread_split.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>

#include "framework/autograd/profile.h"
#include "framework/autograd/tape.h"
#include "framework/ops/elementwise.h"
#include "train/recipe.h"

namespace tf::train {

int64_t batch_split_parts(const Recipe& recipe, int threads, int ranks) {
  const TrainConfig& train = recipe.train;
  const char* keeps_ops = train.deterministic                 ? "train.deterministic (a split by rows sums in an order that depends on the thread count)"
                          : train.anomaly                     ? "train.anomaly (it watches one thread)"
                          : train.sequence_parallel != "off"  ? "train.sequence_parallel"
                          : ranks > 1                         ? "more than one rank (each rank's rows are already its own)"
                                                              : nullptr;
  TF_CHECK_INPUT(!keeps_ops || train.thread_split != "batch", "train.thread_split: batch cannot be used with ",
                 keeps_ops, "; use auto or ops");
  if (keeps_ops || train.thread_split == "ops" || threads <= 1) return 1;
  return std::min<int64_t>(threads, train.batch_size);
}

BatchSplit::BatchSplit(const std::vector<Tensor>& params, int64_t parts)
    : gradients_(static_cast<size_t>(parts), PrivateGradients(params)),
      losses_(static_cast<size_t>(parts)),
      errors_(static_cast<size_t>(parts)) {}

Tensor rows(const Tensor& t, int64_t begin, int64_t end) {
  if (!t.defined()) return t;
  Shape shape = t.shape();
  shape[0] = end - begin;
  Tensor out = Tensor::empty(shape, t.dtype());
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(t.dim(0));
  std::memcpy(out.raw_data(), static_cast<const std::byte*>(t.raw_data()) + begin * row_bytes,
              static_cast<size_t>(end - begin) * row_bytes);
  return out;
}

namespace {
int64_t counted_targets(const Tensor& targets) {  // targets that are not ignored (-100)
  const int32_t* t = targets.data<int32_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) n += t[i] != -100;
  return n;
}
}  // namespace

double BatchSplit::run(const layers::LanguageModel& model, const Tensor& inputs, const Tensor& targets,
                       const Tensor& key_padding, const layers::Context& ctx, double scale) {
  const int64_t parts = this->parts(), batch = inputs.dim(0);
  std::fill(losses_.begin(), losses_.end(), 0.0);
  const int64_t all_targets = counted_targets(targets);
  // Part p on thread p; a loop, should OpenMP give fewer threads than asked (OMP_THREAD_LIMIT).
#pragma omp parallel num_threads(static_cast<int>(parts))
  for (int64_t p = omp_get_thread_num(); p < parts; p += omp_get_num_threads()) {
    try {
      omp_set_num_threads(1);  // this thread's kernels run alone (the region above is the step's parallelism)
      std::optional<profile::MuteThisThread> mute;
      if (p > 0) mute.emplace();
      const int64_t begin = batch * p / parts, end = batch * (p + 1) / parts;
      const Tensor part_targets = rows(targets, begin, end);
      const int64_t part_count = counted_targets(part_targets);
      // Part p's share of the micro-batch's mean (Note [batch-split threads]); by rows when nothing counts.
      const double share = all_targets > 0 ? static_cast<double>(part_count) / static_cast<double>(all_targets)
                                           : static_cast<double>(end - begin) / static_cast<double>(batch);
      if (share > 0) {
        Rng part_rng = ctx.rng ? ctx.rng->fork(static_cast<uint64_t>(p)) : Rng(0);
        layers::Context part_ctx = ctx;
        if (ctx.rng) part_ctx.rng = &part_rng;
        PrivateGradients::Scope mine(gradients_[static_cast<size_t>(p)]);
        const Tensor loss = model.loss(rows(inputs, begin, end), part_targets, rows(key_padding, begin, end), part_ctx);
        losses_[static_cast<size_t>(p)] = share * loss.item();
        backward(ops::scale(loss, share * scale));
      }
    } catch (...) {
      errors_[static_cast<size_t>(p)] = std::current_exception();
      tape().clear();  // what this thread recorded before the error can never run
    }
  }
  for (std::exception_ptr& e : errors_) {
    if (!e) continue;
    for (PrivateGradients& part : gradients_) part.discard();
    std::exception_ptr first = std::move(e);
    std::fill(errors_.begin(), errors_.end(), nullptr);
    std::rethrow_exception(first);
  }
  // Thread order, whichever finished first; parameters in parallel (each sum is one thread's).
  const int64_t n_params = static_cast<int64_t>(gradients_.front().size());
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < n_params; ++i)
    for (PrivateGradients& part : gradients_) part.add_to_parameter(static_cast<size_t>(i));
  double loss = 0;
  for (double l : losses_) loss += l;
  return loss;
}

}  // namespace tf::train
