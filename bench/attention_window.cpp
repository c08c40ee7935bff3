// Benchmark: sliding-window attention against full causal attention, both on the tiled flash kernel
// (kernels/cpu/flash_attention.h), forward + backward, side by side in one process. A window of w
// keys per query lets the kernel skip every key block outside the band, so the work falls from
// ~T^2 / 2 score entries to ~T w: at T = 8192, w = 256 that is 1/16 of the entries, and the target
// is that the window costs at most 1/8 of full attention's time. Scratch (what the kernel allocates)
// is printed at several T for both, to show it grows linearly in T.
//
// Method as in bench/attention.cpp: both contestants warmed up, then interleaved for several rounds
// in an order alternated every round; ratio = the median over rounds of t_full / t_window.
//
//   build/bench/bench_attention_window [--seq 8192] [--window 256] [--heads 4] [--head-dim 32] [--rounds 5]
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/bench_clock.h"
#include "framework/kernels/cpu/flash_attention.h"
#include "framework/random.h"

using tf::kernels::AttentionDims;
using tf::kernels::AttentionMask;

namespace {

std::vector<float> normal(int64_t n, tf::Rng& rng) {
  std::vector<float> x(n);
  for (float& e : x) e = static_cast<float>(rng.normal());
  return x;
}

double mib(double bytes) { return bytes / (1 << 20); }

}  // namespace

int main(int argc, char** argv) {
  int64_t T = 8192, w = 256, H = 4, D = 32;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seq")) T = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--window")) w = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--heads")) H = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--head-dim")) D = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: bench_attention_window [--seq T] [--window w] [--heads H] [--head-dim D] [--rounds R]\n");
      return 2;
    }
  }
  if (T < 1 || w < 1 || H < 1 || D < 1) {
    std::fprintf(stderr, "bench_attention_window: --seq, --window, --heads and --head-dim must be positive\n");
    return 2;
  }
  const int threads = omp_get_max_threads();
  AttentionDims d{1, H, H, T, T, D, D};
  d.scale = 1.0 / std::sqrt(static_cast<double>(D));
  const AttentionMask full{.causal = true}, window = AttentionMask::of({.window = w}, true);
  tf::Rng rng(1);
  const int64_t size = H * T * D;
  const std::vector<float> q = normal(size, rng), k = normal(size, rng), v = normal(size, rng), dout = normal(size, rng);
  std::vector<float> out(size), lse(H * T), dq(size), dk(size), dv(size);

  auto run = [&](const AttentionMask& mask) {  // seconds of one forward + backward
    const double t0 = tf::bench::now_seconds();
    tf::kernels::flash_attention_forward({.dims = d, .mask = mask, .queries = q.data(), .keys = k.data(),
                                          .values = v.data(), .out = out.data(), .lse = lse.data()});
    tf::kernels::flash_attention_backward({.dims = d, .mask = mask, .queries = q.data(), .keys = k.data(),
                                           .values = v.data(), .out = out.data(), .lse = lse.data(),
                                           .dout = dout.data(), .dqueries = dq.data(), .dkeys = dk.data(),
                                           .dvalues = dv.data()});
    return tf::bench::now_seconds() - t0;
  };
  run(full), run(window);  // warm-up: pages, per-thread blocks
  std::vector<double> t_full, t_window, ratio;
  for (int r = 0; r < rounds; ++r) {
    double a = 0, b = 0;
    if (r % 2 == 0) a = run(full), b = run(window);
    else b = run(window), a = run(full);
    t_full.push_back(a * 1e3), t_window.push_back(b * 1e3), ratio.push_back(a / b);
  }
  const double entries_full = 0.5 * static_cast<double>(T) * (T + 1), entries_window =
      static_cast<double>(std::min(w, T)) * T - 0.5 * static_cast<double>(std::min(w, T)) * (std::min(w, T) - 1);
  std::printf("threads %d; flash attention forward + backward, B=1 H=%lld T=%lld D=%lld, %d rounds\n", threads,
              static_cast<long long>(H), static_cast<long long>(T), static_cast<long long>(D), rounds);
  std::printf("full causal        %9.2f ms  (%.3g visible score entries per head)\n", tf::bench::median(t_full),
              entries_full);
  std::printf("window w=%-6lld    %9.2f ms  (%.3g; %.1fx fewer)\n", static_cast<long long>(w),
              tf::bench::median(t_window), entries_window, entries_full / entries_window);
  const double speedup = tf::bench::median(ratio);
  std::printf("full / window      %9.2f x   (median of same-round ratios; target >= 8: %s)\n", speedup,
              speedup >= 8 ? "met" : "not met");
  std::printf("\nscratch MiB (forward, backward), flash kernel, %d threads:\n", threads);
  for (int64_t t = T / 4; t <= T; t *= 2) {
    AttentionDims dt = d;
    dt.q_len = dt.kv_len = t;
    std::printf("  T=%-6lld %8.2f, %8.2f   (a materialised score matrix: %.0f MiB)\n", static_cast<long long>(t),
                mib(tf::kernels::flash_attention_scratch_bytes(dt, threads, false)),
                mib(tf::kernels::flash_attention_scratch_bytes(dt, threads, true)), mib(4.0 * H * t * t));
  }
  return 0;
}
