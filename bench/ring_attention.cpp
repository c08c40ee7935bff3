// Ring attention's speed and balance: forward + backward of ops::ring_attention on one sequence split
// across the ranks of mpirun, against ops::attention (the flash kernel) on the whole sequence in one
// process. float32, B = 1, causal unless --bidirectional.
//
//   mpirun -np 2 -x OMP_NUM_THREADS=1 bench_ring_attention --seq 8192 --layout zigzag
//   OMP_NUM_THREADS=2 bench_ring_attention --seq 8192          # one process: ops::attention
//
// Rank 0 prints one JSON line: milliseconds per forward + backward (median of --repeats), and per
// rank the seconds in kernels and the seconds waiting for blocks (framework/ops/ring_attention.h,
// RingAttentionStats): a causal mask on contiguous chunks leaves the first ranks waiting for the
// last. bench/ring_attention.py runs the layouts and the single process side by side.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "bench/bench_clock.h"
#include "framework/autograd/tape.h"
#include "framework/dist/comm.h"
#include "framework/ops/attention.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"
#include "framework/ops/ring_attention.h"
#include "framework/random.h"

namespace {

using namespace tf;

struct Options {
  int64_t seq = 4096, heads = 4, head_dim = 32, repeats = 5;
  std::string layout = "zigzag";
  bool bidirectional = false;
};

void run(const Options& o) {
  dist::Comm& comm = dist::Comm::world();
  const bool ring = comm.mpi();
  const ops::RingLayout layout = o.layout == "contiguous" ? ops::RingLayout::contiguous : ops::RingLayout::zigzag;
  const int64_t local = ring ? o.seq / comm.size() : o.seq;
  if (ring) ops::ring_positions(layout, comm.rank(), comm.size(), o.seq);  // checks the length
  Rng rng(3 + static_cast<uint64_t>(comm.rank()));
  const Tensor q0 = randn({1, o.heads, local, o.head_dim}, rng, 1.0), k0 = randn({1, o.heads, local, o.head_dim}, rng, 1.0),
               v0 = randn({1, o.heads, local, o.head_dim}, rng, 1.0), w = randn({1, o.heads, local, o.head_dim}, rng, 1.0);
  std::vector<double> times;
  for (int64_t r = 0; r <= o.repeats; ++r) {  // the first is warm-up
    if (r == 1) ops::ring_attention_stats() = {};
    Tensor q = q0.clone().set_requires_grad(), k = k0.clone().set_requires_grad(), v = v0.clone().set_requires_grad();
    comm.barrier();
    const double start = bench::now_seconds();
    const Tensor out = ring ? ops::ring_attention(q, k, v, {.causal = !o.bidirectional, .layout = layout}, comm)
                            : ops::attention(q, k, v, {.causal = !o.bidirectional});
    backward(ops::sum(ops::mul(out, w)));
    comm.barrier();
    if (r > 0) times.push_back(bench::now_seconds() - start);
  }
  // Every rank's kernel and waiting seconds per pass, gathered on all.
  const ops::RingAttentionStats s = ops::ring_attention_stats();
  std::vector<double> per_rank(2 * static_cast<size_t>(comm.size()), 0.0);
  per_rank[2 * comm.rank()] = s.compute_seconds / static_cast<double>(o.repeats);
  per_rank[2 * comm.rank() + 1] = s.wait_seconds / static_cast<double>(o.repeats);
  comm.allreduce_sum(std::span<double>(per_rank));
  if (comm.rank() != 0) return;
  std::string ranks_json;
  for (int r = 0; r < comm.size(); ++r)
    ranks_json += (r ? ", " : "") + std::string("{\"compute_s\": ") + std::to_string(per_rank[2 * r]) +
                  ", \"wait_s\": " + std::to_string(per_rank[2 * r + 1]) + "}";
  std::printf(
      "{\"mode\": \"%s\", \"layout\": \"%s\", \"causal\": %s, \"seq\": %lld, \"heads\": %lld, \"head_dim\": %lld, "
      "\"ranks\": %d, \"threads\": %d, \"ms\": %.3f, \"bytes_sent_per_pass\": %lld, \"per_rank\": [%s]}\n",
      ring ? "ring" : "single", ring ? o.layout.c_str() : "-", o.bidirectional ? "false" : "true", (long long)o.seq,
      (long long)o.heads, (long long)o.head_dim, comm.size(), omp_get_max_threads(), 1e3 * bench::median(times),
      (long long)(s.bytes_sent / o.repeats), ring ? ranks_json.c_str() : "");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Ring attention against single-process attention, forward + backward"};
  Options o;
  app.add_option("--seq", o.seq, "the whole sequence T")->capture_default_str();
  app.add_option("--heads", o.heads, "H")->capture_default_str();
  app.add_option("--head-dim", o.head_dim, "D")->capture_default_str();
  app.add_option("--repeats", o.repeats, "timed passes (median)")->capture_default_str();
  app.add_option("--layout", o.layout, "zigzag or contiguous")->check(CLI::IsMember({"zigzag", "contiguous"}));
  app.add_flag("--bidirectional", o.bidirectional, "no causal mask");
  CLI11_PARSE(app, argc, argv);
  try {
    run(o);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
