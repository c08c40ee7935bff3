// The benchmark configurations A..E (the performance issue's) and the model and token stream each
// builds, shared by bench_train_step and bench_data_parallel.
//
// Configs (all vocab 256, GELU-tanh MLP 4C, pre-LN, fused QKV, learned positions, tied head, AdamW,
// dropout 0):
//   A  GPT  C 128, L 4, H 4, T 128,  B 16       D  GPT  C 128, L 2, H 4, T 2048, B 1
//   B  GPT  C 384, L 6, H 6, T 256,  B 8        E  D with T 8192
//   C  A as a BERT masked LM (15% of positions are targets)
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/error.h"
#include "framework/random.h"
#include "framework/ops/activation.h"
#include "layers/models/config.h"

namespace tf::bench {

struct BenchConfig {
  std::string name = "custom";  // "A" .. "E", or "custom" for explicit sizes
  std::string arch = "gpt";     // gpt | bert
  int64_t d_model = 128, layers = 4, heads = 4, seq = 128, batch = 16;
};

inline BenchConfig preset(const std::string& name) {
  if (name == "A") return {"A", "gpt", 128, 4, 4, 128, 16};
  if (name == "B") return {"B", "gpt", 384, 6, 6, 256, 8};
  if (name == "C") return {"C", "bert", 128, 4, 4, 128, 16};
  if (name == "D") return {"D", "gpt", 128, 2, 4, 2048, 1};
  if (name == "E") return {"E", "gpt", 128, 2, 4, 8192, 1};
  throw InputError(concat("--config: expected one of A, B, C, D, E, got '", name, "'"));
}

constexpr int64_t kVocab = 256;
// BERT's special tokens take the first ids of the random vocabulary (as [PAD] [MASK] [CLS] [SEP]).
constexpr int32_t kPad = 0, kMask = 1, kCls = 2, kSep = 3, kFirstOrdinary = 4;

inline layers::ModelConfig model_config(const BenchConfig& b, int64_t max_seq_len) {
  layers::ModelConfig m;
  m.arch = b.arch == "bert" ? layers::Architecture::bert : layers::Architecture::gpt;
  m.vocab_size = kVocab;
  m.max_seq_len = max_seq_len;
  m.d_model = b.d_model;
  m.n_layers = b.layers;
  m.n_heads = b.heads;
  m.position = layers::PositionEncoding::learned;
  m.causal = m.arch == layers::Architecture::gpt;
  m.pre_norm = true;  // both architectures: the configs are all pre-LN
  m.gelu = ops::GeluApprox::tanh;
  m.tie_embeddings = true;
  m.dropout = m.attn_dropout = 0.0;
  return m;
}

// A random token stream long enough for many distinct windows; ids avoid BERT's specials.
inline std::vector<int32_t> random_stream(const BenchConfig& b, uint64_t seed) {
  Rng rng(seed);
  const int64_t n = std::max<int64_t>(200000, 4 * b.batch * (b.seq + 1));
  std::vector<int32_t> ids(n);
  const int32_t low = b.arch == "bert" ? kFirstOrdinary : 0;
  for (int32_t& id : ids) id = low + static_cast<int32_t>(rng.uniform_int(kVocab - low));
  return ids;
}

}  // namespace tf::bench
