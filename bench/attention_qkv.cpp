// Benchmark: self-attention on the fused QKV projection's output, forward + backward through the
// tape, as ops::attention_qkv (the tiled kernel reads the heads in place and writes the merged
// output: kernels::FlashLayout) against the composition it replaces, split_heads + attention +
// merge_heads (two copies forward, two backward), side by side in one process.
//
// B = batch, T = time, H = query heads, G = key/value heads, D = head size.
// Method as bench/attention.cpp: both warmed up, then interleaved for several rounds in an order
// alternated every round; ratio = median over rounds of t_composition / t_qkv (> 1: attention_qkv
// faster). --clock cpu uses the process CPU clock (with OMP_NUM_THREADS=1).
//
//   build/bench/bench_attention_qkv [--rounds 9] [--seconds 0.3] [--clock cpu]
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/bench_clock.h"
#include "framework/autograd/tape.h"
#include "framework/ops/attention.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/heads.h"
#include "framework/ops/reduce.h"
#include "framework/random.h"

namespace {

using tf::Tensor;
using tf::bench::median;
using tf::bench::now_seconds;

struct Shape {
  std::string name;
  int64_t batch, seq, heads, kv_heads, head_dim;
  bool causal;
};

// The attention of bench_train_step's configs A and B and of the 5-minute recipes.
const std::vector<Shape> kShapes = {
    {"config A: B16 T128 H4 G4 D32 causal", 16, 128, 4, 4, 32, true},
    {"config B: B8 T256 H6 G6 D64 causal", 8, 256, 6, 6, 64, true},
    {"gpt_brown_5min: B16 T128 H4 G1 D32 causal", 16, 128, 4, 1, 32, true},
    {"config C (BERT): B16 T128 H4 G4 D32", 16, 128, 4, 4, 32, false},
};

// One forward + backward; loss = sum(out * w), so dout = w.
double step(const Shape& s, Tensor& qkv, const Tensor& w, bool fused) {
  const double t0 = now_seconds();
  const tf::ops::AttentionOptions options{.causal = s.causal};
  Tensor out;
  if (fused) {
    out = tf::ops::attention_qkv(qkv, s.heads, s.kv_heads, options);
  } else {
    const auto parts = tf::ops::split_heads(qkv, {s.heads, s.kv_heads, s.kv_heads}, s.head_dim);
    out = tf::ops::merge_heads(tf::ops::attention(parts[0], parts[1], parts[2], options));
  }
  tf::backward(tf::ops::sum(tf::ops::mul(out, w)));
  qkv.zero_grad();
  return now_seconds() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"attention_qkv against split_heads + attention + merge_heads, forward + backward"};
  int rounds = 9;
  double seconds = 0.3;
  std::string clock = "wall";
  app.add_option("--rounds", rounds, "interleaved rounds")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "time per contestant per round")->check(CLI::PositiveNumber);
  app.add_option("--clock", clock, "wall or cpu")->check(CLI::IsMember({"wall", "cpu"}));
  CLI11_PARSE(app, argc, argv);
  tf::bench::g_cpu_clock = clock == "cpu";
  std::printf("%-44s | %12s | %12s | %6s\n", "shape", "composed ms", "qkv ms", "ratio");
  for (const Shape& s : kShapes) {
    tf::Rng rng(1);
    Tensor qkv = tf::randn({s.batch, s.seq, (s.heads + 2 * s.kv_heads) * s.head_dim}, rng).set_requires_grad();
    const Tensor w = tf::randn({s.batch, s.seq, s.heads * s.head_dim}, rng);
    const double once = std::max(step(s, qkv, w, false), step(s, qkv, w, true));  // warm-up
    const int reps = std::max(1, static_cast<int>(seconds / once));
    std::vector<double> times[2], ratios;
    for (int r = 0; r < rounds; ++r) {
      for (int i = 0; i < 2; ++i) {
        const int fused = (r + i) % 2;
        double t = 0;
        for (int n = 0; n < reps; ++n) t += step(s, qkv, w, fused == 1);
        times[fused].push_back(t / reps);
      }
      ratios.push_back(times[0].back() / times[1].back());
    }
    std::printf("%-44s | %12.3f | %12.3f | %6.3f\n", s.name.c_str(), median(times[0]) * 1e3, median(times[1]) * 1e3,
                median(ratios));
    std::fflush(stdout);
  }
  std::printf("\nratio: median over rounds of t_composed / t_qkv (> 1: attention_qkv faster); ms per forward + backward.\n");
  return 0;
}
