// GPT and BERT against golden values from an independent PyTorch implementation of docs/models.md
// (tests/golden/make_golden.py, which documents the file layout): weights are loaded by parameter
// name, then logits, loss and every parameter gradient must match.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "framework/autograd/tape.h"
#include "framework/io/hdf5_io.h"
#include "layers/models/model.h"
#include "support/compare.h"

namespace tf::layers {
namespace {

std::string golden_path(const std::string& name) { return std::string(TAPEFORMER_SOURCE_DIR) + "/tests/golden/" + name; }

ModelConfig config_from(const H5Reader& in) {
  ModelConfig c;
  c.arch = in.read_attr_string("/", "arch") == "bert" ? Architecture::bert : Architecture::gpt;
  c.vocab_size = in.read_attr_int("/", "vocab_size");
  c.max_seq_len = in.read_attr_int("/", "max_seq_len");
  c.d_model = in.read_attr_int("/", "d_model");
  c.n_layers = in.read_attr_int("/", "n_layers");
  c.n_heads = in.read_attr_int("/", "n_heads");
  c.n_kv_heads = in.read_attr_int("/", "n_kv_heads");
  c.d_ff = in.read_attr_int("/", "d_ff");
  c.position = parse_position_encoding(in.read_attr_string("/", "position"));
  c.pre_norm = in.read_attr_int("/", "pre_norm") != 0;
  c.causal = in.read_attr_int("/", "causal") != 0;
  c.gelu = in.read_attr_string("/", "gelu") == "erf" ? ops::GeluApprox::erf : ops::GeluApprox::tanh;
  c.tie_embeddings = in.read_attr_int("/", "tie_embeddings") != 0;
  c.ln_eps = in.read_attr_double("/", "ln_eps");
  c.rope_theta = in.read_attr_double("/", "rope_theta");
  // Keys of the variants, in the files that have them (the first three files predate them).
  auto text = [&](const char* key, const char* otherwise) {
    return in.has_attr("/", key) ? in.read_attr_string("/", key) : std::string(otherwise);
  };
  auto integer = [&](const char* key, int64_t otherwise) { return in.has_attr("/", key) ? in.read_attr_int("/", key) : otherwise; };
  auto number = [&](const char* key, double otherwise) { return in.has_attr("/", key) ? in.read_attr_double("/", key) : otherwise; };
  c.norm = text("norm", "layer") == "rms" ? kernels::NormKind::rms : kernels::NormKind::layer;
  c.feed_forward = text("feed_forward", "gelu") == "swiglu" ? kernels::FeedForwardKind::swiglu : kernels::FeedForwardKind::gelu;
  c.bias = integer("bias", 1) != 0;
  c.attention.window = integer("attention_window", 0);
  c.attention.global_tokens = integer("attention_global_tokens", 0);
  c.relative_buckets = integer("relative_buckets", 32);
  c.relative_max_distance = integer("relative_max_distance", 128);
  const std::string scaling = text("rope_scaling", "none");
  for (ops::RopeScalingKind k : ops::kRopeScalingKinds)
    if (scaling == ops::rope_scaling_name(k)) c.rope_scaling.kind = k;
  c.rope_scaling.factor = number("rope_scaling_factor", 1.0);
  c.rope_scaling.original_context = integer("rope_original_context", 0);
  c.rope_scaling.alpha = number("yarn_alpha", 1.0);
  c.rope_scaling.beta = number("yarn_beta", 32.0);
  return c;
}

// max |a - b| / max |b|: the error relative to the tensor's scale (a gradient entry near zero
// has no meaningful elementwise relative error).
double scaled_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  double err = 0, scale = 0;
  for (size_t i = 0; i < va.size(); ++i) err = std::max(err, std::abs(va[i] - vb[i])), scale = std::max(scale, std::abs(vb[i]));
  return err / scale;
}

struct Result {
  double logits = 0, loss = 0, grads = 0;  // worst scaled errors
};

// Builds the file's model in `dtype`, loads its float32 weights by name, and compares.
Result compare_with_golden(const std::string& file, DType dtype) {
  const H5Reader in(golden_path(file));
  const ModelConfig c = config_from(in);
  Init init{Rng(0), dtype};
  const auto model = build_model(c, init);
  const ParamList params = model->parameters();

  // The file holds exactly the model's parameters, under the same (PyTorch state-dict) names.
  std::set<std::string> ours, theirs;
  for (const auto& p : params) ours.insert(p.name);
  for (const auto& n : in.list("params")) theirs.insert(n);
  EXPECT_EQ(ours, theirs) << file;
  for (const auto& p : params) p.tensor.copy_from(in.read_tensor("params", p.name, DType::f32).to(dtype));

  const Tensor ids = in.read_tensor("inputs", "ids", DType::i32);
  const Tensor targets = in.read_tensor("inputs", "targets", DType::i32);
  const Tensor padding = in.has("inputs", "key_padding") ? in.read_tensor("inputs", "key_padding", DType::f64).to(dtype) : Tensor();

  Result r;
  const Tensor logits = model->logits(ids, padding, Context{});
  r.logits = scaled_error(logits, in.read_tensor("outputs", "logits", DType::f64));
  const Tensor loss = model->loss(ids, targets, padding, Context{});
  r.loss = std::abs(loss.item() - in.read_tensor("outputs", "loss", DType::f64).item()) / std::abs(loss.item());
  tape().backward(loss);
  for (const auto& p : params) {
    const Tensor expected = in.read_tensor("grads", p.name, DType::f64);
    if (!p.tensor.grad().defined()) {
      ADD_FAILURE() << file << ": no gradient reached " << p.name;
      continue;
    }
    const double e = scaled_error(p.tensor.grad(), expected);
    EXPECT_LT(e, dtype == DType::f64 ? 1e-12 : 1e-5) << file << ": gradient of " << p.name;
    r.grads = std::max(r.grads, e);
  }
  std::printf("[golden] %-16s %s: logits %.1e, loss %.1e, worst gradient %.1e (errors relative to each tensor's max)\n",
              file.c_str(), dtype_name(dtype), r.logits, r.loss, r.grads);
  return r;
}

class Golden : public ::testing::TestWithParam<const char*> {};

// float64 from the same float32 weights: both sides compute the same real numbers, so only
// summation order differs (measured <= 6e-15 of each tensor's scale); 1e-12 leaves 100x room.
TEST_P(Golden, Float64MatchesPyTorch) {
  const Result r = compare_with_golden(GetParam(), DType::f64);
  EXPECT_LT(r.logits, 1e-12);
  EXPECT_LT(r.loss, 1e-12);
}

// The float32 training path (fast kernels): float32 rounding (6e-8 per operation) grows through
// two blocks, layer norms and their backward to at most 2e-6 of each tensor's scale (measured:
// logits <= 4e-7, gradients <= 2e-6); the bound is the 1e-5.
TEST_P(Golden, Float32MatchesPyTorch) {
  const Result r = compare_with_golden(GetParam(), DType::f32);
  EXPECT_LT(r.logits, 1e-5);
  EXPECT_LT(r.loss, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Models, Golden,
                         ::testing::Values("gpt_learned.h5", "bert_learned.h5", "gpt_rope_gqa.h5", "gpt_modern.h5",
                                           "gpt_alibi.h5", "bert_t5.h5"),
                         [](const auto& info) {
                           std::string n = info.param;
                           return n.substr(0, n.find('.'));
                         });

}  // namespace
}  // namespace tf::layers
