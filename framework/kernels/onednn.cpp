// oneDNN engine, stream, and the matmul primitive cache keyed by dims and flags.
#include "framework/kernels/onednn.h"

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

#include "framework/kernels/matmul.h"

namespace tf::kernels {

namespace {
std::atomic<uint64_t> g_primitives{0};
}

dnnl::engine& onednn_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& onednn_stream() {
  static dnnl::stream stream(onednn_engine());
  return stream;
}

uint64_t onednn_primitives_created() { return g_primitives.load(); }
void count_onednn_primitive() { ++g_primitives; }

namespace {

using MatmulKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, bool, bool, bool>;

struct MatmulPrimitive {
  dnnl::matmul primitive;
  // Memory objects made once and pointed at each call's buffers (set_data_handle), and the
  // execution arguments over them: a dnnl::memory per operand and an argument map per call were
  // our share of a matmul's heap allocations (docs/performance.md, "Heap allocations").
  dnnl::memory a, b, c, bias;
  std::array<dnnl_exec_arg_t, 4> args{};
  int n_args = 0;
  std::mutex mutex;  // the memory objects are shared: one call at a time per primitive
};

void init_matmul(MatmulPrimitive& p, const MatmulDims& d, bool with_bias) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // A transposed operand is described by strides, so no copy is made.
  const dims a_dims{d.batch, d.m, d.k}, b_dims{d.b_broadcast ? 1 : d.batch, d.k, d.n},
      c_dims{d.batch, d.m, d.n};
  const dims a_strides = d.trans_a ? dims{d.m * d.k, 1, d.m} : dims{d.m * d.k, d.k, 1};
  const dims b_strides = d.trans_b ? dims{d.k * d.n, 1, d.k} : dims{d.k * d.n, d.n, 1};
  const dnnl::memory::desc a(a_dims, dt::f32, a_strides), b(b_dims, dt::f32, b_strides),
      c(c_dims, dt::f32, dims{d.m * d.n, d.n, 1}),
      bias(dims{1, 1, d.n}, dt::f32, dims{d.n, d.n, 1});  // broadcast over batch, rows
  dnnl::primitive_attr attr;
  if (d.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const auto desc = with_bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c);
  dnnl::matmul::primitive_desc pd(desc, attr, onednn_engine());
  p.primitive = dnnl::matmul(pd);
  count_onednn_primitive();
  auto& engine = onednn_engine();
  p.a = dnnl::memory(a, engine, DNNL_MEMORY_NONE);
  p.b = dnnl::memory(b, engine, DNNL_MEMORY_NONE);
  p.c = dnnl::memory(c, engine, DNNL_MEMORY_NONE);
  p.args[p.n_args++] = {DNNL_ARG_SRC, p.a.get()};
  p.args[p.n_args++] = {DNNL_ARG_WEIGHTS, p.b.get()};
  p.args[p.n_args++] = {DNNL_ARG_DST, p.c.get()};
  if (with_bias) {
    p.bias = dnnl::memory(bias, engine, DNNL_MEMORY_NONE);
    p.args[p.n_args++] = {DNNL_ARG_BIAS, p.bias.get()};
  }
}

std::atomic<uint64_t> g_matmul_calls{0};

}  // namespace

uint64_t onednn_matmul_calls() { return g_matmul_calls.load(); }

void matmul_onednn(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias) {
  static std::mutex mutex;
  static std::map<MatmulKey, MatmulPrimitive> cache;
  const MatmulKey key{d.batch, d.m, d.n, d.k, d.trans_a, d.trans_b, d.b_broadcast, d.accumulate, bias != nullptr};
  MatmulPrimitive* p;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto [it, inserted] = cache.try_emplace(key);
    if (inserted) {
      try {
        init_matmul(it->second, d, bias != nullptr);
      } catch (...) {
        cache.erase(it);
        throw;
      }
    }
    p = &it->second;  // std::map nodes never move
  }
  ++g_matmul_calls;
  std::lock_guard<std::mutex> lock(p->mutex);
  p->a.set_data_handle(const_cast<float*>(a));
  p->b.set_data_handle(const_cast<float*>(b));
  p->c.set_data_handle(c);
  if (bias) p->bias.set_data_handle(const_cast<float*>(bias));
  // The C API: the C++ execute() copies the argument map into a fresh std::vector on every call.
  dnnl::error::wrap_c_api(dnnl_primitive_execute(p->primitive.get(), onednn_stream().get(), p->n_args, p->args.data()),
                          "could not execute a matmul primitive");
  onednn_stream().wait();
}

}  // namespace tf::kernels
