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
#include <vector>

#include "framework/kernels/bf16.h"
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

// dims, transposes, broadcast, accumulate, bias, and whether A and B are bfloat16
using MatmulKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, bool, bool, bool, bool>;

MatmulKey matmul_key(const MatmulDims& d, bool with_bias, bool bf16) {
  return {d.batch, d.m, d.n, d.k, d.trans_a, d.trans_b, d.b_broadcast, d.accumulate, with_bias, bf16};
}

// Note [bfloat16 matmuls]: with kernels::bf16_matmuls() (train.matmul_precision: bf16), A and B are
// rounded to bfloat16 (nearest, ties to even) into buffers of the calling thread, and the product,
// the bias and C stay float32: the mixed precision of Kalamkar et al. 2019, "A Study of BFLOAT16 for
// Deep Learning Training". Products of two bfloat16 values are exact in float32, so the result is
// the float32 product of the rounded operands. Where the CPU multiplies bfloat16 (native_bf16()) the
// primitive takes them as bf16: the demo's GEMMs ran at 1.7-1.9x float32, rounding included (one
// thread, Zen 5; docs/performance.md). Elsewhere the rounded values are kept as float32 for the float32
// primitive: the same numbers, for tests on any CPU (oneDNN 2.6 has no bf16 matmul for AVX2 and a
// slow one for AVX-512 without BF16).
struct Operands {
  const void* a;
  const void* b;
  bool bf16;  // a and b point to uint16_t bfloat16 values, else to float
};

const void* advance(const void* p, int64_t elements, bool bf16) {
  return bf16 ? static_cast<const void*>(static_cast<const uint16_t*>(p) + elements)
              : static_cast<const void*>(static_cast<const float*>(p) + elements);
}

// A and B as the primitive takes them. The buffers grow to the largest product and stay: no
// allocation after warm-up. They are this thread's, and a product finishes before its caller's next.
Operands operands(const MatmulDims& d, const float* a, const float* b) {
  if (!bf16_matmuls()) return {a, b, false};
  const int64_t a_size = d.batch * d.m * d.k, b_size = (d.b_broadcast ? 1 : d.batch) * d.k * d.n;
  auto round = [](const float* x, int64_t n, auto& buffer) {
    if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(n);
    round_to_bf16(x, buffer.data(), n);
    return static_cast<const void*>(buffer.data());
  };
  if (native_bf16()) {
    thread_local std::vector<uint16_t> a16, b16;
    return {round(a, a_size, a16), round(b, b_size, b16), true};
  }
  thread_local std::vector<float> a32, b32;
  return {round(a, a_size, a32), round(b, b_size, b32), false};
}

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
void init_matmul(MatmulPrimitive& p, const MatmulDims& d, bool with_bias, bool bf16, int64_t lda = 0) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // A transposed operand is described by strides, so no copy is made.
  const dims a_dims{d.batch, d.m, d.k}, b_dims{d.b_broadcast ? 1 : d.batch, d.k, d.n},
      c_dims{d.batch, d.m, d.n};
  if (lda == 0) lda = d.trans_a ? d.m : d.k;
  const dims a_strides = d.trans_a ? dims{lda * d.k, 1, lda} : dims{d.m * lda, lda, 1};
  const dims b_strides = d.trans_b ? dims{d.k * d.n, 1, d.k} : dims{d.k * d.n, d.n, 1};
  const dt in = bf16 ? dt::bf16 : dt::f32;
  const dnnl::memory::desc a(a_dims, in, a_strides), b(b_dims, in, b_strides),
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

void execute(MatmulPrimitive& p, const Operands& in, float* c, const float* bias, dnnl::stream& stream) {
  p.a.set_data_handle(const_cast<void*>(in.a));
  p.b.set_data_handle(const_cast<void*>(in.b));
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
void matmul_on_this_thread(const MatmulDims& d, int64_t lda, const Operands& in, float* c, const float* bias) {
  const OneThread one;
  using Key = std::tuple<MatmulKey, int64_t>;  // the shared cache's key, plus A's stride
  thread_local std::map<Key, MatmulPrimitive> cache;
  thread_local dnnl::stream stream(onednn_engine());
  const Key key{matmul_key(d, bias != nullptr, in.bf16), lda};
  auto [it, inserted] = cache.try_emplace(key);
  if (inserted) {
    try {
      init_matmul(it->second, d, bias != nullptr, in.bf16, lda);
    } catch (...) {
      cache.erase(it);
      throw;
    }
  }
  execute(it->second, in, c, bias, stream);
}

}  // namespace

uint64_t onednn_matmul_calls() { return g_matmul_calls.load(); }

void matmul_onednn(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias) {
  const Operands in = operands(d, a, b);  // Note [bfloat16 matmuls]
  if (omp_in_parallel()) {  // Note [matmuls on a thread of their own]
    ++g_matmul_calls;
    return matmul_on_this_thread(d, 0, in, c, bias);
  }
  static std::mutex mutex;
  static std::map<MatmulKey, MatmulPrimitive> cache;
  const MatmulKey key = matmul_key(d, bias != nullptr, in.bf16);
  MatmulPrimitive* p;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto [it, inserted] = cache.try_emplace(key);
    if (inserted) {
      try {
        init_matmul(it->second, d, bias != nullptr, in.bf16);
      } catch (...) {
        cache.erase(it);
        throw;
      }
    }
    p = &it->second;  // std::map nodes never move
  }
  ++g_matmul_calls;
  std::lock_guard<std::mutex> lock(p->mutex);
  execute(*p, in, c, bias, onednn_stream());
}

void matmul_deterministic(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias) {
  if (d.batch * d.m * d.n == 0) return;
  const int64_t block = deterministic_block_rows(d), per_matrix = (d.m + block - 1) / block;
  const int64_t blocks = d.batch * per_matrix;
  const Operands in = operands(d, a, b);  // Note [bfloat16 matmuls]: rounded once, read by every block
  ++g_matmul_calls;
  std::exception_ptr error;  // an exception must not leave an OpenMP region: kept, thrown after it
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < blocks; ++i) try {
    const int64_t entry = i / per_matrix, row = (i % per_matrix) * block;
    MatmulDims piece = d;
    piece.batch = 1;
    piece.m = std::min(block, d.m - row);
    const int64_t lda = d.trans_a ? d.m : d.k;
    const Operands in_piece{advance(in.a, entry * d.m * d.k + (d.trans_a ? row : row * d.k), in.bf16),
                            advance(in.b, d.b_broadcast ? 0 : entry * d.k * d.n, in.bf16), in.bf16};
    matmul_on_this_thread(piece, lda, in_piece, c + (entry * d.m + row) * d.n, bias);
  } catch (...) {
#pragma omp critical(tf_matmul_deterministic_error)
    if (!error) error = std::current_exception();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace tf::kernels
