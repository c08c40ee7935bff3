// Benchmark: float32 attention forward + backward, the materialised kernel (kernels/cpu/attention.h:
// batched oneDNN matmuls around a (B, H, T_q, T_k) workspace) against the tiled flash kernel
// (kernels/cpu/flash_attention.h), side by side in one process, at the shapes of the shipped
// recipes and at long sequences. It decides flash_attention_preferred's rule.
//
// Method as in bench/micro_matmul.cpp (a 2-core machine shared with others): both contestants are
// warmed up, then interleaved for several rounds, each timing `reps` forward + backward pairs per
// contestant, in an order alternated every round; ratio = the median over rounds of
// t_naive / t_flash within a round (> 1: flash is faster). --clock cpu uses the process CPU clock,
// which needs OMP_NUM_THREADS=1; with more threads use the wall clock. On the shared 2-core machine
// under load, two-thread wall times of small shapes come out in multiples of the 4 ms scheduler tick:
// every parallel region waits for a core (flash has 1 region forward and 3 backward, the
// materialised kernel 3 and 7 counting its oneDNN matmuls), so only the long shapes' figures there
// say much about the kernels.
//
// Scratch is what each kernel allocates for the call: the naive kernel's workspace of one or two
// (B, H, T_q, T_k) float buffers, the flash kernel's per-thread blocks (plus delta and dQ partial
// sums in backward), from flash_attention_scratch_bytes.
//
//   OMP_NUM_THREADS=1 build/bench/bench_attention --clock cpu [--rounds 7] [--seconds 0.2] [--only T=2048]
//   OMP_NUM_THREADS=2 build/bench/bench_attention [--dropout 0.1]
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_clock.h"
#include "framework/kernels/cpu/attention.h"
#include "framework/kernels/cpu/flash_attention.h"
#include "framework/random.h"

using tf::kernels::AttentionDims;
using tf::kernels::AttentionMask;

namespace {

using tf::bench::g_cpu_clock;
using tf::bench::median;
using tf::bench::now_seconds;

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five;
  in >> one >> five;
  return one + " " + five + " (1, 5 min)";
}

struct Config {
  std::string name;
  int64_t batch, heads, seq_len, head_dim;
  bool causal;
  int64_t q_len = 0;  // 0: seq_len; 1: decoding one token after a cached prefix of seq_len - 1
};

// One problem's buffers: inputs, the upstream gradient, and each kernel's outputs.
struct Buffers {
  std::vector<float> q, k, v, dout;
  std::vector<float> out[2], lse[2], dq[2], dk[2], dv[2];  // [naive, flash]
};

std::vector<float> normal(int64_t n, tf::Rng& rng) {
  std::vector<float> x(n);
  for (float& e : x) e = static_cast<float>(rng.normal());
  return x;
}

// Seconds of the forward and of the backward, each per call, over `reps` pairs.
struct Timing {
  double forward = 0, backward = 0;
  double total() const { return forward + backward; }
};

