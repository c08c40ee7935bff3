// oneDNN engine, stream, and the matmul primitive cache keyed by dims and flags.
#include "framework/kernels/onednn.h"

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

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
  dnnl::memory::desc a, b, c, bias;
};

MatmulPrimitive make_matmul(const MatmulDims& d, bool with_bias) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // A transposed operand is described by strides, so no copy is made.
  const dims a_dims{d.batch, d.m, d.k}, b_dims{d.b_broadcast ? 1 : d.batch, d.k, d.n},
      c_dims{d.batch, d.m, d.n};
  const dims a_strides = d.trans_a ? dims{d.m * d.k, 1, d.m} : dims{d.m * d.k, d.k, 1};
  const dims b_strides = d.trans_b ? dims{d.k * d.n, 1, d.k} : dims{d.k * d.n, d.n, 1};
  MatmulPrimitive p;
  p.a = dnnl::memory::desc(a_dims, dt::f32, a_strides);
  p.b = dnnl::memory::desc(b_dims, dt::f32, b_strides);
  p.c = dnnl::memory::desc(c_dims, dt::f32, dims{d.m * d.n, d.n, 1});
  p.bias = dnnl::memory::desc(dims{1, 1, d.n}, dt::f32, dims{d.n, d.n, 1});  // broadcast over batch, rows
  dnnl::primitive_attr attr;
  if (d.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const auto desc = with_bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.c) : dnnl::matmul::desc(p.a, p.b, p.c);
  dnnl::matmul::primitive_desc pd(desc, attr, onednn_engine());
  p.primitive = dnnl::matmul(pd);
  count_onednn_primitive();
  return p;
}

}  // namespace

void matmul_onednn(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias) {
  static std::mutex mutex;
  static std::map<MatmulKey, MatmulPrimitive> cache;
  const MatmulKey key{d.batch, d.m, d.n, d.k, d.trans_a, d.trans_b, d.b_broadcast, d.accumulate, bias != nullptr};
  const MatmulPrimitive* p;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(key, make_matmul(d, bias != nullptr)).first;
    p = &it->second;  // std::map nodes never move
  }
  auto& engine = onednn_engine();
  dnnl::memory am(p->a, engine, const_cast<float*>(a)), bm(p->b, engine, const_cast<float*>(b)),
      cm(p->c, engine, c);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(p->bias, engine, const_cast<float*>(bias)));
  p->primitive.execute(onednn_stream(), args);
  onednn_stream().wait();
}

}  // namespace tf::kernels
