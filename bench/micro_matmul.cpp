// Micro-benchmark: float32 matmul at the shapes of one transformer block, the framework's op path
// (ops::linear / ops::matmul, op overhead included) against raw OpenBLAS and raw oneDNN, in one run.
//
// B = 8 sequences, T = 256 tokens, C = 384 = d_model, H = 6 heads, D = 64 = head_dim:
//   rows = B T = 2048, the qkv projection W is (3C, C) = (1152, 384), attention batches B H = 48.
//
// Method (a 2-core machine shared with others, whose load we cannot see or stop): every contestant
// is warmed up, then the three are interleaved for many short rounds, each timing `reps`
// back-to-back calls per contestant, in an order rotated every round. A slow phase of the machine
// then hits the three contestants of a round alike, so per-round speed ratios are far steadier than
// the throughputs themselves. For each library we take the median over rounds of
// t_library / t_framework, and report ratio = the smaller of the two (the framework against the
// better library) against the 0.95 target. (Taking max(blas, onednn) inside each round instead
// would favour the libraries: the max of two noisy times' speeds is biased upwards.)
//
// --clock cpu times with the process's CPU clock instead of the wall clock. With one thread
// (OMP_NUM_THREADS=1: oneDNN and OpenBLAS then run on the calling thread) it counts only the time
// the work was actually on a core, so the comparison survives other processes' load; with more
// threads it would count spinning at barriers, so it is refused there.
//
//   build/bench/bench_micro_matmul [--rounds 15] [--seconds 0.03] [--clock wall|cpu] [--only bias] [--config A|B]
#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/bench_clock.h"
#include "framework/autograd/tape.h"
#include "framework/kernels/matmul.h"
#include "framework/ops/matmul.h"
#include "framework/random.h"

using tf::Tensor;
using tf::kernels::MatmulDims;

namespace {

using tf::bench::g_cpu_clock;
using tf::bench::median;
using tf::bench::now_seconds;

// --- The raw libraries, called as a user of each library would ------------------------------------

// One cblas_sgemm per batch entry (OpenBLAS has no strided-batch sgemm). With a bias (n), the
// BLAS idiom: copy the bias into every row of C, then C = A B + 1 C.
void raw_blas(const MatmulDims& d, const float* a, const float* b, const float* bias, float* c) {
  const int lda = d.trans_a ? d.m : d.k, ldb = d.trans_b ? d.k : d.n;
  if (bias)
    for (int64_t r = 0; r < d.batch * d.m; ++r) std::memcpy(c + r * d.n, bias, d.n * sizeof(float));
  for (int64_t i = 0; i < d.batch; ++i)
    cblas_sgemm(CblasRowMajor, d.trans_a ? CblasTrans : CblasNoTrans, d.trans_b ? CblasTrans : CblasNoTrans,
                d.m, d.n, d.k, 1.0f, a + i * d.m * d.k, lda, b + (d.b_broadcast ? 0 : i * d.k * d.n), ldb,
                bias ? 1.0f : 0.0f, c + i * d.m * d.n, d.n);
}

// A oneDNN matmul primitive and its memory objects, all created once, outside the timing.
struct RawOnednn {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul primitive;
  std::unordered_map<int, dnnl::memory> args;

  // With a bias (n), oneDNN's own bias argument, broadcast over batch and rows.
  RawOnednn(const MatmulDims& d, const float* a, const float* b, const float* bias, float* c) {
    using dims = dnnl::memory::dims;
    const auto f32 = dnnl::memory::data_type::f32;
    // (batch, m, k) . (batch, k, n); a transposed operand is described by its strides.
    const dnnl::memory::desc a_md({d.batch, d.m, d.k}, f32,
                                  d.trans_a ? dims{d.m * d.k, 1, d.m} : dims{d.m * d.k, d.k, 1});
    const dnnl::memory::desc b_md({d.b_broadcast ? 1 : d.batch, d.k, d.n}, f32,
                                  d.trans_b ? dims{d.k * d.n, 1, d.k} : dims{d.k * d.n, d.n, 1});
    const dnnl::memory::desc c_md({d.batch, d.m, d.n}, f32, dims{d.m * d.n, d.n, 1});
    const dnnl::memory::desc bias_md({1, 1, d.n}, f32, dims{d.n, d.n, 1});
    const auto desc = bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md);
    primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, engine));
    args = {{DNNL_ARG_SRC, dnnl::memory(a_md, engine, const_cast<float*>(a))},
            {DNNL_ARG_WEIGHTS, dnnl::memory(b_md, engine, const_cast<float*>(b))},
            {DNNL_ARG_DST, dnnl::memory(c_md, engine, c)}};
    if (bias) args[DNNL_ARG_BIAS] = dnnl::memory(bias_md, engine, const_cast<float*>(bias));
  }
  void run() {
    primitive.execute(stream, args);
    stream.wait();
  }
};