double mib(double bytes) { return bytes / (1 << 20); }

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  double target_seconds = 0.2;  // per contestant per round
  double dropout = 0;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--seconds")) target_seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--clock")) g_cpu_clock = !std::strcmp(argv[i + 1], "cpu");
    else if (!std::strcmp(argv[i], "--dropout")) dropout = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];  // configs whose name contains this
  }
  const int threads = omp_get_max_threads();
  if (g_cpu_clock && threads != 1) {
    std::fprintf(stderr, "--clock cpu needs OMP_NUM_THREADS=1 (with more threads it counts barrier spinning)\n");
    return 2;
  }
  std::printf("threads: %d, %s clock, %d rounds of ~%.0f ms per contestant, dropout %g; load average at start %s\n",
              threads, g_cpu_clock ? "process CPU" : "wall", rounds, target_seconds * 1e3, dropout,
              load_average().c_str());

  // The recipes' shapes (tiny_gpt, gpt_brown_char, gpt_brown_bpe at T = 256, bert_brown_bpe), long
  // sequences, and one decoding step (one query against a cache of 256 keys).
  const std::vector<Config> configs = {
      {"tiny B=4 H=2 T=32 D=16 causal", 4, 2, 32, 16, true},
      {"gpt B=16 H=4 T=128 D=32 causal", 16, 4, 128, 32, true},
      {"gpt B=8 H=6 T=256 D=64 causal", 8, 6, 256, 64, true},
      {"bert B=16 H=4 T=128 D=32", 16, 4, 128, 32, false},
      {"long B=1 H=4 T=2048 D=32 causal", 1, 4, 2048, 32, true},
      {"long B=1 H=4 T=8192 D=32 causal", 1, 4, 8192, 32, true},
      {"decode B=16 H=4 T_q=1 T_k=256 D=32", 16, 4, 256, 32, true, 1},
  };
  std::printf("%-34s | %-21s | %-21s | %-19s | %s\n", "config", "naive ms fwd + bwd", "flash ms fwd + bwd",
              "ratio fwd bwd all", "scratch MiB naive / flash (fwd, bwd)");
  for (const Config& c : configs) {
    if (c.name.find(only) == std::string::npos) continue;
    AttentionDims d{c.batch, c.heads, c.heads, c.q_len ? c.q_len : c.seq_len, c.seq_len, c.head_dim, c.head_dim};
    d.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    d.dropout = dropout;
    d.dropout_seed = 5;
    const AttentionMask mask{c.causal, nullptr};
    tf::Rng rng(1);
    Buffers x;
    const int64_t q_size = d.batch * d.heads * d.q_len * d.head_dim, rows = d.batch * d.heads * d.q_len;
    const int64_t k_size = d.batch * d.heads * d.kv_len * d.head_dim;
    x.q = normal(q_size, rng), x.k = normal(k_size, rng), x.v = normal(k_size, rng), x.dout = normal(q_size, rng);
    for (int s = 0; s < 2; ++s) {
      x.out[s].resize(q_size), x.lse[s].resize(rows), x.dq[s].resize(q_size), x.dk[s].resize(k_size),
          x.dv[s].resize(k_size);
    }
    // One forward + backward of contestant s (0 naive, 1 flash), adding its times to t.
    auto run = [&](int s, Timing& t) {
      const double t0 = now_seconds();
      const tf::kernels::AttentionForwardArgs<float> forward{.dims = d, .mask = mask, .queries = x.q.data(),
                                                             .keys = x.k.data(), .values = x.v.data(),
                                                             .out = x.out[s].data(), .lse = x.lse[s].data()};
      if (s == 0) tf::kernels::attention_forward_fast(forward);
      else tf::kernels::flash_attention_forward(forward);
      const double t1 = now_seconds();
      const tf::kernels::AttentionBackwardArgs<float> backward{
          .dims = d, .mask = mask, .queries = x.q.data(), .keys = x.k.data(), .values = x.v.data(),
          .out = x.out[s].data(), .lse = x.lse[s].data(), .dout = x.dout.data(), .dqueries = x.dq[s].data(),
          .dkeys = x.dk[s].data(), .dvalues = x.dv[s].data()};
      if (s == 0) tf::kernels::attention_backward_fast(backward);
      else tf::kernels::flash_attention_backward(backward);
      t.forward += t1 - t0;
      t.backward += now_seconds() - t1;
    };
    // Warm-up (workspaces, oneDNN primitives, pages) and a repetition count of ~target_seconds.
    int reps = 1;
    for (int s = 0; s < 2; ++s) {
      Timing t;
      run(s, t);
      reps = std::max(reps, static_cast<int>(target_seconds / t.total()));
    }
    // Both must compute the same thing: outputs and gradients are O(1) to O(10), float32 orderings
    // differ by ~1e-5, a wrong mask or block by O(1).
    double worst = 0;
    for (auto* pair : {&x.out, &x.dq, &x.dk, &x.dv})
      for (size_t e = 0; e < (*pair)[0].size(); ++e)
        worst = std::max(worst, std::abs(double((*pair)[0][e]) - (*pair)[1][e]));
    if (!(worst < 1e-2)) {
      std::fprintf(stderr, "%s: the kernels disagree by %g\n", c.name.c_str(), worst);
      return 1;
    }
    std::vector<Timing> times[2];
    std::vector<double> ratio_fwd, ratio_bwd, ratio_all;  // per round: t_naive / t_flash
    for (int r = 0; r < rounds; ++r) {
      for (int i = 0; i < 2; ++i) {
        const int s = (r + i) % 2;
        Timing t;
        for (int n = 0; n < reps; ++n) run(s, t);
        times[s].push_back({t.forward / reps, t.backward / reps});
      }
      const Timing &naive = times[0].back(), &flash = times[1].back();
      ratio_fwd.push_back(naive.forward / flash.forward);
      ratio_bwd.push_back(naive.backward / flash.backward);
      ratio_all.push_back(naive.total() / flash.total());
    }
    auto median_of = [&](int s, double Timing::*part) {
      std::vector<double> v;
      for (const Timing& t : times[s]) v.push_back(t.*part * 1e3);
      return median(v);
    };
    const double naive_fwd = mib(4.0 * rows * d.kv_len), naive_bwd = 2 * naive_fwd;
    std::printf("%-34s | %8.2f + %8.2f   | %8.2f + %8.2f   | %5.2f %5.2f %5.2f   | %7.1f / %.2f, %7.1f / %.2f\n",
                c.name.c_str(), median_of(0, &Timing::forward), median_of(0, &Timing::backward),
                median_of(1, &Timing::forward), median_of(1, &Timing::backward), median(ratio_fwd),
                median(ratio_bwd), median(ratio_all), naive_fwd,
                mib(tf::kernels::flash_attention_scratch_bytes(d, threads, false)), naive_bwd,
                mib(tf::kernels::flash_attention_scratch_bytes(d, threads, true)));
    std::fflush(stdout);
  }
  std::printf("\nratio: median over rounds of t_naive / t_flash (> 1: flash faster); ms: median per call.\n"
              "load average at end %s\n",
              load_average().c_str());
  return 0;
}
