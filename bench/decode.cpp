// Decode speed of a GPT, batch 1: tokens/s of train::sample with the KV cache and with the full
// recompute of the context for every token, side by side in one process, at 1 and 2 threads.
//
// Config B of the performance issue: d_model 384, 6 layers, 6 heads, vocab 256, max_seq_len 256,
// learned positions, tied embeddings, random init (the speed does not depend on the weights).
// A 4-token prompt is continued by 256 tokens (greedy), so the window of Note [context window]
// (train/sample.cpp) restarts once near the end: the cached figure includes that one prefill.
// --layers 2 shrinks the model to 14 MB, which fits in the L3: the step is then bound by compute and
// per-op overhead rather than DRAM, which DRAM traffic from other tenants of a shared machine hides
// in the 6-layer figures.
// "step" is the cached decoder alone: logits_cached of one token at positions 4 .. 255 (the same
// layers and ops as training, with each attention reading its layer of the KV cache), measured in
// alternating rounds with the read bound between them; the table gives medians over the rounds of
// each round's rates and of its same-round ratios (a slow phase of the machine hits a round's
// measurements alike, so the ratios are steadier than the rates).
//
// Every token reads each weight once: 4 bytes x parameters (the tied embedding as the LM head; one
// row of the position table), 43 MB here, more than the 32 MB L3 of the machine this was written
// on, so a cached decoder is bound by memory bandwidth. "read" is that bound measured in the same
// process with the same threads: the rate at which those weights can merely be summed. On a
// shared machine bandwidth moves with other people's load, so the decoder is best judged by its
// ratio to this figure taken next to it. Rates are wall clock; "CPU ms" is the process's CPU time
// per token (every thread, spinning at barriers included).
//
//   build/bench/bench_decode [--tokens 256] [--threads 1,2] [--rounds 5] [--layers 6] [--no-full]
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "framework/autograd/tape.h"
#include "layers/models/gpt.h"
#include "train/sample.h"

using tf::Tensor;
namespace layers = tf::layers;

namespace {

double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

struct Rate {
  double tokens_per_s = 0;  // wall clock
  double cpu_ms = 0;        // process CPU time per token
};

// Times run(), which produces `tokens` tokens.
Rate measure(int64_t tokens, const std::function<void()>& run) {
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_seconds();
  run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {tokens / wall, 1e3 * (cpu_seconds() - cpu_start) / tokens};
}

layers::ModelConfig config_b() {
  layers::ModelConfig c;
  c.vocab_size = 256;
  c.max_seq_len = 256;
  c.d_model = 384;
  c.n_layers = 6;
  c.n_heads = 6;
  c.position = layers::PositionEncoding::learned;
  return c;
}

// sample() continuing `prompt` by `tokens` ids, greedy (so both decoders must give the same ids).
std::vector<int32_t> generate(const layers::Gpt& model, const std::vector<int32_t>& prompt, int64_t tokens,
                              bool kv_cache) {
  tf::train::SampleOptions o;
  o.tokens = tokens;
  o.temperature = 0;
  o.kv_cache = kv_cache;
  return tf::train::sample(model, prompt, o);
}

// logits_cached alone, one token at a time after a prefill of `prompt_len` ids, to a full cache.
void steps(const layers::Gpt& model, int64_t prompt_len) {
  const tf::NoGradGuard no_grad;
  const layers::Context eval;
  layers::KvCache cache = model.make_cache();
  model.logits_cached(Tensor::from_ids(std::vector<int32_t>(prompt_len, 1), {1, prompt_len}), cache, eval);
  for (int64_t i = prompt_len; i < cache.capacity(); ++i)
    model.logits_cached(Tensor::from_ids({static_cast<int32_t>(i % 256)}, {1, 1}), cache, eval);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One read of every weight a token uses, `reps` times: a sum of each tensor split over the threads.
void read_weights(const std::vector<Tensor>& weights, int reps) {
  volatile float sink = 0;
  for (int r = 0; r < reps; ++r)
    for (const Tensor& w : weights) {
      const float* data = w.data<float>();
      const int64_t blocks = w.numel() / 8;  // every weight tensor here has a multiple of 8 elements
      float total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
      for (int64_t b = 0; b < blocks; ++b) {
        float lanes = 0;  // 8 independent adds, one vector instruction
#pragma omp simd reduction(+ : lanes)
        for (int l = 0; l < 8; ++l) lanes += data[8 * b + l];
        total += lanes;
      }
      sink = sink + total;
    }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 256;
  std::vector<int> threads = {1, 2};
  bool full = true;
  int rounds = 5;
  int64_t n_layers = 6;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--tokens" && i + 1 < argc) {
      tokens = std::atoll(argv[++i]);
    } else if (arg == "--threads" && i + 1 < argc) {
      threads.clear();
      for (char* p = std::strtok(argv[++i], ","); p; p = std::strtok(nullptr, ",")) threads.push_back(std::atoi(p));
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--layers" && i + 1 < argc) {
      n_layers = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--no-full") {
      full = false;
    } else {
      std::fprintf(stderr, "usage: bench_decode [--tokens 256] [--threads 1,2] [--rounds 5] [--layers 6] [--no-full]\n");
      return 2;
    }
  }

