// Benchmark: the seed's complexity table, measured. One sequence mixer's forward + backward at
// B = 1, C = 128, H = 4 (D = 32), causal, for T = 256, 512, ..., against T: wall time and peak
// memory of each kind, and the exponent p of a least-squares fit time ~ T^p (and memory ~ T^p)
// over the lengths from 1024 on, where constant costs no longer dominate.
//
//   softmax     the materialised kernel (kernels/cpu/attention.h): the (B, H, T, T) scores and
//               probabilities in memory, O(T^2 D) time, O(T^2) memory
//   flash       the tiled kernel (kernels/cpu/flash_attention.h): O(T^2 D) time, O(T) memory
//   window      flash with a sliding window of 256 (Mistral's): O(T w D) time
//   bigbird     flash with a window of 192, 32 global tokens and 2 random blocks of 64 per query
//               block (Zaheer et al. 2020): O(T (w + g + r b) D) time, plus the global rows O(g T D)
//   linear      ops::linear_attention (Katharopoulos et al. 2020), chunked: O(T D^2) time and memory
//   differential  ops::differential_attention (Ye et al. 2024): the 4 heads paired into 2 of two maps
//               each, values 2D wide, on the flash kernel: O(T^2 D) time (1.5 times flash's
//               products), O(T) memory
//   mamba       the causal convolution and the selective scan of a Mamba mixer (Gu & Dao 2023) at
//               E = 2C = 256 channels, N = 16, K = 4, through their ops and the tape: O(T E N)
//               time and memory (the projections are left out, as for every kind here)
//
// Each point runs in a child process of its own (fork), so that its peak resident memory is its
// own: ru_maxrss of the child from wait4, minus that of a child which only starts (the program and
// its libraries). Inside the child, one forward + backward warms up (pages, oneDNN primitives), then
// whole forward + backward pairs are timed until at least --seconds have passed; the figure is the
// mean per pair. A kind stops growing T when its last point took over --max-seconds per pair or
// the next point's memory, extrapolated from the last two, would pass --max-gib.
//
//   OMP_NUM_THREADS=2 build/bench/bench_mixer_complexity [--t-max 16384] [--kinds softmax,flash,...]
//       [--max-seconds 60] [--max-gib 8] [--seconds 1] [--plot FILE.png]
//
// Kinds run in turn, not interleaved: a point's child is the only thing this benchmark runs, and
// the exponents are ratios within one kind, so a slow minute on a shared machine moves one point,
// which the fit's residual shows.
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_clock.h"
#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/attention.h"
#include "framework/kernels/cpu/flash_attention.h"
#include "framework/ops/causal_conv.h"
#include "framework/ops/differential_attention.h"
#include "framework/ops/linear_attention.h"
#include "framework/ops/pointwise.h"
#include "framework/ops/selective_scan.h"
#include "framework/random.h"
#include "inspect/plot.h"

