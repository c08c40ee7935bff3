// `tapeformer gradcheck`: float64 finite-difference checks, printed as tables.
//   --ops            every op of the framework (framework/ops/*_cases.cpp)
//   --model R.yaml   every parameter of the recipe's model, shrunk by --vocab/--seq-len/--batch/
//                    --d-model so that a full check takes seconds; the layer pattern is kept
//   --explain        what a failure looks like: an op with a deliberately wrong backward
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/gradcheck.h"
#include "framework/ops/elementwise.h"
#include "layers/models/model.h"
#include "tools/commands.h"
#include "train/recipe.h"

namespace tf::tools {

namespace {

// "  [2, 0]  backward 1.234567e-02  numeric 1.234567e-02": where a tensor's relative error is largest.
std::string worst_of(const TensorGradCheck& t) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-10s backward %13.6e  numeric %13.6e", index_in(t.shape, t.worst_index).c_str(),
                t.worst_analytic, t.worst_numeric);
  return buf;
}

int check_ops() {
  std::printf("%s\n", gradcheck_rule().c_str());
  std::printf("%-34s %-36s %12s %12s  %s\n", "op", "shapes", "max abs err", "max rel err", "result");
  int failed = 0;
  for (const OpCase& c : op_cases()) {
    const GradcheckReport r = run_op_case(c);
    failed += !r.passed();
    std::printf("%-34s %-36s %12.2e %12.2e  %s\n", c.name.c_str(), c.shapes.c_str(), r.max_abs_error(),
                r.max_rel_error(), r.passed() ? "pass" : "FAIL");
    if (!r.passed()) std::printf("%s", r.to_string().c_str());
  }
  std::printf("%zu op cases, %d failed (float64, central differences, eps 1e-6, rtol 1e-6)\n",
              op_cases().size(), failed);
  return failed == 0 ? 0 : 1;
}

struct ModelCheckOptions {
  std::string recipe;
  std::vector<std::string> overrides;  // --set section.key=value
  int64_t vocab = 11, seq_len = 5, batch = 2;
  int64_t d_model = 0;  // 0: 8, rounded up to a multiple of n_heads with an even head size
  int64_t layers = 0;  // 0: one period of the recipe's layer pattern (model.mixers), at least 2
  double perturb = 0.2;  // std of the noise added to every parameter; 0 checks at initialisation
};

// The recipe's model at gradient-check size. Sizes not named by a flag keep their proportions:
// d_ff keeps its ratio to d_model; max_seq_len becomes seq_len (a learned table of T rows).
layers::ModelConfig shrink(layers::ModelConfig c, const ModelCheckOptions& o) {
  TF_CHECK_INPUT(o.vocab >= 2 && o.seq_len >= 1 && o.batch >= 1 && o.layers >= 0 && o.d_model >= 0 && o.perturb >= 0,
                 "gradcheck: --vocab must be >= 2, --seq-len, --batch >= 1, --layers >= 0 and --perturb >= 0");
  // The widths shrink, the layer pattern does not: a Jamba-like [attention, mamba, mamba, mamba] keeps
  // its four layers (two would cut the pattern, which must divide the layer count).
  const int64_t layers = o.layers > 0 ? o.layers : std::max<int64_t>(2, static_cast<int64_t>(c.mixers.size()));
  int64_t d_model = o.d_model;
  const int64_t small_head_dim = std::max<int64_t>(2, (8 / c.n_heads + 1) / 2 * 2);
  if (d_model == 0) d_model = c.n_heads * small_head_dim;
  // A pruned model's per-layer heads: the first --layers of them, repeated if there are fewer; its
  // explicit head size shrinks with d_model.
  if (!c.heads_per_layer.empty()) {
    std::vector<int64_t> heads;
    for (int64_t l = 0; l < layers; ++l) heads.push_back(c.heads_per_layer[l % c.heads_per_layer.size()]);
    c.heads_per_layer = heads;
  }
  if (c.d_head > 0) c.d_head = small_head_dim;
  if (c.d_ff > 0) c.d_ff = std::max<int64_t>(1, c.d_ff * d_model / c.d_model);
  c.d_model = d_model;
  c.vocab_size = o.vocab;
  c.max_seq_len = o.seq_len;
  c.n_layers = layers;
  return c;
}

// A random batch: GPT, ids and next-token targets; BERT, the last sequence padded over its last
// third, targets at every other real position (-100 elsewhere, as the masked-LM batcher leaves them).
struct Batch {
  Tensor ids, targets, key_padding;
};

