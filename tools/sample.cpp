// `tapeformer sample CKPT`: continue a prompt with a trained GPT.
#include <chrono>
#include <cstdio>
#include <iostream>

#include <omp.h>

#include "layers/models/gpt.h"
#include "tools/commands.h"
#include "train/checkpoint.h"
#include "train/run_folder.h"
#include "train/sample.h"
#include "train/threads.h"
#include "train/trainer.h"

namespace tf::tools {

void add_sample_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("sample", "Generate text from a GPT checkpoint");
  static std::string checkpoint, prompt = "The ";
  static train::SampleOptions o{200, 0.8, 0, 1.0, 0};
  cmd->add_option("checkpoint", checkpoint, "Checkpoint file (.h5), or a run folder for its newest checkpoint")->required();
  cmd->add_option("--prompt", prompt, "Text to continue")->capture_default_str();
  cmd->add_option("--tokens", o.tokens, "Tokens to generate")->capture_default_str()->check(integer_in(0, 1000000));
  cmd->add_option("--temperature", o.temperature, "Softmax temperature; 0 is greedy")
      ->capture_default_str()
      ->check(number_in(0, 1000));
  cmd->add_option("--top-k", o.top_k, "Keep the k most likely tokens; 0 keeps all")
      ->capture_default_str()
      ->check(integer_in(0, 1 << 30));
  cmd->add_option("--top-p", o.top_p, "Nucleus sampling: keep the most likely tokens whose probabilities sum to p")
      ->capture_default_str()
      ->check(number_in(0, 1, /*lo_open=*/true));
  cmd->add_option("--seed", o.seed, "Random seed")->capture_default_str()->check(seed_value());
  static std::vector<std::string> overrides;
  cmd->add_option("--set", overrides, kInferenceSetHelp);
  static bool no_kv_cache = false;
  cmd->add_flag("--no-kv-cache", no_kv_cache,
                "Recompute the whole context for every token instead of decoding with a KV cache (same tokens, slower)");
  static bool timing = false;
  cmd->add_flag("--timing", timing,
                "Print the decoding speed to stderr: the tokens after the first, each one decode step "
                "(bench/decode_llama_cpp.py reads it)");
  cmd->callback([&exit_code] {
    o.kv_cache = !no_kv_cache;
    train::LoadedRun loaded = train::load_checkpoint(train::checkpoint_argument(checkpoint), overrides);
    const auto* gpt = dynamic_cast<const layers::Gpt*>(loaded.run.model.get());
    TF_CHECK_INPUT(gpt, checkpoint, ": sampling needs a GPT checkpoint; this one holds a BERT (try `tapeformer eval`)");
    train::configure_decode_threads(layers::count_parameters(gpt->parameters()));  // unless --threads or OMP_NUM_THREADS chose
    std::vector<int32_t> generated;
    const std::vector<int32_t> prompt_ids = loaded.run.tokenizer->encode(prompt);
    if (const int64_t unknown = loaded.run.tokenizer->count_unknown(prompt_ids))
      std::cerr << "note: " << unknown << " characters of the prompt are outside the checkpoint's vocabulary and "
                << "were read as <unk>\n";
    std::cout << prompt << std::flush;
    using Clock = std::chrono::steady_clock;
    Clock::time_point first, last;  // when the first and the last new token were known
    train::sample(*gpt, prompt_ids, o, [&](int32_t id) {
      last = Clock::now();
      if (generated.empty()) first = last;
      generated.push_back(id);
    });
    std::cout << loaded.run.tokenizer->decode(generated) << "\n";
    if (timing && generated.size() > 1) {
      const double seconds = std::chrono::duration<double>(last - first).count();
      std::fprintf(stderr, "timing: %zu tokens after the first in %.6f s: %.1f tokens/s on %d threads\n",
                   generated.size() - 1, seconds, static_cast<double>(generated.size() - 1) / seconds,
                   omp_get_max_threads());
    }
    exit_code = 0;
  });
}

}  // namespace tf::tools
