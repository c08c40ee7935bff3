// linear_attention: forward and backward side by side (Note [linear attention] in linear_attention.h),
// each a few masked kernel products (kernels/reference/linear_attention.h, kernels/cpu/linear_attention.h)
// per (batch, head) slice, the slices in parallel.
#include "framework/ops/linear_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/linear_attention.h"
#include "framework/kernels/mode.h"
#include "framework/kernels/reference/linear_attention.h"

namespace tf::ops {

namespace {

using kernels::ProductOrder;

template <class T>
T feature_map(T x) {  // phi(x) = elu(x) + 1
  return x > 0 ? x + 1 : std::exp(x);
}

struct Dims {
  int64_t slices, seq_len, key_dim, value_dim;  // B H, T, D, Dv
  int64_t aug() const { return value_dim + 1; }  // Dv + 1: the values with the column of ones
};

// Whether the slices are worth a fork: below ~32k state elements in all (B H T D (Dv + 1)) a
// fork and join cost more than the work, and beside a busy process every join waits for a thread
// that is not running (a float64 gradcheck of a tiny linear-attention model made thousands of such
// calls and took 130 s). The slices are independent, so the result is the same either way.
bool worth_forking(const Dims& d) { return d.slices > 1 && d.slices * d.seq_len * d.key_dim * d.aug() >= (1 << 15); }

Dims check_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  TF_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4, op, ": queries, keys and values must be (B, H, T, D), got ",
           q.describe(), ", ", k.describe(), ", ", v.describe());
  TF_CHECK(k.shape() == q.shape(), op, ": keys must be shaped like the queries, got ", k.describe(), " and ", q.describe());
  TF_CHECK(v.dim(0) == q.dim(0) && v.dim(1) == q.dim(1) && v.dim(2) == q.dim(2), op,
           ": values must be (B, H, T, Dv) with the queries' B, H, T, got ", v.describe(), " and ", q.describe());
  TF_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), op, ": queries, keys and values must share a dtype");
  return {q.dim(0) * q.dim(1), q.dim(2), q.dim(3), v.dim(3)};
}

// The key-padding mask (B, T) as doubles, checked to hold 0 and 1; empty when there is none.
std::vector<double> key_padding_rows(const Tensor& key_padding, const Tensor& q) {
  if (!key_padding.defined()) return {};
  TF_CHECK(key_padding.rank() == 2 && key_padding.dim(0) == q.dim(0) && key_padding.dim(1) == q.dim(2),
           "linear_attention: key_padding must be (B, T) = (", q.dim(0), ", ", q.dim(2), "), got ",
           key_padding.describe());
  std::vector<double> rows = key_padding.to_vector();
  for (double m : rows) TF_CHECK(m == 0 || m == 1, "linear_attention: key_padding holds 1 (real token) or 0 (padding), got ", m);
  return rows;
}

// Row of the mask for slice s = b H + h, or null.
const double* padding_of(const std::vector<double>& rows, int64_t s, int64_t heads, int64_t seq_len) {
  return rows.empty() ? nullptr : rows.data() + (s / heads) * seq_len;
}

template <class T>
void product(const kernels::KernelProductArgs<T>& args) {
  if (kernels::use_fast<T>()) kernels::kernel_product_chunked<T>(args);
  else kernels::kernel_product_reference<T>(args);
}

// phi(q), phi(k) and the values with a column of ones, one slice. (T, D), (T, D), (T, Dv + 1)
// `padding` is the slice's row of the key-padding mask (T), or null: a padded key's phi(k) is 0.
template <class T>
void map_slice(const Dims& d, int64_t s, const T* q, const T* k, const T* v, const double* padding, T* mapped_q,
               T* mapped_k, T* values_one) {
  const int64_t n = d.seq_len * d.key_dim, Dv = d.value_dim;
  for (int64_t i = 0; i < n; ++i) {
    mapped_q[s * n + i] = feature_map(q[s * n + i]);
    mapped_k[s * n + i] = padding && padding[i / d.key_dim] == 0 ? T(0) : feature_map(k[s * n + i]);
  }
  for (int64_t t = 0; t < d.seq_len; ++t) {
    const T* vt = v + (s * d.seq_len + t) * Dv;
    T* row = values_one + (s * d.seq_len + t) * d.aug();
    std::copy(vt, vt + Dv, row);
    row[Dv] = T(1);
  }
}

// o = n / (n'[Dv] + eps) for the rows of one slice.                  numer: (T, Dv + 1), out: (T, Dv)
template <class T>
void normalise_slice(const Dims& d, int64_t s, const T* numer, double eps, T* out) {
  for (int64_t t = 0; t < d.seq_len; ++t) {
    const T* row = numer + (s * d.seq_len + t) * d.aug();
    const T inv = T(1) / (row[d.value_dim] + static_cast<T>(eps));
    T* o = out + (s * d.seq_len + t) * d.value_dim;
    for (int64_t e = 0; e < d.value_dim; ++e) o[e] = row[e] * inv;
  }
}

