// cross_entropy, forward and backward side by side, over kernels/reference/cross_entropy.h
// (float64, and float32 under ReferenceKernelsGuard) and kernels/cpu/cross_entropy.h (float32).
#include "framework/ops/cross_entropy.h"

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/cross_entropy.h"
#include "framework/kernels/mode.h"
#include "framework/kernels/reference/cross_entropy.h"

namespace tf::ops {

namespace {

kernels::CrossEntropyDims checked_dims(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& o) {
  TF_CHECK(logits.rank() >= 1, "cross_entropy: logits need a class axis, got ", logits.describe());
  TF_CHECK(targets.dtype() == DType::i32, "cross_entropy: targets must be i32 class ids, got ", targets.describe());
  Shape expected;
  for (int a = 0; a < logits.rank() - 1; ++a) expected.push_back(logits.dim(a));
  TF_CHECK(targets.shape() == expected, "cross_entropy: targets ", targets.describe(), " do not match logits ",
           logits.describe(), " (expected targets of shape ", expected, ")");
  kernels::CrossEntropyDims d;
  d.classes = logits.dim(-1);
  d.rows = targets.numel();
  d.ignore_index = o.ignore_index;
  // Checked here, before any kernel runs, so the parallel kernels never meet a bad index.
  const int32_t* t = targets.data<int32_t>();
  for (int64_t r = 0; r < d.rows; ++r) {
    TF_CHECK(t[r] == o.ignore_index || (t[r] >= 0 && t[r] < d.classes), "cross_entropy: target ", t[r],
             " at row ", r, " is out of range for ", d.classes, " classes (logits ", logits.describe(),
             ", ignore_index ", o.ignore_index, ")");
  }
  return d;
}

struct CrossEntropyNode : Node {
  Tensor logits;       // saved: the softmax is recomputed from it
  Tensor targets;      // saved: (...) i32, a copy, since batchers may refill their buffers in place
  Tensor log_sum_exp;  // saved: (rows,) one value per row, instead of a (rows, V) softmax
  kernels::CrossEntropyDims dims;
  int64_t count;       // rows that counted
  Reduction reduction;
  const char* op_name() const override { return "cross_entropy"; }
  void backward() override {
    // d loss / d logits[r, j] = (softmax(logits[r])_j - [j == t_r]) * dloss / count (mean).
    const double dloss = outputs[0].grad().item();
    const double g = reduction == Reduction::mean ? (count > 0 ? dloss / static_cast<double>(count) : 0.0) : dloss;
    Tensor dlogits = Tensor::empty(logits.shape(), logits.dtype());
    dispatch(logits.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const int32_t* t = targets.data<int32_t>();
      if (kernels::use_fast<T>())
        kernels::cross_entropy_backward_fast(dims, logits.data<float>(), t, log_sum_exp.data<float>(), g,
                                             dlogits.data<float>());
      else
        kernels::cross_entropy_backward_reference<T>(dims, logits.data<T>(), t, log_sum_exp.data<T>(), g,
                                                     dlogits.data<T>());
    });
    accumulate_grad(logits, std::move(dlogits));
  }
};

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options) {
  const kernels::CrossEntropyDims d = checked_dims(logits, targets, options);
  Tensor log_sum_exp = Tensor::empty({d.rows}, logits.dtype());  // (rows,)
  kernels::CrossEntropySums sums;
  dispatch(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int32_t* t = targets.data<int32_t>();
    if (kernels::use_fast<T>())
      sums = kernels::cross_entropy_forward_fast(d, logits.data<float>(), t, log_sum_exp.data<float>());
    else
      sums = kernels::cross_entropy_forward_reference<T>(d, logits.data<T>(), t, log_sum_exp.data<T>());
  });
  double loss = sums.loss;
  if (options.reduction == Reduction::mean) loss = sums.count > 0 ? loss / static_cast<double>(sums.count) : 0.0;
  Tensor out = Tensor::scalar(loss, logits.dtype());
  if (needs_grad(logits)) {
    auto node = std::make_unique<CrossEntropyNode>();
    node->logits = logits;
    node->targets = targets.clone();
    node->log_sum_exp = log_sum_exp;
    node->dims = d;
    node->count = sums.count;
    node->reduction = options.reduction;
    record(std::move(node), {out});
  }
  return out;
}

}  // namespace tf::ops
