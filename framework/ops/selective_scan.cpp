// The selective scan: forward, backward and the decoding step side by side; the math is Note
// [selective scan] in selective_scan.h.
#include "framework/ops/selective_scan.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/storage_pool.h"

namespace tf::ops {

namespace {

struct ScanDims {
  int64_t batch, time, channels, state;
};

ScanDims check_scan(const char* op, const Tensor& x, const Tensor& delta, const Tensor& a, const Tensor& b,
                    const Tensor& c, const Tensor& d) {
  TF_CHECK(x.rank() == 3 && delta.shape() == x.shape(), op, ": x and delta must be (B, T, E) alike, got ",
           x.describe(), " and ", delta.describe());
  const int64_t B = x.dim(0), T = x.dim(1), E = x.dim(2);
  TF_CHECK(a.rank() == 2 && a.dim(0) == E, op, ": a must be (E, N) with E = ", E, ", got ", a.describe());
  const int64_t N = a.dim(1);
  TF_CHECK(b.shape() == Shape({B, T, N}) && c.shape() == b.shape(), op, ": b and c must be (B, T, N) = (", B, ", ",
           T, ", ", N, "), got ", b.describe(), " and ", c.describe());
  TF_CHECK(!d.defined() || d.shape() == Shape({E}), op, ": d must be (E) = (", E, "), got ", d.describe());
  for (const Tensor* t : {&delta, &a, &b, &c}) check_same_dtype(op, x, *t);
  if (d.defined()) check_same_dtype(op, x, d);
  return {B, T, E, N};
}

// Channels per task: up to 32, fewer when T is long, so that a task's h history (T x block x N,
// kept by the backward) stays near 4 MiB.
int64_t block_channels(const ScanDims& s, size_t scalar_bytes) {
  const int64_t per_channel = std::max<int64_t>(1, s.time * s.state * static_cast<int64_t>(scalar_bytes));
  return std::clamp<int64_t>((int64_t{4} << 20) / per_channel, 1, std::min<int64_t>(32, s.channels));
}

// Whether the tasks are worth a fork: below ~32k state updates in all (B T E N) a fork and join
// cost more than the scan, and beside a busy process every join waits for a thread that is not
// running (a float64 gradcheck of tiny Mamba models made thousands of such calls and took 170 s).
// Each task writes its own outputs, so the result is the same either way.
bool worth_forking(const ScanDims& s, int64_t blocks) {
  return s.batch * blocks > 1 && s.batch * s.time * s.channels * s.state >= (1 << 15);
}

// The pointers of one scan's inputs.
template <class T>
struct ScanInputs {
  const T *x, *delta, *a, *b, *c, *d;  // d may be null
};

// Runs channels e0 .. e0 + ne - 1 of batch entry bi forward from h (ne x N, the state before t = 0),
// leaving the last state in h. Writes y when given, and every h_t to history (T x ne x N) when given.
template <class T>
void scan_block(const ScanDims& s, const ScanInputs<T>& in, int64_t bi, int64_t e0, int64_t ne, T* h, T* y,
                T* history) {
  const int64_t E = s.channels, N = s.state;
  for (int64_t t = 0; t < s.time; ++t) {
    const int64_t row = bi * s.time + t;
    const T* bt = in.b + row * N;
    const T* ct = in.c + row * N;
    for (int64_t j = 0; j < ne; ++j) {
      const int64_t e = e0 + j;
      const T xt = in.x[row * E + e], dt = in.delta[row * E + e];
      const T* ae = in.a + e * N;
      T* he = h + j * N;
      T acc = 0;
      for (int64_t n = 0; n < N; ++n) {
        he[n] = std::exp(dt * ae[n]) * he[n] + dt * bt[n] * xt;
        acc += ct[n] * he[n];
      }
      if (y) y[row * E + e] = acc + (in.d ? in.d[e] * xt : T(0));
      if (history) std::copy(he, he + N, history + (t * ne + j) * N);
    }
  }
}

// Every (batch entry, channel block) task of a forward; states (B, E, N) in and out, or zeros.
template <class T>
void scan_forward(const ScanDims& s, const ScanInputs<T>& in, T* y, T* states) {
  const int64_t block = block_channels(s, sizeof(T)), blocks = (s.channels + block - 1) / block;
#pragma omp parallel for schedule(dynamic) if (worth_forking(s, blocks))
  for (int64_t task = 0; task < s.batch * blocks; ++task) {
    const int64_t bi = task / blocks, e0 = task % blocks * block, ne = std::min(block, s.channels - e0);
    // Pooled, as every per-task buffer here: a warm training step takes nothing from malloc.
    storage_pool::Scratch<T> zeros(states ? 0 : ne * s.state, T(0));
    T* h = states ? states + (bi * s.channels + e0) * s.state : zeros.data();
    scan_block(s, in, bi, e0, ne, h, y, static_cast<T*>(nullptr));
  }
}

// The gradients of one task, written to its own shares (see Note [selective scan]).
template <class T>
struct ScanGrads {
  T *dx, *ddelta;      // (B, T, E): each element written by one task
  T *db_parts, *dc_parts;  // (B, blocks, T, N): the task's sum over its channels
  T *da_parts, *dd_parts;  // (B, E, N), (B, E): the task's channels for its batch entry
};

template <class T>
void scan_backward_block(const ScanDims& s, const ScanInputs<T>& in, const T* dy, int64_t bi, int64_t block_index,
                         int64_t e0, int64_t ne, int64_t blocks, const ScanGrads<T>& g) {
  const int64_t E = s.channels, N = s.state, T_ = s.time;
  storage_pool::Scratch<T> history(T_ * ne * N), h(ne * N, T(0)), gh(ne * N, T(0));
  scan_block(s, in, bi, e0, ne, h.data(), static_cast<T*>(nullptr), history.data());
  T* db = g.db_parts + (bi * blocks + block_index) * T_ * N;
  T* dc = g.dc_parts + (bi * blocks + block_index) * T_ * N;
  const storage_pool::Scratch<T> zero_state(N, T(0));
  for (int64_t t = T_ - 1; t >= 0; --t) {
    const int64_t row = bi * T_ + t;
    const T* bt = in.b + row * N;
    const T* ct = in.c + row * N;
    for (int64_t j = 0; j < ne; ++j) {
      const int64_t e = e0 + j;
      const T gy = dy[row * E + e], xt = in.x[row * E + e], dt = in.delta[row * E + e];
      const T* ae = in.a + e * N;
      const T* ht = history.data() + (t * ne + j) * N;
      const T* hprev = t > 0 ? history.data() + ((t - 1) * ne + j) * N : zero_state.data();
      T* ghe = gh.data() + j * N;
      T* da = g.da_parts + (bi * E + e) * N;
      T dx = in.d ? gy * in.d[e] : T(0), ddelta = 0;
      g.dd_parts[bi * E + e] += gy * xt;
      for (int64_t n = 0; n < N; ++n) {
        dc[t * N + n] += gy * ht[n];
        ghe[n] += gy * ct[n];  // now the whole gradient reaching h_t
        const T abar = std::exp(dt * ae[n]), dabar = ghe[n] * hprev[n];
        ddelta += dabar * abar * ae[n] + ghe[n] * bt[n] * xt;
        da[n] += dabar * abar * dt;
        db[t * N + n] += ghe[n] * dt * xt;
        dx += ghe[n] * dt * bt[n];
        ghe[n] *= abar;  // on to h_{t-1}
      }
      g.dx[row * E + e] = dx;
      g.ddelta[row * E + e] = ddelta;
    }
  }
}

struct SelectiveScanNode : Node {
  Tensor x, delta, a, b, c, d;  // saved: the backward runs the forward again
  ScanDims dims;
  const char* op_name() const override { return "selective_scan"; }
  void backward() override {
    const Tensor dy = take_output_grad();
    const ScanDims& s = dims;
    const DType dtype = x.dtype();
    const int64_t block = block_channels(s, dtype_size(dtype)), blocks = (s.channels + block - 1) / block;
    Tensor dx = Tensor::empty(x.shape(), dtype), ddelta = Tensor::empty(x.shape(), dtype);
    Tensor db_parts = Tensor::zeros({s.batch, blocks, s.time, s.state}, dtype), dc_parts = Tensor::zeros(db_parts.shape(), dtype);
    Tensor da_parts = Tensor::zeros({s.batch, s.channels, s.state}, dtype), dd_parts = Tensor::zeros({s.batch, s.channels}, dtype);
    Tensor db = Tensor::zeros(b.shape(), dtype), dc = Tensor::zeros(c.shape(), dtype);
    Tensor da = Tensor::zeros(a.shape(), dtype), dd = Tensor::zeros({s.channels}, dtype);
    dispatch(dtype, [&](auto zero) {
      using T = decltype(zero);
      const ScanInputs<T> in{x.data<T>(), delta.data<T>(), a.data<T>(), b.data<T>(), c.data<T>(),
                             d.defined() ? d.data<T>() : nullptr};
      const ScanGrads<T> g{dx.data<T>(), ddelta.data<T>(), db_parts.data<T>(), dc_parts.data<T>(), da_parts.data<T>(),
                           dd_parts.data<T>()};
#pragma omp parallel for schedule(dynamic) if (worth_forking(s, blocks))
      for (int64_t task = 0; task < s.batch * blocks; ++task) {
        const int64_t bi = task / blocks, k = task % blocks, e0 = k * block;
        scan_backward_block(s, in, dy.data<T>(), bi, k, e0, std::min(block, s.channels - e0), blocks, g);
      }
      // The shares, summed in a fixed order: over blocks for dB and dC, over batch entries for dA, dD.
      const int64_t TN = s.time * s.state;
      for (int64_t bi = 0; bi < s.batch; ++bi)
        for (int64_t k = 0; k < blocks; ++k)
          for (int64_t i = 0; i < TN; ++i) {
            db.data<T>()[bi * TN + i] += db_parts.data<T>()[(bi * blocks + k) * TN + i];
            dc.data<T>()[bi * TN + i] += dc_parts.data<T>()[(bi * blocks + k) * TN + i];
          }
      for (int64_t bi = 0; bi < s.batch; ++bi) {
        for (int64_t i = 0; i < s.channels * s.state; ++i) da.data<T>()[i] += da_parts.data<T>()[bi * s.channels * s.state + i];
        for (int64_t e = 0; e < s.channels; ++e) dd.data<T>()[e] += dd_parts.data<T>()[bi * s.channels + e];
      }
    });
    accumulate_grad(x, std::move(dx));
    accumulate_grad(delta, std::move(ddelta));
    accumulate_grad(a, std::move(da));
    accumulate_grad(b, std::move(db));
    accumulate_grad(c, std::move(dc));
    if (d.defined()) accumulate_grad(d, std::move(dd));
  }
};

template <class T>
ScanInputs<T> inputs_of(const Tensor& x, const Tensor& delta, const Tensor& a, const Tensor& b, const Tensor& c,
                        const Tensor& d) {
  return {x.data<T>(), delta.data<T>(), a.data<T>(), b.data<T>(), c.data<T>(), d.defined() ? d.data<T>() : nullptr};
}

}  // namespace

Tensor selective_scan(const Tensor& x, const Tensor& delta, const Tensor& a, const Tensor& b, const Tensor& c,
                      const Tensor& d) {
  const ScanDims s = check_scan("selective_scan", x, delta, a, b, c, d);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    scan_forward<T>(s, inputs_of<T>(x, delta, a, b, c, d), y.data<T>(), nullptr);
  });
  if (needs_grad(x, delta, a, b, c, d)) {
    auto node = std::make_unique<SelectiveScanNode>();
    node->x = x, node->delta = delta, node->a = a, node->b = b, node->c = c, node->d = d;
    node->dims = s;
    record(std::move(node), {y});
  }
  return y;
}

Tensor selective_scan_append(const Tensor& x, const Tensor& delta, const Tensor& a, const Tensor& b, const Tensor& c,
                             const Tensor& d, const Tensor& state) {
  TF_CHECK(!grad_enabled(), "selective_scan_append is for inference: call it under a NoGradGuard");
  const ScanDims s = check_scan("selective_scan_append", x, delta, a, b, c, d);
  TF_CHECK(state.shape() == Shape({s.batch, s.channels, s.state}) && state.dtype() == x.dtype(),
           "selective_scan_append: the state must be (B, E, N) = (", s.batch, ", ", s.channels, ", ", s.state, ") ",
           dtype_name(x.dtype()), ", got ", state.describe());
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    scan_forward<T>(s, inputs_of<T>(x, delta, a, b, c, d), y.data<T>(), state.data<T>());
  });
  return y;
}

}  // namespace tf::ops