struct LinearAttentionNode : Node {
  GradRef queries, keys, values;  // only their gradients
  Tensor mapped_queries, mapped_keys;  // saved: phi(q), phi(k), (B, H, T, D)
  Tensor values_one;                   // saved: [v, 1], (B, H, T, Dv + 1)
  Tensor numer;                        // saved: n' (numerator and normaliser), (B, H, T, Dv + 1)
  LinearAttentionOptions options;
  const char* op_name() const override { return "linear_attention"; }
  void backward() override {
    const Tensor dout = take_output_grad();
    const Shape& qs = mapped_queries.shape();
    const Dims d{qs[0] * qs[1], qs[2], qs[3], values_one.dim(3) - 1};
    const DType dtype = mapped_queries.dtype();
    Tensor dq = Tensor::empty(qs, dtype), dk = Tensor::empty(qs, dtype);
    Tensor dv = Tensor::empty({qs[0], qs[1], qs[2], d.value_dim}, dtype);
    Tensor g_aug = Tensor::empty(values_one.shape(), dtype), dv_aug = Tensor::empty(values_one.shape(), dtype);
    const ProductOrder forward = options.causal ? ProductOrder::causal : ProductOrder::full;
    const ProductOrder reverse = options.causal ? ProductOrder::anticausal : ProductOrder::full;
    dispatch(dtype, [&](auto zero) {
      using T = decltype(zero);
      const int64_t T_ = d.seq_len, D = d.key_dim, Dv = d.value_dim, W = d.aug();
#pragma omp parallel for schedule(dynamic) if (worth_forking(d))
      for (int64_t s = 0; s < d.slices; ++s) {
        const T* fq = mapped_queries.data<T>() + s * T_ * D;
        const T* fk = mapped_keys.data<T>() + s * T_ * D;
        const T* vo = values_one.data<T>() + s * T_ * W;
        const T* nu = numer.data<T>() + s * T_ * W;
        const T* go = dout.data<T>() + s * T_ * Dv;
        T* g = g_aug.data<T>() + s * T_ * W;
        for (int64_t t = 0; t < T_; ++t) {  // g'_t = [do_t / den_t, -(do_t . o_t) / den_t]
          const T inv = T(1) / (nu[t * W + Dv] + static_cast<T>(options.eps));
          T dot = 0;
          for (int64_t e = 0; e < Dv; ++e) {
            g[t * W + e] = go[t * Dv + e] * inv;
            dot += go[t * Dv + e] * nu[t * W + e] * inv;  // do . o
          }
          g[t * W + Dv] = -dot * inv;
        }
        T* dqs = dq.data<T>() + s * T_ * D;
        T* dks = dk.data<T>() + s * T_ * D;
        T* dva = dv_aug.data<T>() + s * T_ * W;
        product<T>({.order = forward, .seq_len = T_, .a_width = W, .c_width = D, .a = g, .b = vo, .c = fk, .out = dqs});
        product<T>({.order = reverse, .seq_len = T_, .a_width = W, .c_width = D, .a = vo, .b = g, .c = fq, .out = dks});
        product<T>({.order = reverse, .seq_len = T_, .a_width = D, .c_width = W, .a = fk, .b = fq, .c = g, .out = dva});
        for (int64_t i = 0; i < T_ * D; ++i) {  // phi'(x) = min(phi(x), 1); a padded key's phi(k) = 0 gives 0
          dqs[i] *= std::min(fq[i], T(1));
          dks[i] *= std::min(fk[i], T(1));
        }
        T* dvs = dv.data<T>() + s * T_ * Dv;
        for (int64_t t = 0; t < T_; ++t) std::copy(dva + t * W, dva + t * W + Dv, dvs + t * Dv);
      }
    });
    accumulate_grad(queries, std::move(dq));
    accumulate_grad(keys, std::move(dk));
    accumulate_grad(values, std::move(dv));
  }
};

}  // namespace

Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, const LinearAttentionOptions& options) {
  const Dims d = check_inputs("linear_attention", q, k, v);
  TF_CHECK(options.eps >= 0 && std::isfinite(options.eps), "linear_attention: eps must be >= 0, got ", options.eps);
  const Shape aug_shape{q.dim(0), q.dim(1), d.seq_len, d.aug()};
  Tensor mapped_q = Tensor::empty(q.shape(), q.dtype()), mapped_k = Tensor::empty(q.shape(), q.dtype());
  Tensor values_one = Tensor::empty(aug_shape, q.dtype()), numer = Tensor::empty(aug_shape, q.dtype());
  Tensor out = Tensor::empty(v.shape(), q.dtype());
  const ProductOrder order = options.causal ? ProductOrder::causal : ProductOrder::full;
  const std::vector<double> padding = key_padding_rows(options.key_padding, q);
  dispatch(q.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int64_t T_ = d.seq_len, D = d.key_dim, W = d.aug();
#pragma omp parallel for schedule(dynamic) if (worth_forking(d))
    for (int64_t s = 0; s < d.slices; ++s) {
      map_slice<T>(d, s, q.data<T>(), k.data<T>(), v.data<T>(), padding_of(padding, s, q.dim(1), T_),
                   mapped_q.data<T>(), mapped_k.data<T>(), values_one.data<T>());
      product<T>({.order = order, .seq_len = T_, .a_width = D, .c_width = W, .a = mapped_q.data<T>() + s * T_ * D,
                  .b = mapped_k.data<T>() + s * T_ * D, .c = values_one.data<T>() + s * T_ * W,
                  .out = numer.data<T>() + s * T_ * W});
      normalise_slice<T>(d, s, numer.data<T>(), options.eps, out.data<T>());
    }
  });
  if (needs_grad(q, k, v)) {
    auto node = std::make_unique<LinearAttentionNode>();
    node->queries = GradRef(q);
    node->keys = GradRef(k);
    node->values = GradRef(v);
    node->mapped_queries = std::move(mapped_q);
    node->mapped_keys = std::move(mapped_k);
    node->values_one = std::move(values_one);
    node->numer = std::move(numer);
    node->options = options;
    record(std::move(node), {out});
  }
  return out;
}

