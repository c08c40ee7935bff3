// Training-step benchmark: tokens/s, peak RSS and FLOPs per token of one model trained on random
// token batches, printed as one JSON line; also the sgemm peak (the MFU denominator) and decode speed.
// bench/compare_torch.py runs it beside bench/torch_twin.py, which builds the same models in PyTorch.
//
// B = batch, T = seq_len, C = d_model, L = layers, V = vocabulary (256).
//
//   bench_train_step --config B --steps 20 --warmup 3           # train: one JSON line
//   bench_train_step --arch bert --d-model 64 --layers 2 --heads 2 --seq 32 --batch 4
//   bench_train_step --sgemm                                    # best sgemm GFLOP/s, oneDNN and OpenBLAS
//   bench_train_step --decode [--kv-cache] --decode-tokens 256  # config B, batch 1, greedy
//   bench_train_step --config B --profile cpu                   # and seconds per op on stderr
//   bench_train_step --config A --vs-deterministic 5            # train.deterministic's cost
//   bench_train_step --config B --vs-recompute 5                # train.recompute blocks' cost
//   bench_train_step --config A --thread-split ops              # threads within each op, not by rows
//   bench_train_step --config A --vs-bf16 5                     # train.matmul_precision bf16 against fp32
//
// Configs A..E: bench/bench_configs.h.
//
// FLOPs per token: train::training_flops_per_token (train/plan.h), the one definition the dry run
// and docs/performance.md use too: 6 N + 12 L C T, N = parameters that are not embedding tables.
#include <omp.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "bench/bench_configs.h"
#include "data/batcher.h"
#include "framework/autograd/profile.h"
#include "framework/autograd/tape.h"
#include "framework/error.h"
#include "framework/kernels/matmul.h"
#include "layers/models/gpt.h"
#include "layers/models/model.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "train/plan.h"
#include "train/recipe.h"
#include "train/sample.h"
#include "train/thread_split.h"
#include "train/threads.h"
#include "train/trainer.h"

namespace {

using namespace tf;
using Clock = std::chrono::steady_clock;

using bench::BenchConfig;
using bench::model_config;
using bench::preset;
using bench::kVocab;
using bench::kPad, bench::kMask, bench::kCls, bench::kSep, bench::kFirstOrdinary;

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // Linux reports kilobytes
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

using bench::random_stream;

// Batches as the trainer gets them: causal windows for GPT, the masked-LM batcher for BERT
// (targets = original id at 15% of positions, kIgnoreIndex elsewhere; attention mask all ones).
struct RandomBatches {
  struct Batch {
    Tensor inputs, targets, key_padding;  // (B, T) i32, (B, T) i32, (B, T) f32 or undefined
  };
  std::unique_ptr<data::CausalBatcher> causal;
  std::unique_ptr<data::MaskedLmBatcher> masked;