Batch random_batch(const layers::ModelConfig& c, int64_t B, int64_t T, Rng& rng) {
  std::vector<int32_t> ids(B * T), targets(B * T);
  for (auto& id : ids) id = static_cast<int32_t>(rng.uniform_int(c.vocab_size));
  for (auto& t : targets) t = static_cast<int32_t>(rng.uniform_int(c.vocab_size));
  Batch batch;
  if (c.arch == layers::Architecture::bert) {
    std::vector<double> pad(B * T, 1.0);
    const int64_t real = T - T / 3;  // of the last sequence
    for (int64_t t = real; t < T; ++t) pad[(B - 1) * T + t] = 0.0;
    for (int64_t i = 0; i < B * T; ++i)
      if (pad[i] == 0.0 || i % 2 == 1) targets[i] = -100;
    batch.key_padding = Tensor::from_vector(pad, {B, T}, DType::f64);
  }
  batch.ids = Tensor::from_ids(ids, {B, T});
  batch.targets = Tensor::from_ids(targets, {B, T});
  return batch;
}

int check_model(const ModelCheckOptions& o) {
  const train::Recipe recipe = train::load_recipe(o.recipe, o.overrides);
  const layers::ModelConfig c = shrink(recipe.model, o);
  const bool bert = c.arch == layers::Architecture::bert;
  layers::Init init{Rng(static_cast<uint64_t>(recipe.train.seed)), DType::f64};
  const auto model = layers::build_model(c, init);
  Rng data_rng(static_cast<uint64_t>(recipe.train.seed) + 1);
  const Batch batch = random_batch(c, o.batch, o.seq_len, data_rng);
  // With dropout the check runs in training mode, every evaluation drawing the same masks from a
  // generator restarted at one seed: dropout is then a fixed linear map and is checked too.
  const bool training = c.dropout > 0 || c.attn_dropout > 0;
  const layers::ParamList params = model->parameters();
  // At initialisation biases are 0 and norm scales 1, which multiply some gradient errors away
  // (and every weight is ~0.02, which hides them under the absolute floor): move every parameter.
  Rng noise_rng(static_cast<uint64_t>(recipe.train.seed) + 3);
  for (const auto& p : params) {
    double* x = p.tensor.data<double>();
    for (int64_t i = 0; i < p.tensor.numel(); ++i) x[i] += o.perturb * noise_rng.normal();
  }
  std::vector<Tensor> inputs;
  std::vector<std::string> names;
  for (const auto& p : params) inputs.push_back(p.tensor), names.push_back(p.name);

  std::string heads = std::to_string(c.n_heads);
  if (!c.heads_per_layer.empty()) {
    heads = "[";
    for (int64_t l = 0; l < c.n_layers; ++l) heads += (l ? ", " : "") + std::to_string(c.heads(l));
    heads += "] of head_dim " + std::to_string(c.head_dim());
  }
  std::printf("%s: d_model %lld, n_layers %lld, n_heads %s, n_kv_heads %lld, d_ff %lld, vocab %lld, position %s, "
              "%s; batch %lld x %lld, %s loss%s; %lld parameters moved by normal(0, %g)\n",
              bert ? "bert" : "gpt", (long long)c.d_model, (long long)c.n_layers, heads.c_str(),
              (long long)c.kv_heads(), (long long)c.ff_width(),
              (long long)c.vocab_size, layers::position_encoding_name(c.position), c.pre_norm ? "pre-LN" : "post-LN",
              (long long)o.batch, (long long)o.seq_len, bert ? "masked-LM (padding, ignored targets)" : "causal LM",
              training ? ", dropout masks fixed by seed" : "", (long long)layers::count_parameters(params), o.perturb);
  if (recipe.train.recompute == "blocks")
    std::printf("train.recompute blocks: every block runs again during backward, its gradients from the replay\n");
  const GradcheckReport report = gradcheck(
      [&](const std::vector<Tensor>&) {
        Rng dropout_rng(recipe.train.seed + 2);
        const layers::Context ctx{.training = training, .rng = &dropout_rng,
                                  .recompute = recipe.train.recompute == "blocks"};
        return model->loss(batch.ids, batch.targets, batch.key_padding, ctx);
      },
      inputs, names);

  // In model order (the order of parameters(): embeddings, then each block from its input on).
  const std::vector<TensorGradCheck>& rows = report.tensors;
  size_t width = 9;
  for (const auto& r : rows) width = std::max(width, r.name.size());
  std::printf("\n%s\n", gradcheck_rule().c_str());
  std::printf("%-*s  %-12s %12s %12s  %-6s  %s\n", (int)width, "parameter", "shape", "max abs err", "max rel err",
              "result", "worst element");
  int failed = 0;
  for (const auto& r : rows) {
    failed += !r.passed();
    std::printf("%-*s  %-12s %12.2e %12.2e  %-6s%s\n", (int)width, r.name.c_str(), r.shape.to_string().c_str(),
                r.max_abs_error, r.max_rel_error, r.passed() ? "pass" : "FAIL", worst_of(r).c_str());
  }
  std::printf("%zu parameters, %d failed (float64, central differences, eps 1e-6, rtol 1e-6)\n", rows.size(), failed);
  return failed == 0 ? 0 : 1;
}