// --- Timing ---------------------------------------------------------------------------------------

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five;
  in >> one >> five;
  return one + " " + five + " (1, 5 min)";
}

long minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

double seconds_per_call(const std::function<void()>& f, int reps) {
  const double start = now_seconds();
  for (int i = 0; i < reps; ++i) f();
  return (now_seconds() - start) / reps;
}

struct Contestant {
  const char* name;
  std::function<void()> run;
  std::vector<double> seconds;  // per call, one entry per round
  double best() const { return *std::min_element(seconds.begin(), seconds.end()); }
};

struct Case {
  std::string name, shapes;
  MatmulDims dims;
  bool linear = false;  // through ops::linear (x, W stored (out, in)) rather than ops::matmul
  bool bias = false;    // linear with a bias (out)
  double gflop() const { return 2.0 * dims.batch * dims.m * dims.n * dims.k * 1e-9; }
};

// Peak float32 throughput: threads x clock x flops per cycle (two FMA pipes of 8 (AVX2) or 16
// (AVX-512) lanes, x2 for multiply + add). The clock is the nominal one /proc/cpuinfo shows; boost
// clocks can exceed it, so this is an estimate, not a bound.
double peak_gflops(int threads, double* ghz, int* flops_per_cycle) {
  *ghz = 0;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("cpu MHz", 0) == 0) {
      *ghz = std::atof(line.substr(line.find(':') + 1).c_str()) / 1000.0;
      break;
    }
  __builtin_cpu_init();
  *flops_per_cycle = __builtin_cpu_supports("avx512f") ? 64 : __builtin_cpu_supports("fma") ? 32 : 16;
  return threads * *ghz * *flops_per_cycle;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15;
  double target_seconds = 0.03;  // per contestant per round
  std::string only;
  std::string config = "B";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--seconds")) target_seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--clock")) g_cpu_clock = !std::strcmp(argv[i + 1], "cpu");
    else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];  // cases whose name contains this
    else if (!std::strcmp(argv[i], "--config")) config = argv[i + 1];  // the model configs: A or B
  }
  if (g_cpu_clock && omp_get_max_threads() != 1) {
    std::fprintf(stderr, "--clock cpu needs OMP_NUM_THREADS=1 (with more threads it counts barrier spinning)\n");
    return 2;
  }

  const int threads = omp_get_max_threads();
  double ghz;
  int fpc;
  const double peak = peak_gflops(threads, &ghz, &fpc);
  const dnnl_version_t* v = dnnl::version();
  const char* omp_env = std::getenv("OMP_NUM_THREADS");
  std::printf("threads: %d (OMP_NUM_THREADS=%s), OpenBLAS threads %d (%s), oneDNN %d.%d.%d\n", threads,
              omp_env ? omp_env : "unset", openblas_get_num_threads(), openblas_get_config(), v->major, v->minor,
              v->patch);
  std::printf("peak fp32 estimate: %d threads x %.2f GHz x %d flop/cycle = %.0f GFLOP/s\n", threads, ghz, fpc, peak);
  std::printf("method: warm-up, then %d rounds interleaving the three contestants, ~%.0f ms each per round, "
              "%s clock; load average at start %s\n",
              rounds, target_seconds * 1e3, g_cpu_clock ? "process CPU" : "wall", load_average().c_str());

  // Config B: B T = 2048 rows, C = 384, 3C = 1152, B H = 48, T = 256, D = 64.
  // Config A: B T = 2048 rows, C = 128, 3C = 384, B H = 64, T = 128, D = 32.
  const bool a = config == "A";
  const int64_t rows = 2048, C = a ? 128 : 384, C3 = 3 * C, BH = a ? 64 : 48, T = a ? 128 : 256, D = a ? 32 : 64;
  auto shape = [](const char* pattern, auto... dims) {
    char buf[64];
    std::snprintf(buf, sizeof buf, pattern, static_cast<long long>(dims)...);
    return std::string(buf);
  };
  std::vector<Case> cases = {
      {"linear forward  y = x W^T", shape("(%lld, %lld) . (%lld, %lld)^T", rows, C, C3, C),
       {1, rows, C3, C, false, true, false, false}, true},
      {"linear forward + bias", shape("(%lld, %lld) . (%lld, %lld)^T + b", rows, C, C3, C),
       {1, rows, C3, C, false, true, false, false}, true, true},
      {"linear dx = dy W", shape("(%lld, %lld) . (%lld, %lld)", rows, C3, C3, C), {1, rows, C, C3, false, false, false, false}},
      {"linear dW = dy^T x", shape("(%lld, %lld)^T . (%lld, %lld)", rows, C3, rows, C),
       {1, C3, C, rows, true, false, false, false}},
      {"scores = q k^T", shape("%lld x (%lld, %lld) . (%lld, %lld)^T", BH, T, D, T, D), {BH, T, T, D, false, true, false, false}},
      {"out = probs v", shape("%lld x (%lld, %lld) . (%lld, %lld)", BH, T, T, T, D), {BH, T, D, T, false, false, false, false}},
  };

  tf::NoGradGuard no_grad;  // the framework path measured as inference: no tape
  tf::Rng rng(1);
  std::printf("%-26s %-32s %5s | %-11s %-11s %-11s | %5s %6s %-6s %6s  %s\n", "case", "shapes", "GFLOP",
              "framework", "blas", "onednn", "ratio", "spread", "vs", "faults", "target 0.95");
  std::printf("%-26s %-32s %5s | %-11s %-11s %-11s | %5s %6s %-6s %6s\n", "", "", "", "med (best)", "med (best)",
              "med (best)", "", "", "", "/call");
  bool all_met = true;
  for (const Case& c : cases) {
    if (c.name.find(only) == std::string::npos) continue;
    const MatmulDims& d = c.dims;
    // Operands in the layout the framework call expects; the raw calls read the same buffers.
    const tf::Shape a_shape = d.batch > 1 ? tf::Shape{d.batch, d.trans_a ? d.k : d.m, d.trans_a ? d.m : d.k}
                                          : tf::Shape{d.trans_a ? d.k : d.m, d.trans_a ? d.m : d.k};
    const tf::Shape b_shape = d.batch > 1 ? tf::Shape{d.batch, d.trans_b ? d.n : d.k, d.trans_b ? d.k : d.n}
                                          : tf::Shape{d.trans_b ? d.n : d.k, d.trans_b ? d.k : d.n};
    const Tensor a = tf::randn(a_shape, rng), b = tf::randn(b_shape, rng);
    const Tensor bias = c.bias ? tf::randn({d.n}, rng) : Tensor();
    const float* bias_data = c.bias ? bias.data<float>() : nullptr;
    const Tensor c_blas = Tensor::zeros({d.batch * d.m * d.n}), c_onednn = Tensor::zeros({d.batch * d.m * d.n});
    RawOnednn onednn(d, a.data<float>(), b.data<float>(), bias_data, c_onednn.data<float>());

    std::vector<Contestant> contestants = {
        {"framework",
         [&] {
           const Tensor y = c.linear ? tf::ops::linear(a, b, bias) : tf::ops::matmul(a, b, d.trans_a, d.trans_b);
         },
         {}},
        {"blas", [&] { raw_blas(d, a.data<float>(), b.data<float>(), bias_data, c_blas.data<float>()); }, {}},
        {"onednn", [&] { onednn.run(); }, {}},
    };
    // Warm-up (first-touch pages, primitive creation in the framework's cache, thread pools), and
    // a repetition count giving ~target_seconds per contestant per round.
    int reps = 1;
    for (Contestant& k : contestants) {
      k.run();
      const double s = seconds_per_call(k.run, 2);
      reps = std::max(reps, static_cast<int>(target_seconds / s));
    }
    // The three must compute the same product: entries are sums of k normal(0, 1) products, of size
    // ~sqrt(k) <= 45, where float32 orderings differ by ~1e-4 and a wrong layout by ~45.
    {
      const Tensor y = c.linear ? tf::ops::linear(a, b, bias) : tf::ops::matmul(a, b, d.trans_a, d.trans_b);
      double worst = 0;
      for (int64_t i = 0; i < y.numel(); ++i)
        worst = std::max({worst, std::abs(double(y.data<float>()[i]) - c_blas.data<float>()[i]),
                          std::abs(double(y.data<float>()[i]) - c_onednn.data<float>()[i])});
      if (worst > 1e-2) {
        std::fprintf(stderr, "%s: the contestants disagree by %g\n", c.name.c_str(), worst);
        return 1;
      }
    }
    std::vector<double> vs_blas, vs_onednn;  // per round: t_library / t_framework
    for (int r = 0; r < rounds; ++r) {
      for (int i = 0; i < 3; ++i) {
        Contestant& k = contestants[(r + i) % 3];
        k.seconds.push_back(seconds_per_call(k.run, reps));
      }
      vs_blas.push_back(contestants[1].seconds.back() / contestants[0].seconds.back());
      vs_onednn.push_back(contestants[2].seconds.back() / contestants[0].seconds.back());
    }
    // Page faults per framework call: a fresh output the allocator takes from the kernel would be
    // faulted in page by page inside the timing (raw contestants write into buffers made once).
    const long faults_before = minor_page_faults();
    for (int i = 0; i < 3; ++i) contestants[0].run();
    const double faults = (minor_page_faults() - faults_before) / 3.0;

    auto gflops = [&](double s) { return c.gflop() / s; };
    const bool blas_better = median(vs_blas) < median(vs_onednn);
    const std::vector<double>& ratios = blas_better ? vs_blas : vs_onednn;
    const double ratio = median(ratios);
    const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
    all_met = all_met && ratio >= 0.95;
    std::printf("%-26s %-32s %5.3f |", c.name.c_str(), c.shapes.c_str(), c.gflop());
    for (const Contestant& k : contestants)
      std::printf(" %5.1f (%3.0f)", gflops(median(k.seconds)), gflops(k.best()));
    std::printf(" | %5.3f %6.2f %-6s %6.0f  %s\n", ratio, *hi - *lo, blas_better ? "blas" : "onednn", faults,
                ratio >= 0.95 ? "met" : "not met");
    std::fflush(stdout);
  }
  std::printf("\nratio: framework speed / the better library's, the median over rounds of t_library / t_framework\n"
              "within a round; spread: max - min of that ratio over rounds; vs: the better library;\n"
              "GFLOP/s: median (best) round of each contestant.\n");
  std::printf("overall: %s; load average at end %s\n", all_met ? "met" : "not met", load_average().c_str());

  // Fixed cost per call, where the arithmetic is negligible: (8, 8) . (8, 8). The kernel wrapper
  // adds the cache lookup, three dnnl::memory objects and a stream wait to the raw execute; the op
  // adds shape checks and the output tensor's allocation. Compare with the milliseconds above.
  {
    const MatmulDims d{1, 8, 8, 8, false, false, false, false};
    const Tensor a = tf::randn({8, 8}, rng), b = tf::randn({8, 8}, rng), c = Tensor::zeros({8, 8});
    RawOnednn onednn(d, a.data<float>(), b.data<float>(), nullptr, c.data<float>());
    const std::function<void()> calls[] = {
        [&] { onednn.run(); },
        [&] { tf::kernels::matmul_onednn(d, a.data<float>(), b.data<float>(), c.data<float>(), nullptr); },
        [&] { const Tensor y = tf::ops::matmul(a, b); }};
    std::vector<double> us[3];
    for (const auto& f : calls) seconds_per_call(f, 1000);  // warm-up
    for (int r = 0; r < rounds; ++r)
      for (int i = 0; i < 3; ++i) us[i].push_back(seconds_per_call(calls[i], 2000) * 1e6);
    std::printf("\nper-call cost at (8, 8) . (8, 8), median us: raw oneDNN execute+wait %.2f, "
                "kernels::matmul_onednn %.2f, ops::matmul %.2f\n",
                median(us[0]), median(us[1]), median(us[2]));
  }
  return 0;
}