  RandomBatches(const BenchConfig& b, uint64_t seed) {
    std::vector<int32_t> ids = random_stream(b, seed);
    if (b.arch == "bert") {
      data::MaskedLmTokens tokens;
      tokens.pad = kPad, tokens.mask = kMask, tokens.cls = kCls, tokens.sep = kSep;
      tokens.vocab_size = kVocab;
      masked = std::make_unique<data::MaskedLmBatcher>(std::move(ids), b.batch, b.seq, seed + 1, tokens, data::MaskingOptions{});
    } else {
      causal = std::make_unique<data::CausalBatcher>(std::move(ids), b.batch, b.seq, seed + 1);
    }
  }
  Batch next() {
    if (masked) {
      data::MaskedLmBatch m = masked->next();
      return {m.inputs, m.targets, m.attention_mask};
    }
    data::CausalBatch c = causal->next();
    return {c.inputs, c.targets, Tensor()};
  }
};

struct TrainOptions {
  int64_t steps = 20, warmup = 3;
  bool repeat_batch = false;  // train on the first batch again and again (the loss must fall)
  uint64_t seed = 1;
  std::string profile;        // "", "wall" or "cpu": the timed steps' per-op table on stderr
  bool deterministic = false; // train.deterministic's kernels (kernels::DeterministicScope)
  bool recompute = false;     // train.recompute blocks (Note [recomputed blocks] in layers/block.cpp)
  std::string thread_split = "auto";  // train.thread_split (Note [batch-split threads])
  bool bf16 = false;          // train.matmul_precision: bf16 (Note [bfloat16 matmuls] in kernels/onednn.cpp)
};

// Into how many parts of rows the threads split a step, by the trainer's own rule.
int64_t split_parts(const BenchConfig& b, const TrainOptions& o, int threads) {
  train::Recipe recipe;
  recipe.train.batch_size = b.batch;
  recipe.train.deterministic = o.deterministic;
  recipe.train.thread_split = o.thread_split;
  return train::batch_split_parts(recipe, threads, 1);
}

// Warmup steps, then `steps` timed steps of the trainer's step: forward, loss, backward, clip to
// norm 1, AdamW (lr 1e-3, betas 0.9/0.99, weight decay 0.1 on weights only: the recipe defaults).
double run_train(const BenchConfig& b, const TrainOptions& o, int threads) {
  const kernels::DeterministicScope deterministic(o.deterministic);
  const kernels::Bf16MatmulScope bf16(o.bf16);  // clipping and AdamW have no matmuls: as the trainer's step
  layers::Init init{Rng(o.seed), DType::f32};
  const layers::ModelConfig mc = model_config(b, b.seq);
  std::unique_ptr<layers::LanguageModel> model = layers::build_model(mc, init);
  int64_t params = 0;
  std::vector<optim::ParamRef> refs;
  const layers::ParamList named = model->parameters();
  std::vector<Tensor> tensors;
  for (const layers::NamedParam& p : named) {
    params += p.tensor.numel();
    refs.push_back({p.name, p.tensor, p.kind == layers::ParamKind::weight});
    tensors.push_back(p.tensor);
  }
  const int64_t parts = split_parts(b, o, threads);
  std::unique_ptr<train::BatchSplit> split;
  if (parts > 1) split = std::make_unique<train::BatchSplit>(tensors, parts);
  optim::AdamW optimizer(refs, {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1});
  const int64_t non_embedding = train::non_embedding_parameters(named);
  const double flops_per_token = train::training_flops_per_token(named, mc, b.seq);  // the one definition

  RandomBatches batches(b, o.seed + 100);
  const RandomBatches::Batch first = batches.next();
  // Training, dropout 0: no generator needed.
  const layers::Context ctx{.training = true, .recompute = o.recompute};
  std::vector<double> step_seconds, losses;
  Clock::time_point timed_start = Clock::now();
  for (int64_t step = 0; step < o.warmup + o.steps; ++step) {
    if (step == o.warmup) {
      timed_start = Clock::now();
      if (!o.profile.empty()) profile::enable(true, o.profile == "cpu" ? profile::Clock::cpu : profile::Clock::wall);
    }
    const Clock::time_point start = Clock::now();
    const RandomBatches::Batch batch = o.repeat_batch || step == 0 ? first : batches.next();
    optimizer.zero_grad();
    profile::mark();
    if (split) {  // each thread its rows, forward and backward, as the trainer's step does
      losses.push_back(split->run(*model, batch.inputs, batch.targets, batch.key_padding, ctx, 1.0));
    } else {
      const Tensor loss = model->loss(batch.inputs, batch.targets, batch.key_padding, ctx);
      losses.push_back(loss.item());
      backward(loss);
    }
    {
      const profile::Scope scope("clip_grad_norm");
      optim::clip_grad_norm(optimizer.params(), 1.0);
    }
    {
      const profile::Scope scope("adamw");
      optimizer.step();
    }
    if (step >= o.warmup) step_seconds.push_back(seconds_since(start));
  }
  if (profile::enabled()) {
    std::fprintf(stderr, "%s", profile::report().c_str());
    profile::enable(false);
  }
  const double elapsed = seconds_since(timed_start);
  const double tokens_per_s = o.steps > 0 ? static_cast<double>(o.steps * b.batch * b.seq) / elapsed : 0;
  std::printf(
      "{\"impl\": \"tapeformer\", \"mode\": \"train\", \"config\": \"%s\", \"arch\": \"%s\", \"d_model\": %lld, "
      "\"layers\": %lld, \"heads\": %lld, \"seq\": %lld, \"batch\": %lld, \"threads\": %d, \"steps\": %lld, "
      "\"warmup\": %lld, \"params\": %lld, \"non_embedding_params\": %lld, \"flops_per_token\": %.0f, "
      "\"tokens_per_s\": %.2f, \"step_s_median\": %.6f, \"model_gflops\": %.3f, \"peak_rss_mb\": %.1f, "
      "\"loss_first\": %.6f, \"loss_last\": %.6f, \"deterministic\": %s, \"recompute\": %s, \"bf16\": %s, "
      "\"split_parts\": %lld}\n",
      b.name.c_str(), b.arch.c_str(), (long long)b.d_model, (long long)b.layers, (long long)b.heads,
      (long long)b.seq, (long long)b.batch, threads, (long long)o.steps, (long long)o.warmup, (long long)params,
      (long long)non_embedding, flops_per_token, tokens_per_s, median(step_seconds),
      tokens_per_s * flops_per_token * 1e-9, peak_rss_mb(), losses.empty() ? 0.0 : losses.front(),
      losses.empty() ? 0.0 : losses.back(), o.deterministic ? "true" : "false", o.recompute ? "true" : "false",
      o.bf16 ? "true" : "false", (long long)parts);
  return tokens_per_s;
}

// An option's cost (train.deterministic, train.recompute) or gain (train.matmul_precision: bf16): default runs and runs with `option` on
// alternated `rounds` times in this process (a noisy machine slows both alike), and the median of the
// per-round throughput ratios.
void run_option_ratio(const BenchConfig& b, TrainOptions o, int threads, int rounds, const char* name,
                      bool TrainOptions::*option) {
  std::vector<double> ratios;
  for (int round = 0; round < rounds; ++round) {
    o.*option = false;
    const double usual = run_train(b, o, threads);
    o.*option = true;
    ratios.push_back(run_train(b, o, threads) / usual);
  }
  std::printf("{\"mode\": \"%s_ratio\", \"config\": \"%s\", \"threads\": %d, \"rounds\": %d, "
              "\"%s_over_default_median\": %.4f, \"min\": %.4f, \"max\": %.4f}\n",
              name, b.name.c_str(), threads, rounds, name, median(ratios), *std::min_element(ratios.begin(), ratios.end()),
              *std::max_element(ratios.begin(), ratios.end()));
}

// The best single-call GFLOP/s of C (n x n) = A (n x n) B (n x n) over `seconds` of repeated
// calls, after one untimed call (oneDNN creates its primitive there, OpenBLAS its buffers).
double best_sgemm_gflops(void (*matmul)(const kernels::MatmulDims&, const float*, const float*, float*,
                                        const float*),
                         int64_t n, double seconds) {
  Rng rng(7);
  const Tensor a = randn({n, n}, rng), b = randn({n, n}, rng), c = Tensor::zeros({n, n});  // (n, n) each
  kernels::MatmulDims d;
  d.m = d.n = d.k = n;
  matmul(d, a.data<float>(), b.data<float>(), c.data<float>(), nullptr);
  double best = 1e30;
  const Clock::time_point start = Clock::now();
  do {
    const Clock::time_point call = Clock::now();
    matmul(d, a.data<float>(), b.data<float>(), c.data<float>(), nullptr);
    best = std::min(best, seconds_since(call));
  } while (seconds_since(start) < seconds);
  return 2.0 * n * n * n / best * 1e-9;
}

void run_sgemm(int64_t n, double seconds, int threads) {
  const double onednn = best_sgemm_gflops(kernels::matmul_onednn, n, seconds);
  const double blas = best_sgemm_gflops(kernels::matmul_blas, n, seconds);
  std::printf(
      "{\"impl\": \"tapeformer\", \"mode\": \"sgemm\", \"n\": %lld, \"threads\": %d, \"onednn_gflops\": %.2f, "
      "\"blas_gflops\": %.2f, \"best_gflops\": %.2f}\n",
      (long long)n, threads, onednn, blas, std::max(onednn, blas));
}

// The KV-cache switch of train::SampleOptions, once the sampler has one: `bool kv_cache`. Until
// then a cached decode is reported as unavailable (bench/compare_torch.py prints "no KV cache yet").
template <class Options>
concept HasKvCache = requires(Options o) { o.kv_cache = true; };

template <class Options>
bool set_kv_cache(Options& o, bool on) {
  if constexpr (HasKvCache<Options>) {
    o.kv_cache = on;
    return true;
  } else {
    return !on;
  }
}

// Greedy decoding of `tokens` new ids after a random prompt, batch 1, with config B's model (its
// position table sized prompt + tokens, so no context is cropped). One short untimed decode first.
void run_decode(const BenchConfig& b, int64_t prompt_len, int64_t tokens, bool kv_cache, int threads) {
  const char* cache = kv_cache ? "true" : "false";
  train::SampleOptions o;
  o.temperature = 0;  // greedy: the same work every run, no sampling noise
  if (!set_kv_cache(o, kv_cache)) {
    std::printf("{\"impl\": \"tapeformer\", \"mode\": \"decode\", \"kv_cache\": %s, \"available\": false}\n", cache);
    return;
  }
  layers::Init init{Rng(1), DType::f32};
  const layers::Gpt model(model_config(b, prompt_len + tokens), init);
  Rng rng(3);
  std::vector<int32_t> prompt(prompt_len);
  for (int32_t& id : prompt) id = static_cast<int32_t>(rng.uniform_int(kVocab));
  o.tokens = std::min<int64_t>(8, tokens);
  train::sample(model, prompt, o);  // warm-up
  o.tokens = tokens;
  const Clock::time_point start = Clock::now();
  train::sample(model, prompt, o);
  const double elapsed = seconds_since(start);
  std::printf(
      "{\"impl\": \"tapeformer\", \"mode\": \"decode\", \"kv_cache\": %s, \"available\": true, \"config\": \"%s\", "
      "\"threads\": %d, \"prompt\": %lld, \"tokens\": %lld, \"tokens_per_s\": %.2f, \"peak_rss_mb\": %.1f}\n",
      cache, b.name.c_str(), threads, (long long)prompt_len, (long long)tokens, tokens / elapsed, peak_rss_mb());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_train_step: tokens/s, peak RSS and FLOPs per token of tapeformer training (one JSON line)"};
  std::string config_name;
  BenchConfig custom;
  TrainOptions train;
  int64_t threads = 0, sgemm_n = 1024, decode_tokens = 256, prompt_len = 8;
  double sgemm_seconds = 2.0;
  bool sgemm = false, decode = false, kv_cache = false;
  app.add_option("--config", config_name, "A, B, C, D or E (the performance issue's configs)");
  app.add_option("--arch", custom.arch, "gpt or bert")->check(CLI::IsMember({"gpt", "bert"}))->capture_default_str();
  app.add_option("--d-model", custom.d_model, "C")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--layers", custom.layers, "L")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--heads", custom.heads, "H")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seq", custom.seq, "T (overrides a --config's)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", custom.batch, "B")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--steps", train.steps, "timed steps")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--warmup", train.warmup, "untimed steps first")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--seed", train.seed, "initialisation and data seed")->capture_default_str();
  app.add_flag("--repeat-batch", train.repeat_batch, "train on one batch repeatedly (the loss must fall)");
  app.add_option("--profile", train.profile, "print the timed steps' seconds per op to stderr (wall or cpu clock)")
      ->check(CLI::IsMember({"wall", "cpu"}));
  app.add_flag("--deterministic", train.deterministic, "train.deterministic's kernels: the same bits for any thread count");
  int deterministic_rounds = 0;
  app.add_option("--vs-deterministic", deterministic_rounds,
                 "alternate default and --deterministic runs this many times; print the median throughput ratio")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--recompute", train.recompute, "train.recompute blocks: every block runs again during backward");
  int recompute_rounds = 0;
  app.add_option("--vs-recompute", recompute_rounds,
                 "alternate default and --recompute runs this many times; print the median throughput ratio");
  int bf16_rounds = 0;
  app.add_flag("--bf16", train.bf16, "train.matmul_precision: bf16: the step's matmuls on operands rounded to bfloat16");
  app.add_option("--vs-bf16", bf16_rounds, "alternate default and --bf16 runs this many times; print the median throughput ratio")
      ->check(CLI::PositiveNumber);
  app.add_option("--thread-split", train.thread_split,
                 "train.thread_split: auto (as the trainer: by rows with more than one thread), batch or ops")
      ->check(CLI::IsMember({"auto", "batch", "ops"}))
      ->capture_default_str();
  app.add_option("--threads", threads, "OpenMP threads; 0: physical cores (OMP_NUM_THREADS wins)")->capture_default_str();
  app.add_flag("--sgemm", sgemm, "measure the best sgemm GFLOP/s (oneDNN and OpenBLAS) instead of training");
  app.add_option("--sgemm-n", sgemm_n, "sgemm size n (n x n x n)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--sgemm-seconds", sgemm_seconds, "seconds per library")->capture_default_str();
  app.add_flag("--decode", decode, "time greedy decoding with config B (or --config) instead of training");
  app.add_flag("--kv-cache", kv_cache, "decode with the sampler's KV cache");
  app.add_option("--decode-tokens", decode_tokens, "tokens to generate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--prompt", prompt_len, "prompt length")->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const int n_threads = train::configure_threads(threads);
    if (sgemm) {
      run_sgemm(sgemm_n, sgemm_seconds, n_threads);
      return 0;
    }
    BenchConfig b = config_name.empty() ? (decode ? preset("B") : custom) : preset(config_name);
    if (app.count("--seq")) b.seq = custom.seq;  // the memory sweep: a config at another length
    if (app.count("--batch")) b.batch = custom.batch;
    if (decode) {
      TF_CHECK_INPUT(b.arch == "gpt", "--decode needs a GPT config, got ", b.arch);
      run_decode(b, prompt_len, decode_tokens, kv_cache, n_threads);
      return 0;
    }
    if (deterministic_rounds > 0) {
      run_option_ratio(b, train, n_threads, deterministic_rounds, "deterministic", &TrainOptions::deterministic);
      return 0;
    }
    if (recompute_rounds > 0) {
      run_option_ratio(b, train, n_threads, recompute_rounds, "recompute", &TrainOptions::recompute);
      return 0;
    }
    if (bf16_rounds > 0) {
      run_option_ratio(b, train, n_threads, bf16_rounds, "bf16", &TrainOptions::bf16);
      return 0;
    }
    run_train(b, train, n_threads);
  } catch (const InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
