// Embedding lookup, forward and backward side by side, over kernels/reference/embedding.h.
#include "framework/ops/embedding.h"

#include <string>

#include "framework/autograd/tape.h"
#include "framework/kernels/reference/embedding.h"

namespace tf::ops {

namespace {

// Shapes: N = ids.numel(), V = vocabulary, C = channels.

// "(1, 2)": the multi-index of flat position `flat` in `shape`, for error messages.
std::string index_of(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.rank());
  for (int axis = shape.rank() - 1; axis >= 0; --axis) {
    index[axis] = flat % shape[axis];
    flat /= shape[axis];
  }
  return Shape(index).to_string();
}

// Every id in [0, V); otherwise an error naming the first offending position and value.
void check_ids(const Tensor& ids, int64_t vocab) {
  const int32_t* p = ids.data<int32_t>();
  for (int64_t i = 0, n = ids.numel(); i < n; ++i)
    TF_CHECK(p[i] >= 0 && p[i] < vocab, "embedding: id ", p[i], " at position ", index_of(i, ids.shape()),
             " of ids ", ids.describe(), " is outside the vocabulary [0, ", vocab, ")");
}

struct EmbeddingNode : Node {
  GradRef weight;  // only so its gradient can be accumulated (the backward needs no values of it)
  Tensor ids;     // saved: where each row of the output gradient goes
  const char* op_name() const override { return "embedding"; }
  void backward() override {
    const Tensor dout = outputs[0].grad();                                     // (..., C)
    Tensor dweight = Tensor::zeros(weight.shape(), weight.dtype());            // (V, C)
    dispatch(weight.dtype(), [&](auto zero) {
      using T = decltype(zero);
      kernels::embedding_backward_reference<T>(dout.data<T>(), ids.data<int32_t>(), ids.numel(), weight.dim(1),
                                               dweight.data<T>());
    });
    accumulate_grad(weight, std::move(dweight));
  }
};

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  TF_CHECK(weight.rank() == 2 && weight.dtype() != DType::i32,
           "embedding: weight must be a floating-point (V, C) table, got ", weight.describe());
  TF_CHECK(ids.dtype() == DType::i32, "embedding: ids must be i32, got ", ids.describe());
  TF_CHECK(ids.rank() < Shape::kMaxRank, "embedding: ids ", ids.describe(), " leave no room for the channel axis");
  check_ids(ids, weight.dim(0));
  Shape out_shape = ids.shape();
  out_shape.push_back(weight.dim(1));
  Tensor out = Tensor::empty(out_shape, weight.dtype());  // (..., C)
  dispatch(weight.dtype(), [&](auto zero) {
    using T = decltype(zero);
    kernels::embedding_forward_reference<T>(weight.data<T>(), ids.data<int32_t>(), ids.numel(), weight.dim(1),
                                            out.data<T>());
  });
  if (needs_grad(weight)) {
    auto node = std::make_unique<EmbeddingNode>();
    node->weight = GradRef(weight);
    node->ids = ids;
    record(std::move(node), {out});
  }
  return out;
}

}  // namespace tf::ops