Tensor linear_attention_state(const Tensor& q, const Tensor& v) {
  TF_CHECK(q.rank() == 4 && v.rank() == 4, "linear_attention_state: queries and values must be (B, H, T, D), got ",
           q.describe(), " and ", v.describe());
  return Tensor::zeros({q.dim(0), q.dim(1), q.dim(3), v.dim(3) + 1}, q.dtype());
}

Tensor linear_attention_append(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& state,
                               const LinearAttentionOptions& options) {
  const Dims d = check_inputs("linear_attention_append", q, k, v);
  TF_CHECK(options.causal && !options.key_padding.defined(),
           "linear_attention_append: decoding needs causal attention without padding");
  TF_CHECK(state.shape() == Shape({q.dim(0), q.dim(1), d.key_dim, d.aug()}) && state.dtype() == q.dtype(),
           "linear_attention_append: the state must be (B, H, D, Dv + 1) = (", q.dim(0), ", ", q.dim(1), ", ",
           d.key_dim, ", ", d.aug(), "), got ", state.describe());
  NoGradGuard no_grad;
  const Shape aug_shape{q.dim(0), q.dim(1), d.seq_len, d.aug()};
  Tensor mapped_q = Tensor::empty(q.shape(), q.dtype()), mapped_k = Tensor::empty(q.shape(), q.dtype());
  Tensor values_one = Tensor::empty(aug_shape, q.dtype()), numer = Tensor::empty(aug_shape, q.dtype());
  Tensor out = Tensor::empty(v.shape(), q.dtype());
  dispatch(q.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int64_t T_ = d.seq_len, D = d.key_dim, W = d.aug();
#pragma omp parallel for schedule(static) if (d.slices > 1 && T_ * D * W > 4096)
    for (int64_t s = 0; s < d.slices; ++s) {
      map_slice<T>(d, s, q.data<T>(), k.data<T>(), v.data<T>(), nullptr, mapped_q.data<T>(), mapped_k.data<T>(),
                   values_one.data<T>());
      kernels::kernel_product_chunked<T>({.order = ProductOrder::causal, .seq_len = T_, .a_width = D, .c_width = W,
                                          .a = mapped_q.data<T>() + s * T_ * D, .b = mapped_k.data<T>() + s * T_ * D,
                                          .c = values_one.data<T>() + s * T_ * W, .out = numer.data<T>() + s * T_ * W,
                                          .state = state.data<T>() + s * D * W});
      normalise_slice<T>(d, s, numer.data<T>(), options.eps, out.data<T>());
    }
  });
  return out;
}

Tensor linear_attention_weights(const Tensor& q, const Tensor& k, const LinearAttentionOptions& options) {
  check_inputs("linear_attention_weights", q, k, q);
  const int64_t slices = q.dim(0) * q.dim(1), T = q.dim(2), D = q.dim(3);
  const std::vector<double> padding = key_padding_rows(options.key_padding, q);
  Tensor weights = Tensor::zeros({q.dim(0), q.dim(1), T, T}, q.dtype());
  dispatch(q.dtype(), [&](auto zero) {
    using T_ = decltype(zero);
    for (int64_t s = 0; s < slices; ++s)
      for (int64_t i = 0; i < T; ++i) {
        T_* row = weights.data<T_>() + (s * T + i) * T;  // (T)
        double total = 0;
        const double* keep = padding_of(padding, s, q.dim(1), T);
        for (int64_t j = 0; j < (options.causal ? i + 1 : T); ++j) {
          if (keep && keep[j] == 0) continue;
          double w = 0;
          for (int64_t d = 0; d < D; ++d)
            w += static_cast<double>(feature_map(q.data<T_>()[(s * T + i) * D + d])) *
                 feature_map(k.data<T_>()[(s * T + j) * D + d]);
          row[j] = static_cast<T_>(w);
          total += w;
        }
        for (int64_t j = 0; j < T; ++j) row[j] = static_cast<T_>(row[j] / (total + options.eps));
      }
  });
  return weights;
}

}  // namespace tf::ops