  layers::ModelConfig config = config_b();
  config.n_layers = n_layers;
  layers::Init init{tf::Rng(1)};
  const layers::Gpt model(config, init);
  std::vector<Tensor> weights;  // what one token reads (of the position table only a row)
  int64_t weight_count = 0;
  for (const auto& p : model.parameters())
    if (p.name != "position_embedding.weight") weights.push_back(p.tensor), weight_count += p.tensor.numel();
  const double bytes_per_token = 4.0 * weight_count;
  const std::vector<int32_t> prompt = {10, 20, 30, 40};
  const int64_t step_count = config.max_seq_len - static_cast<int64_t>(prompt.size());
  std::printf("GPT config B: d_model %lld, %lld layers, %lld heads, vocab %lld, max_seq_len %lld: %.1f MB of weights "
              "read per token\n",
              (long long)config.d_model, (long long)config.n_layers, (long long)config.n_heads,
              (long long)config.vocab_size, (long long)config.max_seq_len, bytes_per_token / 1e6);
  std::printf("batch 1, a %zu-token prompt continued by %lld tokens (greedy)\n\n", prompt.size(), (long long)tokens);
  std::printf("medians of %d rounds; step = logits_cached alone\n", rounds);
  std::printf("threads |  read: tok/s  GB/s | kv-cache: tok/s  of read  CPU ms | step: tok/s  of read | "
              "full: tok/s | speedup  same ids\n");
  for (const int n : threads) {
    omp_set_num_threads(n);
    std::vector<int32_t> cached_ids, full_ids;
    cached_ids = generate(model, prompt, tokens, true);  // warm-up: oneDNN primitives of the prefill shapes
    std::vector<double> read_rates, cached_rates, cached_cpu, step_rates, of_read, step_of_read;
    for (int r = 0; r < rounds; ++r) {
      const Rate read = measure(10, [&] { read_weights(weights, 10); });
      const Rate cached = measure(tokens, [&] { cached_ids = generate(model, prompt, tokens, true); });
      const Rate step = measure(step_count, [&] { steps(model, static_cast<int64_t>(prompt.size())); });
      read_rates.push_back(read.tokens_per_s);
      cached_rates.push_back(cached.tokens_per_s);
      cached_cpu.push_back(cached.cpu_ms);
      step_rates.push_back(step.tokens_per_s);
      of_read.push_back(cached.tokens_per_s / read.tokens_per_s);
      step_of_read.push_back(step.tokens_per_s / read.tokens_per_s);
    }
    const double read = median(read_rates), cached = median(cached_rates);
    std::printf("%7d | %12.1f %5.1f | %15.1f %7.0f%% %7.2f | %11.1f %7.0f%% |", n, read, read * bytes_per_token / 1e9,
                cached, 100 * median(of_read), median(cached_cpu), median(step_rates), 100 * median(step_of_read));
    if (full) {
      const Rate recompute = measure(tokens, [&] { full_ids = generate(model, prompt, tokens, false); });
      std::printf(" %11.1f | %6.1fx  %s\n", recompute.tokens_per_s, cached / recompute.tokens_per_s,
                  cached_ids == full_ids ? "yes" : "NO");
    } else {
      std::printf(" %11s |\n", "-");
    }
    std::fflush(stdout);
  }
  return 0;
}
