// Shared pieces of the layer and model tests: tiny float64 models, random batches, and parameters
// moved off their initial values (biases 0 and norm scales 1 would hide gradient bugs that a
// zero or a one multiplies away).
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "framework/random.h"
#include "framework/tensor.h"
#include "layers/models/bert.h"
#include "layers/models/gpt.h"

namespace tf::layers {
// gtest prints parameters of parameterised tests with this (instead of their bytes).
inline void PrintTo(PositionEncoding p, std::ostream* out) { *out << position_encoding_name(p); }
}  // namespace tf::layers

namespace tf::layers::testing {

// The gradient-check size of the issue: d_model 8, 2 heads (head_dim 4), vocab 11, 2 layers.
inline ModelConfig tiny_config(Architecture arch, PositionEncoding position) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = 11;
  c.max_seq_len = 6;  // T = 5 plus one unused row of a learned table (its gradient must be 0)
  c.d_model = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.position = position;
  c.relative_buckets = 4;  // t5: at T = 5, distances 0 and 1 are exact, 2 and 3 logarithmic, 4 shared
  c.relative_max_distance = 4;
  c.causal = arch == Architecture::gpt;
  c.pre_norm = arch == Architecture::gpt;
  c.gelu = arch == Architecture::gpt ? ops::GeluApprox::tanh : ops::GeluApprox::erf;
  return c;
}

// Adds normal(0, std) to every parameter in place, so weights are O(std), biases nonzero and norm
// scales away from 1: attention is then far from uniform and every parameter has a visible gradient.
inline void perturb(const ParamList& params, uint64_t seed, double std = 0.3) {
  Rng rng(seed);
  for (const auto& p : params) {
    const Tensor noise = randn(p.tensor.shape(), rng, std, DType::f64);
    double* x = p.tensor.data<double>();
    const double* n = noise.data<double>();
    for (int64_t i = 0; i < p.tensor.numel(); ++i) x[i] += n[i];
  }
}

inline std::vector<Tensor> tensors_of(const ParamList& params) {
  std::vector<Tensor> out;
  for (const auto& p : params) out.push_back(p.tensor);
  return out;
}

inline std::vector<std::string> names_of(const ParamList& params) {
  std::vector<std::string> out;
  for (const auto& p : params) out.push_back(p.name);
  return out;
}

// Options of the small (C = 8) attention layer the layer tests use; kv_heads 0 means heads.
inline MultiHeadAttention::Options attention_options(int64_t heads, int64_t kv_heads, bool causal, bool rope) {
  MultiHeadAttention::Options o;
  o.d_model = 8;
  o.n_heads = heads;
  o.n_kv_heads = kv_heads;
  o.causal = causal;
  o.rope = rope;
  return o;
}

// (shape) f64 values drawn from N(0, 1) by a generator of their own.
inline Tensor random_normal(const Shape& shape, uint64_t seed) {
  Rng rng(seed);
  return randn(shape, rng, 1.0, DType::f64);
}

// (shape) i32 ids uniform in [0, vocab).
inline Tensor random_ids(const Shape& shape, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> ids(shape.numel());
  for (auto& id : ids) id = static_cast<int32_t>(rng.uniform_int(vocab));
  return Tensor::from_ids(ids, shape);
}

// A copy of ids with the listed flat positions replaced by -100 (no loss there).
inline Tensor ignore_positions(const Tensor& ids, const std::vector<int64_t>& flat) {
  std::vector<int32_t> v(ids.data<int32_t>(), ids.data<int32_t>() + ids.numel());
  for (int64_t i : flat) v[i] = -100;
  return Tensor::from_ids(v, ids.shape());
}

// (B, T, C) f64: x[:, perm[t], :] at every t, positions reordered within each sequence.
inline Tensor permute_positions(const Tensor& x, const std::vector<int64_t>& perm) {
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  const std::vector<double> v = x.to_vector();
  std::vector<double> out(v.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) out[(b * T + t) * C + c] = v[(b * T + perm[t]) * C + c];
  return Tensor::from_vector(out, x.shape(), DType::f64);
}

// (2, 5) key padding for the BERT tests: entry 0 is full length, entry 1 has 3 real tokens.
inline Tensor padding_2x5() {
  return Tensor::from_vector({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 5}, DType::f64);
}

inline const char* arch_name(Architecture a) { return a == Architecture::gpt ? "gpt" : "bert"; }

constexpr PositionEncoding kAllPositions[] = {PositionEncoding::none, PositionEncoding::sinusoidal,
                                              PositionEncoding::learned, PositionEncoding::rope,
                                              PositionEncoding::alibi, PositionEncoding::t5};

}  // namespace tf::layers::testing