// y = x * x with a backward that forgets the factor 2 (dx = dy x instead of 2 dy x): the kind of
// slip a gradient check exists to catch.
struct WrongSquareNode : Node {
  Tensor x;
  const char* op_name() const override { return "square (wrong backward)"; }
  void backward() override { accumulate_grad(x, ops::mul(take_output_grad(), x)); }
};

Tensor wrong_square(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const double* in = x.data<double>();
  double* out = y.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] * in[i];
  if (needs_grad(x)) {
    auto node = std::make_unique<WrongSquareNode>();
    node->x = x;
    record(std::move(node), {y});
  }
  return y;
}

int explain() {
  std::printf("%s\n", gradcheck_rule().c_str());
  std::printf("Two ops computing y = x * x on a (2, 3) input. The first is ops::mul(x, x), whose backward\n"
              "gives dL/dx = 2 x dL/dy; the second has a backward that forgets the 2 (dL/dx = x dL/dy).\n\n");
  Rng rng(7);
  const Tensor x = gradcheck_input(rng, {2, 3}, "x");
  for (bool wrong : {false, true}) {
    const GradcheckReport r = gradcheck(
        [wrong](const std::vector<Tensor>& in) { return wrong ? wrong_square(in[0]) : ops::mul(in[0], in[0]); },
        {x.clone().set_requires_grad()}, {"x"});
    const TensorGradCheck& t = r.tensors[0];
    std::printf("%-26s max abs err %.2e, max rel err %.2e: %s\n  worst element%s\n\n",
                wrong ? "square (wrong backward)" : "mul(x, x)", t.max_abs_error, t.max_rel_error,
                t.passed() ? "pass" : "FAIL", worst_of(t).c_str());
  }
  std::printf("The failing op's backward is half the finite differences at every element (relative error\n"
              "0.5, far above 1e-6): the table of `gradcheck --ops` or `--model` shows FAIL and this worst\n"
              "element, which points at the backward to fix. docs/gradcheck.md explains the method.\n");
  return 0;
}

}  // namespace

void add_gradcheck_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("gradcheck", "Check gradients against finite differences in float64");
  static bool ops = false;
  static ModelCheckOptions model;
  CLI::Option* ops_flag = cmd->add_flag("--ops", ops, "Check every op of the framework");
  CLI::Option* model_opt = cmd->add_option("--model", model.recipe, "Check every parameter of this recipe's model");
  ops_flag->excludes(model_opt);
  static bool explain_flag = false;
  CLI::Option* explain_opt =
      cmd->add_flag("--explain", explain_flag, "Show what is compared, and what a failure looks like (a wrong backward)");
  explain_opt->excludes(ops_flag)->excludes(model_opt);
  cmd->add_option("--set", model.overrides, "Override a recipe key, e.g. --set model.position=rope (repeatable)")
      ->needs(model_opt);
  // Finite differences cost two forward passes per parameter element: the ranges keep a check to minutes.
  cmd->add_option("--vocab", model.vocab, "Vocabulary size of the checked model")
      ->capture_default_str()
      ->check(integer_in(2, 512));
  cmd->add_option("--seq-len", model.seq_len, "Sequence length T (also max_seq_len)")
      ->capture_default_str()
      ->check(integer_in(1, 64));
  cmd->add_option("--batch", model.batch, "Batch size B")->capture_default_str()->check(integer_in(1, 16));
  cmd->add_option("--d-model", model.d_model, "d_model (default: 8, rounded to fit the recipe's heads)")
      ->check(integer_in(1, 256));
  cmd->add_option("--layers", model.layers,
                  "Transformer blocks (default: one period of the recipe's model.mixers pattern, at least 2)")
      ->check(integer_in(1, 8));
  cmd->add_option("--perturb", model.perturb, "Add normal(0, STD) to every parameter before checking (0: at init)")
      ->capture_default_str()
      ->check(number_in(0, 10));
  cmd->callback([&exit_code] {
    if (explain_flag) {
      exit_code = explain();
      return;
    }
    if (!ops && model.recipe.empty()) throw CLI::RequiredError("--ops, --model or --explain");
    exit_code = ops ? check_ops() : check_model(model);
  });
}

}  // namespace tf::tools
