// oneDNN engine, stream, and the matmul primitive cache keyed by dims and flags.
#include "framework/kernels/onednn.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <exception>
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

// lda: the distance between A's rows as stored (between op(A)'s columns when trans_a); 0 for a
// dense A. A block of op(A)'s rows cut from a transposed A keeps the whole matrix's stride.
void init_matmul(MatmulPrimitive& p, const MatmulDims& d, bool with_bias, int64_t lda = 0) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // A transposed operand is described by strides, so no copy is made.
  const dims a_dims{d.batch, d.m, d.k}, b_dims{d.b_broadcast ? 1 : d.batch, d.k, d.n},
      c_dims{d.batch, d.m, d.n};
  if (lda == 0) lda = d.trans_a ? d.m : d.k;
  const dims a_strides = d.trans_a ? dims{lda * d.k, 1, lda} : dims{d.m * lda, lda, 1};
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

void execute(MatmulPrimitive& p, const float* a, const float* b, float* c, const float* bias, dnnl::stream& stream) {
  p.a.set_data_handle(const_cast<float*>(a));
  p.b.set_data_handle(const_cast<float*>(b));
  p.c.set_data_handle(c);
  if (bias) p.bias.set_data_handle(const_cast<float*>(bias));
  // The C API: the C++ execute() copies the argument map into a fresh std::vector on every call.
  dnnl::error::wrap_c_api(dnnl_primitive_execute(p.primitive.get(), stream.get(), p.n_args, p.args.data()),
                          "could not execute a matmul primitive");
  stream.wait();
}

// Rows of C per block of the deterministic matmul: from the shape alone (never the thread count),
// in multiples of 16 (oneDNN's row tile), about 12 blocks in all: 12 shares evenly among 1, 2, 3, 4
// and 6 threads, and each block packs B again, which more blocks pay for (config B, one thread:
// 0.83 of the default speed with 32 blocks, 0.95 with 12; docs/performance.md).
int64_t deterministic_block_rows(const MatmulDims& d) {
  const int64_t rows = (d.batch * d.m + 11) / 12;
  return std::min(d.m, std::max<int64_t>(16, (rows + 15) / 16 * 16));
}

// Sets this thread's OpenMP thread count to one while alive: oneDNN then plans and runs a
// primitive for one thread (it reads omp_get_max_threads() when it creates one).
struct OneThread {
  int previous = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(previous); }
};

// Note [matmuls on a thread of their own]: one call on the calling thread alone, through a primitive
// planned for one thread (OneThread) from a cache of this thread's own, with its own memory objects
// and stream, so no lock is taken. For the blocks of the deterministic matmul, and for any call made
// inside a parallel region (a batch-split step's threads, train/thread_split.h): there the shared
// cache would hand every thread the same primitive, planned for the whole team, and its lock would
// make threads that multiply the same shapes at the same moment take turns.
void matmul_on_this_thread(const MatmulDims& d, int64_t lda, const float* a, const float* b, float* c, const float* bias) {
  const OneThread one;
  using Key = std::tuple<MatmulKey, int64_t>;  // the shared cache's key, plus A's stride
  thread_local std::map<Key, MatmulPrimitive> cache;
  thread_local dnnl::stream stream(onednn_engine());
  const Key key{MatmulKey{d.batch, d.m, d.n, d.k, d.trans_a, d.trans_b, d.b_broadcast, d.accumulate, bias != nullptr}, lda};
  auto [it, inserted] = cache.try_emplace(key);
  if (inserted) {
    try {
      init_matmul(it->second, d, bias != nullptr, lda);
    } catch (...) {
      cache.erase(it);
      throw;
    }
  }
  execute(it->second, a, b, c, bias, stream);
}

}  // namespace

uint64_t onednn_matmul_calls() { return g_matmul_calls.load(); }

void matmul_onednn(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias) {
  if (omp_in_parallel()) {  // Note [matmuls on a thread of their own]
    ++g_matmul_calls;
    return matmul_on_this_thread(d, 0, a, b, c, bias);
  }
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
  execute(*p, a, b, c, bias, onednn_stream());
}

void matmul_deterministic(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias) {
  if (d.batch * d.m * d.n == 0) return;
  const int64_t block = deterministic_block_rows(d), per_matrix = (d.m + block - 1) / block;
  const int64_t blocks = d.batch * per_matrix;
  ++g_matmul_calls;
  std::exception_ptr error;  // an exception must not leave an OpenMP region: kept, thrown after it
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < blocks; ++i) try {
    const int64_t entry = i / per_matrix, row = (i % per_matrix) * block;
    MatmulDims piece = d;
    piece.batch = 1;
    piece.m = std::min(block, d.m - row);
    const int64_t lda = d.trans_a ? d.m : d.k;
    const float* a_piece = a + entry * d.m * d.k + (d.trans_a ? row : row * d.k);
    const float* b_piece = b + (d.b_broadcast ? 0 : entry * d.k * d.n);
    matmul_on_this_thread(piece, lda, a_piece, b_piece, c + (entry * d.m + row) * d.n, bias);
  } catch (...) {
#pragma omp critical(tf_matmul_deterministic_error)
    if (!error) error = std::current_exception();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace tf::kernels
