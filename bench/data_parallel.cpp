// Data-parallel training speed: one of the configs of bench/bench_configs.h trained on random
// batches, alone or as one rank of `mpirun -np N`, with the gradient sum of train/grad_sync.h.
// The global batch is the config's B: each of N ranks runs B / N sequences a step. Rank 0 prints
// one JSON line: global tokens/s, seconds per step, and the seconds per step spent waiting for the
// all-reduces after backward (the communication backward did not hide), bytes handed to MPI per
// step, and how many buckets started during backward.
//
//   OMP_NUM_THREADS=2 bench_data_parallel --config A                       # 1 process x 2 threads
//   mpirun -np 2 -x OMP_NUM_THREADS=1 bench_data_parallel --config A       # 2 ranks x 1 thread
//
// bench/data_parallel.py runs the two side by side and prints their ratio.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <span>
#include <vector>

#include "bench/bench_clock.h"
#include "bench/bench_configs.h"
#include "data/batcher.h"
#include "framework/autograd/tape.h"
#include "framework/dist/comm.h"
#include "layers/models/model.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "train/grad_sync.h"

namespace {

using namespace tf;

void run(const bench::BenchConfig& b, int64_t steps, int64_t warmup, bool fixed_order) {
  dist::Comm& comm = dist::Comm::world();
  const int64_t ranks = comm.size();
  TF_CHECK_INPUT(b.arch == "gpt" && b.batch % ranks == 0, "--config ", b.name, ": a GPT whose batch ", b.batch,
                 " the ", ranks, " ranks can share");
  layers::Init init{Rng(1), DType::f32};  // the same initial model on every rank
  std::unique_ptr<layers::LanguageModel> model = layers::build_model(bench::model_config(b, b.seq), init);
  std::vector<optim::ParamRef> refs;
  std::vector<Tensor> params;
  for (const layers::NamedParam& p : model->parameters()) {
    refs.push_back({p.name, p.tensor, p.kind == layers::ParamKind::weight});
    params.push_back(p.tensor);
  }
  optim::AdamW optimizer(refs, {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1});
  train::GradientSync sync(params, comm, {.fixed_order = fixed_order});
  data::CausalBatcher batches(bench::random_stream(b, 7), b.batch / ranks, b.seq, 100 + comm.rank());
  const layers::Context ctx{true, nullptr, nullptr};

  double timed_start = 0, wait_before = 0;
  for (int64_t step = 0; step < warmup + steps; ++step) {
    if (step == warmup) {
      comm.barrier();
      timed_start = bench::now_seconds();
      wait_before = sync.stats().wait_seconds;
    }
    const data::CausalBatch batch = batches.next();
    optimizer.zero_grad();
    sync.begin_micro(0, 1);
    backward(model->loss(batch.inputs, batch.targets, Tensor(), ctx));
    sync.end_micro(0, 1);
    optim::clip_grad_norm(optimizer.params(), 1.0);
    optimizer.step();
  }
  comm.barrier();
  const double seconds = bench::now_seconds() - timed_start;
  const double wait = sync.stats().wait_seconds - wait_before;
  // The last rank to finish backward waits only for the communication backward did not hide; the
  // others wait for it too (their own skew): the least wait is the exposed communication.
  const double worst_wait = static_cast<double>(comm.allreduce_max(static_cast<int64_t>(wait * 1e9))) * 1e-9;
  const double least_wait = static_cast<double>(comm.allreduce_min(static_cast<int64_t>(wait * 1e9))) * 1e-9;
  // The communication alone: a blocking all-reduce of every gradient at once, as if nothing overlapped.
  int64_t count = 0;
  for (const Tensor& p : params) count += p.numel();
  std::vector<float> all(static_cast<size_t>(count), 1.0f);
  comm.barrier();
  const double reduce_start = bench::now_seconds();
  constexpr int kReduces = 10;
  for (int i = 0; i < kReduces; ++i) comm.allreduce_sum(std::span<float>(all));
  const double allreduce_seconds = (bench::now_seconds() - reduce_start) / kReduces;
  if (comm.rank() != 0) return;
  const train::GradientSync::Stats& s = sync.stats();
  const int64_t all_steps = warmup + steps;
  std::printf(
      "{\"config\": \"%s\", \"ranks\": %lld, \"threads\": %d, \"steps\": %lld, \"tokens_per_s\": %.1f, "
      "\"step_s\": %.6f, \"wait_s_per_step\": %.6f, \"least_wait_s_per_step\": %.6f, \"bytes_per_step\": %lld, \"buckets\": %lld, "
      "\"buckets_during_backward\": %.2f, \"allreduce_s\": %.6f, \"fixed_order\": %s}\n",
      b.name.c_str(), (long long)ranks, omp_get_max_threads(), (long long)steps,
      static_cast<double>(steps * b.batch * b.seq) / seconds, seconds / static_cast<double>(steps),
      worst_wait / static_cast<double>(steps), least_wait / static_cast<double>(steps), (long long)(s.bytes_sent / std::max<int64_t>(1, all_steps)),
      (long long)sync.bucket_count(),
      static_cast<double>(s.buckets_during_backward) / static_cast<double>(std::max<int64_t>(1, all_steps)),
      ranks > 1 ? allreduce_seconds : 0.0, fixed_order ? "true" : "false");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Data-parallel training speed (alone, or as a rank of mpirun)"};
  std::string config = "A";
  int64_t steps = 20, warmup = 3;
  bool fixed_order = false;
  app.add_option("--config", config, "A or B (bench/bench_configs.h)")->capture_default_str();
  app.add_option("--steps", steps, "timed steps")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")->capture_default_str();
  app.add_flag("--fixed-order", fixed_order, "gather and add in rank order (train.deterministic)");
  CLI11_PARSE(app, argc, argv);
  try {
    run(bench::preset(config), steps, warmup, fixed_order);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
