// split_heads and merge_heads, forward and backward side by side; see heads.h.
#include "framework/ops/heads.h"

#include <cstring>
#include <numeric>

#include "framework/autograd/tape.h"
#include "framework/object_pool.h"

namespace tf::ops {

namespace {

// One layout, both directions. `rows` is (B, T, sum(heads) D) and group g is (B, heads[g], T, D);
// each D-wide slice is `slice_bytes` long. to_heads copies rows -> groups, otherwise groups -> rows,
// where a null group (an output without gradient) writes zeros.
// The lists are pooled (framework/object_pool.h), as the nodes that keep them are.
struct HeadLayout {
  int64_t batch, seq, slice_bytes;
  std::pmr::vector<int64_t> heads{object_pool::allocator<int64_t>()};
};

void move_heads(const HeadLayout& l, std::byte* rows, std::span<std::byte* const> groups, bool to_heads) {
  const int64_t total = std::accumulate(l.heads.begin(), l.heads.end(), int64_t{0});
  const int64_t n_rows = l.batch * l.seq, s = l.slice_bytes;
#pragma omp parallel for schedule(static) if (n_rows * total * s > (int64_t{1} << 18))
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t b = r / l.seq, t = r % l.seq;
    std::byte* row = rows + r * total * s;  // (sum(heads), D) of row (b, t)
    for (size_t g = 0; g < groups.size(); ++g) {
      const int64_t h_count = l.heads[g];
      for (int64_t h = 0; h < h_count; ++h, row += s) {
        if (groups[g] == nullptr) {
          std::memset(row, 0, s);
          continue;
        }
        std::byte* slice = groups[g] + ((b * h_count + h) * l.seq + t) * s;  // (b, h, t, :) of group g
        if (to_heads)
          std::memcpy(slice, row, s);
        else
          std::memcpy(row, slice, s);
      }
    }
  }
}

std::byte* bytes_of(const Tensor& t) { return static_cast<std::byte*>(t.raw_data()); }

struct SplitHeadsNode : Node {
  GradRef x;  // not saved for its values: only its gradient
  HeadLayout layout;
  const char* op_name() const override { return "split_heads"; }
  void backward() override {
    // dx gathers the groups' gradients back into rows; an unused group contributes zeros.
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    std::pmr::vector<Tensor> grads(object_pool::allocator<Tensor>());
    std::pmr::vector<std::byte*> groups(object_pool::allocator<std::byte*>());
    for (size_t g = 0; g < outputs.size(); ++g) {
      grads.push_back(take_output_grad(g));
      groups.push_back(grads.back().defined() ? bytes_of(grads.back()) : nullptr);
    }
    move_heads(layout, bytes_of(dx), groups, false);
    accumulate_grad(x, std::move(dx));
  }
};

struct MergeHeadsNode : Node {
  GradRef x;  // not saved for its values: only its gradient
  HeadLayout layout;
  const char* op_name() const override { return "merge_heads"; }
  void backward() override {
    const Tensor dy = take_output_grad();  // (B, T, H D)
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    std::byte* const group[] = {bytes_of(dx)};
    move_heads(layout, bytes_of(dy), group, true);
    accumulate_grad(x, std::move(dx));
  }
};

}  // namespace

std::pmr::vector<Tensor> split_heads(const Tensor& x, std::span<const int64_t> heads, int64_t head_dim) {
  int64_t total = 0;
  for (int64_t h : heads) {
    TF_CHECK(h > 0, "split_heads: head counts must be positive, got ", h);
    total += h;
  }
  TF_CHECK(x.rank() == 3 && head_dim > 0 && x.dim(2) == total * head_dim, "split_heads: ", x.describe(),
           " is not (B, T, ", total, " x ", head_dim, ") for ", heads.size(), " groups of heads");
  HeadLayout layout{x.dim(0), x.dim(1), head_dim * static_cast<int64_t>(dtype_size(x.dtype()))};
  layout.heads.assign(heads.begin(), heads.end());
  std::pmr::vector<Tensor> outs(object_pool::allocator<Tensor>());
  std::pmr::vector<std::byte*> groups(object_pool::allocator<std::byte*>());
  for (int64_t h : heads) {
    outs.push_back(Tensor::empty({x.dim(0), h, x.dim(1), head_dim}, x.dtype()));  // (B, h, T, D)
    groups.push_back(bytes_of(outs.back()));
  }
  move_heads(layout, bytes_of(x), groups, true);
  if (needs_grad(x)) {
    auto node = std::make_unique<SplitHeadsNode>();
    node->x = GradRef(x);
    node->layout = layout;
    record(std::move(node), outs);
  }
  return outs;
}

Tensor merge_heads(const Tensor& x) {
  TF_CHECK(x.rank() == 4, "merge_heads: expected (B, H, T, D), got ", x.describe());
  HeadLayout layout{x.dim(0), x.dim(2), x.dim(3) * static_cast<int64_t>(dtype_size(x.dtype()))};
  layout.heads.push_back(x.dim(1));
  Tensor out = Tensor::empty({x.dim(0), x.dim(2), x.dim(1) * x.dim(3)}, x.dtype());  // (B, T, H D)
  std::byte* const group[] = {bytes_of(x)};
  move_heads(layout, bytes_of(out), group, false);
  if (needs_grad(x)) {
    auto node = std::make_unique<MergeHeadsNode>();
    node->x = GradRef(x);
    node->layout = layout;
    record(std::move(node), {out});
  }
  return out;
}

}  // namespace tf::ops