namespace {

using tf::bench::now_seconds;
using tf::kernels::AttentionDims;
using tf::kernels::AttentionMask;

constexpr int64_t kBatch = 1, kHeads = 4, kHeadDim = 32;  // C = H D = 128

std::vector<float> normal(int64_t n, tf::Rng& rng) {
  std::vector<float> x(n);
  for (float& e : x) e = static_cast<float>(rng.normal());
  return x;
}

// One forward + backward of a softmax kind through the kernels, on buffers made once.
struct SoftmaxProblem {
  AttentionDims dims;
  AttentionMask mask;
  bool flash;
  std::vector<float> q, k, v, dout, out, lse, dq, dk, dv;
  SoftmaxProblem(int64_t T, bool flash_kernel, tf::kernels::AttentionVariant variant) : flash(flash_kernel) {
    dims = {kBatch, kHeads, kHeads, T, T, kHeadDim, kHeadDim};
    dims.scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
    mask = AttentionMask::of(variant, true);
    tf::Rng rng(1);
    const int64_t n = kBatch * kHeads * T * kHeadDim;
    q = normal(n, rng), k = normal(n, rng), v = normal(n, rng), dout = normal(n, rng);
    out.resize(n), dq.resize(n), dk.resize(n), dv.resize(n), lse.resize(kBatch * kHeads * T);
  }
  void run() {
    const tf::kernels::AttentionForwardArgs<float> f{.dims = dims, .mask = mask, .queries = q.data(),
                                                     .keys = k.data(), .values = v.data(), .out = out.data(),
                                                     .lse = lse.data()};
    const tf::kernels::AttentionBackwardArgs<float> b{
        .dims = dims, .mask = mask, .queries = q.data(), .keys = k.data(), .values = v.data(), .out = out.data(),
        .lse = lse.data(), .dout = dout.data(), .dqueries = dq.data(), .dkeys = dk.data(), .dvalues = dv.data()};
    if (flash) {
      tf::kernels::flash_attention_forward(f);
      tf::kernels::flash_attention_backward(b);
    } else {
      tf::kernels::attention_forward_fast(f);
      tf::kernels::attention_backward_fast(b);
    }
  }
};

// Linear attention through its op and the tape, as a model runs it.
struct LinearProblem {
  tf::Tensor q, k, v, dout;
  explicit LinearProblem(int64_t T) {
    tf::Rng rng(1);
    const tf::Shape s{kBatch, kHeads, T, kHeadDim};
    q = tf::randn(s, rng).set_requires_grad(), k = tf::randn(s, rng).set_requires_grad();
    v = tf::randn(s, rng).set_requires_grad(), dout = tf::randn(s, rng);
  }
  void run() {
    q.zero_grad(), k.zero_grad(), v.zero_grad();
    tf::tape().backward(tf::ops::linear_attention(q, k, v), dout);
  }
};

// Differential attention through its op and the tape: H / 2 heads with two maps each, as a layer
// of H = 4 softmax heads becomes (layers/differential_attention.cpp).
struct DifferentialProblem {
  tf::Tensor q1, k1, q2, k2, v, lambda, dout;
  explicit DifferentialProblem(int64_t T) {
    tf::Rng rng(1);
    const tf::Shape s{kBatch, kHeads / 2, T, kHeadDim}, sv{kBatch, kHeads / 2, T, 2 * kHeadDim};
    for (tf::Tensor* t : {&q1, &k1, &q2, &k2}) *t = tf::randn(s, rng).set_requires_grad();
    v = tf::randn(sv, rng).set_requires_grad(), dout = tf::randn(sv, rng);
    lambda = tf::Tensor::scalar(0.5).set_requires_grad();
  }
  void run() {
    for (tf::Tensor* t : {&q1, &k1, &q2, &k2, &v, &lambda}) t->zero_grad();
    tf::tape().backward(tf::ops::differential_attention(q1, k1, q2, k2, v, lambda, {.causal = true}), dout);
  }
};

// The recurrent core of a Mamba mixer of C = H D channels expanded twice: conv, SiLU, the scan.
struct MambaProblem {
  static constexpr int64_t kChannels = 2 * kHeads * kHeadDim, kState = 16, kTaps = 4;
  tf::Tensor x, taps, conv_bias, delta, a, b, c, d, dout;
  explicit MambaProblem(int64_t T) {
    tf::Rng rng(1);
    const int64_t E = kChannels, N = kState;
    x = tf::randn({kBatch, T, E}, rng).set_requires_grad(), taps = tf::randn({E, kTaps}, rng, 0.5).set_requires_grad();
    conv_bias = tf::randn({E}, rng).set_requires_grad();
    delta = tf::rand_uniform({kBatch, T, E}, rng, 0.001, 0.1).set_requires_grad();
    a = tf::rand_uniform({E, N}, rng, -16, -1).set_requires_grad();
    b = tf::randn({kBatch, T, N}, rng).set_requires_grad(), c = tf::randn({kBatch, T, N}, rng).set_requires_grad();
    d = tf::Tensor::full({E}, 1.0).set_requires_grad(), dout = tf::randn({kBatch, T, E}, rng);
  }
  void run() {
    for (tf::Tensor* t : {&x, &taps, &conv_bias, &delta, &a, &b, &c, &d}) t->zero_grad();
    const tf::Tensor u = tf::ops::silu(tf::ops::causal_conv1d(x, taps, conv_bias));
    tf::tape().backward(tf::ops::selective_scan(u, delta, a, b, c, d), dout);
  }
};

const char* const kKinds[] = {"softmax", "flash", "window", "bigbird", "linear", "differential", "mamba"};

template <class Problem>
std::function<void()> problem(int64_t T) {
  auto p = std::make_shared<Problem>(T);
  return [p] { p->run(); };
}

std::function<void()> make_problem(const std::string& kind, int64_t T) {
  if (kind == "linear") return problem<LinearProblem>(T);
  if (kind == "differential") return problem<DifferentialProblem>(T);
  if (kind == "mamba") return problem<MambaProblem>(T);
  tf::kernels::AttentionVariant variant;
  if (kind == "window") variant.window = 256;
  if (kind == "bigbird") variant.window = 192, variant.global_tokens = 32, variant.random_blocks = 2,
                         variant.sparse_block = 64, variant.random_seed = 7;
  auto p = std::make_shared<SoftmaxProblem>(T, kind != "softmax", variant);
  return [p] { p->run(); };
}

struct Point {
  int64_t seq_len = 0;
  double seconds = 0;   // per forward + backward
  double peak_mib = 0;  // above an idle child's
};

// Runs `body` in a child; returns its printed seconds and its peak RSS in KiB (ru_maxrss).
std::pair<double, double> in_child(const std::function<double()>& body) {
  int fd[2];
  if (pipe(fd) != 0) std::perror("pipe"), std::exit(1);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    const double seconds = body();
    if (write(fd[1], &seconds, sizeof seconds) != sizeof seconds) _exit(1);
    _exit(0);
  }
  close(fd[1]);
  double seconds = -1;
  if (read(fd[0], &seconds, sizeof seconds) != sizeof seconds) seconds = -1;
  close(fd[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) seconds = -1;
  return {seconds, static_cast<double>(usage.ru_maxrss)};
}

// Least-squares slope of log y against log x.
double fit_exponent(const std::vector<Point>& points, double Point::*field) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Point& p : points) {
    if (p.seq_len < 1024 || !(p.*field > 0)) continue;
    const double x = std::log(static_cast<double>(p.seq_len)), y = std::log(p.*field);
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  return n >= 2 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : NAN;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t t_max = 16384;
  double max_seconds = 60, max_gib = 8, seconds = 1;
  std::string kinds_arg = "softmax,flash,window,bigbird,linear,differential,mamba", plot;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--t-max")) t_max = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--max-seconds")) max_seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--max-gib")) max_gib = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--kinds")) kinds_arg = argv[i + 1];
    else if (!std::strcmp(argv[i], "--plot")) plot = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown argument %s (see the header of bench/mixer_complexity.cpp)\n", argv[i]);
      return 2;
    }
  }
  const std::vector<std::string> kinds = split(kinds_arg);
  for (const std::string& kind : kinds)
    if (std::find(std::begin(kKinds), std::end(kKinds), kind) == std::end(kKinds)) {
      std::fprintf(stderr, "unknown kind '%s' (softmax, flash, window, bigbird, linear, differential, mamba)\n",
                   kind.c_str());
      return 2;
    }
  const double idle_kib = in_child([] { return 0.0; }).second;
  std::printf("B=%lld C=%lld H=%lld D=%lld causal, forward + backward, %d threads; idle child %.0f MiB\n",
              static_cast<long long>(kBatch), static_cast<long long>(kHeads * kHeadDim), static_cast<long long>(kHeads),
              static_cast<long long>(kHeadDim), omp_get_max_threads(), idle_kib / 1024);
  std::printf("%-12s %7s %12s %12s\n", "kind", "T", "ms", "peak MiB");
  std::map<std::string, std::vector<Point>> results;
  for (const std::string& kind : kinds) {
    std::vector<Point>& points = results[kind];
    for (int64_t T = 256; T <= t_max; T *= 2) {
      if (points.size() >= 2) {  // extrapolate memory from the last two points
        const Point &a = points[points.size() - 2], &b = points.back();
        const double next = b.peak_mib * std::max(1.0, b.peak_mib / std::max(a.peak_mib, 1.0));
        if (next > max_gib * 1024) {
          std::printf("%-12s %7lld   stopped: about %.0f MiB expected, over %.0f GiB\n", kind.c_str(),
                      static_cast<long long>(T), next, max_gib);
          break;
        }
      }
      const auto [per_pair, peak_kib] = in_child([&] {
        auto run = make_problem(kind, T);
        run();  // warm-up
        int pairs = 0;
        const double start = now_seconds();
        do run(), ++pairs;
        while (now_seconds() - start < seconds);
        return (now_seconds() - start) / pairs;
      });
      if (per_pair < 0) {
        std::printf("%-12s %7lld   failed (the child did not finish)\n", kind.c_str(), static_cast<long long>(T));
        break;
      }
      points.push_back({T, per_pair, std::max(0.0, peak_kib - idle_kib) / 1024});
      std::printf("%-12s %7lld %12.2f %12.1f\n", kind.c_str(), static_cast<long long>(T), per_pair * 1e3,
                  points.back().peak_mib);
      std::fflush(stdout);
      if (per_pair > max_seconds) break;
    }
  }
  std::printf("\nexponent p of a fit ~ T^p over T >= 1024:\n%-12s %6s %6s\n", "kind", "time", "memory");
  for (const std::string& kind : kinds)
    std::printf("%-12s %6.2f %6.2f\n", kind.c_str(), fit_exponent(results[kind], &Point::seconds),
                fit_exponent(results[kind], &Point::peak_mib));
  if (!plot.empty()) {
    // Log-log: both axes in log2, so a slope is the exponent.
    std::vector<tf::inspect::Panel> panels = {{"time per forward + backward", "log2 ms", {}},
                                              {"peak memory above an idle process", "log2 MiB", {}}};
    int colour = 0;
    for (const std::string& kind : kinds) {
      tf::inspect::Series time{kind, {}, {}, colour, true}, memory{kind, {}, {}, colour, true};
      for (const Point& p : results[kind]) {
        time.x.push_back(std::log2(static_cast<double>(p.seq_len)));
        time.y.push_back(std::log2(p.seconds * 1e3));
        memory.x.push_back(std::log2(static_cast<double>(p.seq_len)));
        memory.y.push_back(p.peak_mib > 0 ? std::log2(p.peak_mib) : NAN);
      }
      panels[0].series.push_back(time);
      panels[1].series.push_back(memory);
      ++colour;
    }
    tf::inspect::write_line_chart(plot, "One mixer layer (B=1, C=128, H=4), causal", "log2 T", panels);
    std::printf("plot: %s\n", plot.c_str());
  }
  return 0;
}
