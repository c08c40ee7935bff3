// rope: cached cos/sin tables, the rotation kernel, forward and backward (the inverse rotation).
#include "framework/ops/rope.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "framework/autograd/tape.h"

namespace tf::ops {

const char* rope_scaling_name(RopeScalingKind kind) {
  switch (kind) {
    case RopeScalingKind::none: return "none";
    case RopeScalingKind::linear: return "linear";
    case RopeScalingKind::ntk: return "ntk";
    case RopeScalingKind::yarn: return "yarn";
  }
  return "?";
}

void check_rope_scaling(const RopeScaling& sc) {
  TF_CHECK(sc.factor >= 1 && std::isfinite(sc.factor), "rope: the scaling factor must be >= 1, got ", sc.factor);
  if (sc.kind != RopeScalingKind::yarn) return;
  TF_CHECK(sc.original_context > 0, "rope: YaRN needs the original context length (> 0), got ", sc.original_context);
  TF_CHECK(sc.alpha >= 0 && sc.alpha < sc.beta && std::isfinite(sc.beta), "rope: YaRN needs 0 <= alpha < beta, got ",
           sc.alpha, " and ", sc.beta);
}

// Note [rope scaling] in rope.h.
std::vector<double> rope_frequencies(int64_t head_dim, const RopeOptions& o) {
  const RopeScaling& sc = o.scaling;
  const double D = static_cast<double>(head_dim), s = sc.factor;
  const double theta = sc.kind == RopeScalingKind::ntk && head_dim > 2 ? o.theta * std::pow(s, D / (D - 2)) : o.theta;
  std::vector<double> freq(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double f = std::pow(theta, -2.0 * static_cast<double>(i) / D);  // RoFormer eq. 15
    switch (sc.kind) {
      case RopeScalingKind::none:
      case RopeScalingKind::ntk: freq[i] = f; break;
      case RopeScalingKind::linear: freq[i] = f / s; break;
      case RopeScalingKind::yarn: {
        const double rotations = static_cast<double>(sc.original_context) * f / (2 * M_PI);  // r = L / lambda
        const double ramp = std::clamp((rotations - sc.alpha) / (sc.beta - sc.alpha), 0.0, 1.0);
        freq[i] = (1 - ramp) * f / s + ramp * f;
        break;
      }
    }
  }
  return freq;
}

double rope_magnitude(const RopeScaling& sc) {
  return sc.kind == RopeScalingKind::yarn ? 0.1 * std::log(sc.factor) + 1 : 1.0;
}

namespace {

// cos and sin of pos * position_scale * freq[i] for positions 0 .. positions-1, row-major
// (positions, D/2). Angles are formed in double: at position 10^4 a float angle would already be
// off by ~1e-3 rad. The float copies serve the float32 path.
struct RopeTable {
  int64_t positions = 0;
  std::vector<double> cos, sin;   // (positions, D/2)
  std::vector<float> cos_f, sin_f;  // (positions, D/2)
  template <class T>
  const T* cos_data() const {
    if constexpr (sizeof(T) == sizeof(float)) return cos_f.data(); else return cos.data();
  }
  template <class T>
  const T* sin_data() const {
    if constexpr (sizeof(T) == sizeof(float)) return sin_f.data(); else return sin.data();
  }
};

std::shared_ptr<const RopeTable> build_table(int64_t positions, int64_t head_dim, const RopeOptions& o) {
  auto table = std::make_shared<RopeTable>();
  const std::vector<double> freq = rope_frequencies(head_dim, o);
  const double magnitude = rope_magnitude(o.scaling);
  const int64_t pairs = head_dim / 2;
  table->positions = positions;
  table->cos.resize(positions * pairs);
  table->sin.resize(positions * pairs);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < pairs; ++i) {
      const double angle = static_cast<double>(p) * o.position_scale * freq[i];
      table->cos[p * pairs + i] = magnitude * std::cos(angle);
      table->sin[p * pairs + i] = magnitude * std::sin(angle);
    }
  }
  table->cos_f.assign(table->cos.begin(), table->cos.end());
  table->sin_f.assign(table->sin.begin(), table->sin.end());
  return table;
}

// One table per (D, theta, position_scale, scaling), covering positions 0 .. at least `positions` - 1. It
// is keyed without T or the offset so that decoding (offset t, T = 1, for t = 0, 1, 2, ...) reuses
// one table; when a longer one is needed it is rebuilt at twice the length. Callers hold a
// shared_ptr, so a rebuild never frees a table in use.
std::shared_ptr<const RopeTable> rope_table(int64_t positions, int64_t head_dim, const RopeOptions& o) {
  static std::mutex mutex;
  using Key = std::tuple<int64_t, double, double, RopeScalingKind, double, int64_t, double, double>;
  static std::map<Key, std::shared_ptr<const RopeTable>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  const RopeScaling& sc = o.scaling;
  auto& table = cache[{head_dim, o.theta, o.position_scale, sc.kind, sc.factor, sc.original_context, sc.alpha, sc.beta}];
  if (!table || table->positions < positions)
    table = build_table(std::max(positions, table ? 2 * table->positions : positions), head_dim, o);
  return table;
}

