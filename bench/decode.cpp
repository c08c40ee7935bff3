// Decode speed of a GPT, batch 1: tokens/s of train::sample with the KV cache and with the full
// recompute of the context for every token, side by side in one process, at 1 and 2 threads.
//
// Config B of the performance issue: d_model 384, 6 layers, 6 heads, vocab 256, max_seq_len 256,
// learned positions, tied embeddings, random init (the speed does not depend on the weights).
// A 4-token prompt is continued by 256 tokens (greedy), so the window of Note [context window]
// (train/sample.cpp) restarts once near the end: the cached figure includes that one prefill.
// "step" is the cached decoder alone: logits_cached of one token at positions 4 .. 255.
//
// Every token reads each weight once: 4 bytes x parameters (the tied embedding as the LM head; one
// row of the position table), ~43 MB here, more than the 32 MB L3 of the machine this was written on, so a
// cached decoder is bound by memory bandwidth; "GB/s" is that traffic divided by the time.
//
//   build/bench/bench_decode [--tokens 256] [--threads 1,2] [--no-full]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "framework/autograd/tape.h"
#include "layers/models/gpt.h"
#include "train/sample.h"

using tf::Tensor;
namespace layers = tf::layers;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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

// Tokens/s of sample() continuing `prompt` by `tokens` ids; the ids go to `out`.
double sample_rate(const layers::Gpt& model, const std::vector<int32_t>& prompt, int64_t tokens, bool kv_cache,
                   std::vector<int32_t>& out) {
  tf::train::SampleOptions o;
  o.tokens = tokens;
  o.temperature = 0;  // greedy: the two decoders must then give the same ids
  o.kv_cache = kv_cache;
  const auto start = std::chrono::steady_clock::now();
  out = tf::train::sample(model, prompt, o);
  return tokens / seconds_since(start);
}

// Tokens/s of logits_cached alone, one token at a time, after a prefill of `prompt_len` ids.
double step_rate(const layers::Gpt& model, int64_t prompt_len) {
  const tf::NoGradGuard no_grad;
  const layers::Context eval;
  layers::KvCache cache = model.make_cache();
  model.logits_cached(Tensor::from_ids(std::vector<int32_t>(prompt_len, 1), {1, prompt_len}), cache, eval);
  const int64_t steps = cache.capacity() - prompt_len;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i)
    model.logits_cached(Tensor::from_ids({static_cast<int32_t>(i % 256)}, {1, 1}), cache, eval);
  return steps / seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 256;
  std::vector<int> threads = {1, 2};
  bool full = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--tokens" && i + 1 < argc) {
      tokens = std::atoll(argv[++i]);
    } else if (arg == "--threads" && i + 1 < argc) {
      threads.clear();
      for (char* p = std::strtok(argv[++i], ","); p; p = std::strtok(nullptr, ",")) threads.push_back(std::atoi(p));
    } else if (arg == "--no-full") {
      full = false;
    } else {
      std::fprintf(stderr, "usage: bench_decode [--tokens 256] [--threads 1,2] [--no-full]\n");
      return 2;
    }
  }

  const layers::ModelConfig config = config_b();
  layers::Init init{tf::Rng(1)};
  const layers::Gpt model(config, init);
  const int64_t params = layers::count_parameters(model.parameters());
  // Every parameter once (the tied embedding as the LM head), but of the position table one row.
  const double bytes_per_token = 4.0 * (params - (config.max_seq_len - 1) * config.d_model);
  const std::vector<int32_t> prompt = {10, 20, 30, 40};
  std::printf("GPT config B: d_model %lld, %lld layers, %lld heads, vocab %lld, max_seq_len %lld; %.2fM parameters, "
              "%.1f MB read per token\n",
              (long long)config.d_model, (long long)config.n_layers, (long long)config.n_heads,
              (long long)config.vocab_size, (long long)config.max_seq_len, params / 1e6, bytes_per_token / 1e6);
  std::printf("batch 1, a %zu-token prompt continued by %lld tokens (greedy)\n\n", prompt.size(), (long long)tokens);
  std::printf("threads  kv-cache tok/s   GB/s   step tok/s   full-recompute tok/s   speedup   same ids\n");
  for (const int n : threads) {
    omp_set_num_threads(n);
    std::vector<int32_t> cached_ids, full_ids;
    sample_rate(model, prompt, tokens, true, cached_ids);  // warm-up: oneDNN primitives for every shape
    const double cached = sample_rate(model, prompt, tokens, true, cached_ids);
    const double step = step_rate(model, static_cast<int64_t>(prompt.size()));
    if (full) {
      const double recompute = sample_rate(model, prompt, tokens, false, full_ids);
      std::printf("%7d  %14.1f  %5.1f  %11.1f  %21.1f  %7.1fx   %s\n", n, cached, cached * bytes_per_token / 1e9, step,
                  recompute, cached / recompute, cached_ids == full_ids ? "yes" : "NO");
    } else {
      std::printf("%7d  %14.1f  %5.1f  %11.1f  %21s  %8s   %s\n", n, cached, cached * bytes_per_token / 1e9, step, "-",
                  "-", "-");
    }
    std::fflush(stdout);
  }
  return 0;
}