// Which columns of a row rope rotates: a row of W columns whose first `heads` groups of D columns
// are rotated, the rest copied. rope(): W = D, one head; rope_heads(): W = (H + 2G) D, H + G heads.
struct RotatedColumns {
  int64_t head_dim, heads, width;
};

// The rotation of every pair of every rotated head of every row; `inverse` rotates by -angle
// (backward). Memory-bound and branch-free: this one loop serves as reference and fast kernel alike.
template <class T>
void rope_rotate(const T* x, T* y, int64_t rows, int64_t seq_len, const RotatedColumns& cols, int64_t offset,
                 const RopeTable& table, bool inverse) {
  const int64_t pairs = cols.head_dim / 2, rotated = cols.heads * cols.head_dim;
  const T sign = inverse ? T(-1) : T(1);
#pragma omp parallel for schedule(static) if (rows * cols.width > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {  // r over (..., T)
    const int64_t pos = offset + r % seq_len;
    const T* c = table.cos_data<T>() + pos * pairs;  // (D/2)
    const T* s = table.sin_data<T>() + pos * pairs;  // (D/2)
    for (int64_t h = 0; h < cols.heads; ++h) {
      const T* xr = x + r * cols.width + h * cols.head_dim;  // (D)
      T* yr = y + r * cols.width + h * cols.head_dim;        // (D)
      for (int64_t i = 0; i < pairs; ++i) {
        const T x0 = xr[2 * i], x1 = xr[2 * i + 1], si = sign * s[i];
        yr[2 * i] = x0 * c[i] - x1 * si;
        yr[2 * i + 1] = x0 * si + x1 * c[i];
      }
    }
    std::copy(x + r * cols.width + rotated, x + (r + 1) * cols.width, y + r * cols.width + rotated);
  }
}

Tensor rope_apply(const Tensor& x, const RopeOptions& o, const RotatedColumns& cols, bool inverse) {
  const int64_t seq_len = x.dim(-2), rows = x.numel() / std::max<int64_t>(cols.width, 1);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  if (x.numel() == 0) return y;
  const auto table = rope_table(o.position_offset + seq_len, cols.head_dim, o);
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    rope_rotate<T>(x.data<T>(), y.data<T>(), rows, seq_len, cols, o.position_offset, *table, inverse);
  });
  return y;
}

struct RopeNode : Node {
  GradRef x;  // not saved for its values: only so its gradient can be accumulated
  RopeOptions options;
  RotatedColumns cols;
  const char* op_name() const override { return "rope"; }
  // y = m R x with R orthogonal and m the magnitude, so dx = m R^T dy: the rotation by -angle,
  // scaled by the same m (the table holds m cos and m sin); copied columns pass dy through.
  void backward() override { accumulate_grad(x, rope_apply(outputs[0].grad(), options, cols, true)); }
};

Tensor record_rope(const Tensor& x, const RopeOptions& options, const RotatedColumns& cols) {
  Tensor y = rope_apply(x, options, cols, false);
  if (needs_grad(x)) {
    auto node = std::make_unique<RopeNode>();
    node->x = GradRef(x);
    node->options = options;
    node->cols = cols;
    record(std::move(node), {y});
  }
  return y;
}

}  // namespace

namespace {

void check_options(const RopeOptions& options) {
  TF_CHECK(options.theta > 0 && std::isfinite(options.theta), "rope: theta must be positive, got ", options.theta);
  TF_CHECK(options.position_offset >= 0, "rope: position_offset must be >= 0, got ", options.position_offset);
  TF_CHECK(options.position_scale > 0 && std::isfinite(options.position_scale),
           "rope: position_scale must be positive, got ", options.position_scale);
  check_rope_scaling(options.scaling);
}

}  // namespace

RopeRow rope_row(int64_t head_dim, const RopeOptions& options) {
  check_options(options);
  TF_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope: head size D must be even, got ", head_dim);
  auto table = rope_table(options.position_offset + 1, head_dim, options);
  const int64_t row = options.position_offset * (head_dim / 2);
  return {table, table->cos_f.data() + row, table->sin_f.data() + row};
}

Tensor rope(const Tensor& x, const RopeOptions& options) {
  TF_CHECK(x.rank() >= 2, "rope: input must be (B, H, T, D), got ", x.describe());
  TF_CHECK(x.dim(-1) % 2 == 0, "rope: head size D must be even to form rotation pairs, got D = ", x.dim(-1),
           " in ", x.describe());
  check_options(options);
  return record_rope(x, options, {.head_dim = x.dim(-1), .heads = 1, .width = x.dim(-1)});
}

Tensor rope_heads(const Tensor& x, int64_t rotated_heads, int64_t head_dim, const RopeOptions& options) {
  TF_CHECK(x.rank() == 3 && head_dim > 0 && head_dim % 2 == 0 && rotated_heads >= 0 &&
               rotated_heads * head_dim <= x.dim(2),
           "rope_heads: expected (B, T, W) with ", rotated_heads, " heads of an even size D = ", head_dim,
           " within W, got ", x.describe());
  check_options(options);
  return record_rope(x, options, {.head_dim = head_dim, .heads = rotated_heads, .width = x.dim(2)});
}

}  // namespace tf::ops
