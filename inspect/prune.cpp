// Head pruning; see prune.h, Note [pruning].
#include "inspect/prune.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace tf::inspect {

namespace {

// A group of one layer: n_heads / n_kv_heads query heads sharing a key/value head.
struct GroupScore {
  int64_t layer = 0, group = 0;
  double importance = 0;  // the sum of its heads' normalised importances
};

// Rows [begin, end) of a row-major tensor whose first dimension is cut, as (begin, end) pairs.
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// The rows `ranges` of t (first dimension), in order; trailing dimensions are kept whole.
Tensor take_rows(const Tensor& t, const Ranges& ranges) {
  Shape shape = t.shape();
  const int64_t row_bytes = t.numel() / t.dim(0) * static_cast<int64_t>(dtype_size(t.dtype()));
  int64_t rows = 0;
  for (const auto& [b, e] : ranges) rows += e - b;
  shape[0] = rows;
  Tensor out = Tensor::empty(shape, t.dtype());
  auto* to = static_cast<std::byte*>(out.raw_data());
  const auto* from = static_cast<const std::byte*>(t.raw_data());
  for (const auto& [b, e] : ranges) {
    std::memcpy(to, from + b * row_bytes, static_cast<size_t>((e - b) * row_bytes));
    to += (e - b) * row_bytes;
  }
  return out;
}

// The columns `ranges` of a row-major matrix (R, K), in order.
Tensor take_columns(const Tensor& t, const Ranges& ranges) {
  TF_CHECK(t.rank() == 2, "take_columns: a matrix, got ", t.describe());
  const int64_t R = t.dim(0), K = t.dim(1), elem = static_cast<int64_t>(dtype_size(t.dtype()));
  int64_t cols = 0;
  for (const auto& [b, e] : ranges) cols += e - b;
  Tensor out = Tensor::empty({R, cols}, t.dtype());
  auto* to = static_cast<std::byte*>(out.raw_data());
  const auto* from = static_cast<const std::byte*>(t.raw_data());
  for (int64_t r = 0; r < R; ++r)
    for (const auto& [b, e] : ranges) {
      std::memcpy(to, from + (r * K + b) * elem, static_cast<size_t>((e - b) * elem));
      to += (e - b) * elem;
    }
  return out;
}

// How each of one layer's attention tensors is cut: the rows of qkv (queries, then keys and values of
// the kept groups), the columns of W_O, the rows of T5's table, the columns of the value embeddings.
struct LayerCut {
  Ranges qkv_rows, proj_columns, head_rows, kv_columns;
};

LayerCut layer_cut(const layers::ModelConfig& config, int64_t layer, const std::vector<int64_t>& kept) {
  const int64_t H = config.heads(layer), G = config.kv_heads(layer), D = config.head_dim(), Hg = config.group_size();
  LayerCut cut;
  for (int64_t h : kept) {
    cut.qkv_rows.emplace_back(h * D, (h + 1) * D);
    cut.proj_columns.emplace_back(h * D, (h + 1) * D);
    cut.head_rows.emplace_back(h, h + 1);
  }
  for (size_t i = 0; i < kept.size(); i += static_cast<size_t>(Hg)) {  // the kept groups' D-wide blocks
    const int64_t g = kept[i] / Hg;
    cut.kv_columns.emplace_back(g * D, (g + 1) * D);
  }
  for (const int64_t base : {H * D, (H + G) * D})  // keys, then values
    for (const auto& [begin, end] : cut.kv_columns) cut.qkv_rows.emplace_back(base + begin, base + end);
  return cut;
}

// Cuts a parameter (or an optimizer slot of its shape) of the unpruned model by name; others are copied.
Tensor cut_by_name(const std::string& name, const Tensor& t, const std::vector<LayerCut>& cuts) {
  const std::string prefix = "blocks.";
  if (name.rfind(prefix, 0) != 0) return t.clone();
  const size_t dot = name.find('.', prefix.size());
  const int64_t layer = std::stoll(name.substr(prefix.size(), dot - prefix.size()));
  const std::string rest = name.substr(dot + 1);
  const LayerCut& cut = cuts.at(static_cast<size_t>(layer));
  if (rest == "attn.qkv.weight" || rest == "attn.qkv.bias") return take_rows(t, cut.qkv_rows);
  if (rest == "attn.proj.weight") return take_columns(t, cut.proj_columns);
  if (rest == "attn.relative_bias") return take_rows(t, cut.head_rows);
  if (rest.rfind("attn.", 0) == 0 && layers::AttentionHooks::rows_per_query_head(rest.substr(5)))
    return take_rows(t, cut.proj_columns);  // the same D-wide blocks per head as W_O's columns
  if (rest.rfind("attn.", 0) == 0 && layers::AttentionHooks::columns_per_kv_head(rest.substr(5)))
    return take_columns(t, cut.kv_columns);
  return t.clone();
}

}  // namespace

PruneBy parse_prune_by(const std::string& name) {
  if (name == "importance") return PruneBy::importance;
  if (name == "raw") return PruneBy::raw_importance;
  if (name == "masked") return PruneBy::masked_loss;
  throw InputError("prune: --by must be importance, raw or masked, got '" + name + "'");
}

void rank_by(HeadImportance& scores, PruneBy by) {
  for (HeadScore& s : scores.heads) {
    if (by == PruneBy::raw_importance) s.importance = s.raw_importance;
    if (by == PruneBy::masked_loss) s.importance = s.masked_loss - scores.loss;
  }
}

int64_t max_removable_heads(const layers::ModelConfig& config) {
  return config.total_heads() - config.n_layers * config.group_size();
}

int64_t heads_in_fraction(const layers::ModelConfig& config, double fraction) {
  TF_CHECK_INPUT(fraction >= 0 && fraction <= 1, "the fraction of heads to prune must be in [0, 1], got ", fraction);
  const double groups = fraction * static_cast<double>(config.total_heads()) / static_cast<double>(config.group_size());
  return static_cast<int64_t>(std::llround(groups)) * config.group_size();
}

PrunePlan plan_pruning(const layers::ModelConfig& config, const HeadImportance& scores, int64_t heads_to_remove) {
  TF_CHECK_INPUT(layers::position_row(config.position).heads_removable, "prune: an ALiBi model's heads cannot be "
                 "removed: each head's slope follows its index among model.n_heads (Press et al. 2022), so the "
                 "heads left would attend differently (Note [position support])");
  const int64_t Hg = config.group_size(), L = config.n_layers;
  TF_CHECK_INPUT(heads_to_remove >= 0 && heads_to_remove <= max_removable_heads(config), "prune: cannot remove ",
                 heads_to_remove, " of ", config.total_heads(), " heads: every layer keeps at least ", Hg,
                 Hg == 1 ? " head" : " heads (one key/value group)", ", so at most ", max_removable_heads(config),
                 " can go");
  TF_CHECK_INPUT(static_cast<int64_t>(scores.heads.size()) == config.total_heads(), "prune: the importance scores ",
                 "cover ", scores.heads.size(), " heads, the model has ", config.total_heads());
  std::vector<GroupScore> groups;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t g = 0; g < config.kv_heads(l); ++g) groups.push_back({l, g, 0.0});
  std::vector<int64_t> first_group(static_cast<size_t>(L), 0);
  for (int64_t l = 1; l < L; ++l) first_group[l] = first_group[l - 1] + config.kv_heads(l - 1);
  for (const HeadScore& s : scores.heads) {
    TF_CHECK_INPUT(s.layer >= 0 && s.layer < L && s.head >= 0 && s.head < config.heads(s.layer),
                   "prune: a score names head ", s.head, " of layer ", s.layer, ", which the model does not have");
    groups[static_cast<size_t>(first_group[s.layer] + s.head / Hg)].importance += s.importance;
  }
  // Least important first; ties go from the back, so the order does not depend on the sort's whims.
  std::vector<GroupScore> order = groups;
  std::stable_sort(order.begin(), order.end(), [](const GroupScore& a, const GroupScore& b) {
    if (a.importance != b.importance) return a.importance < b.importance;
    return std::make_pair(a.layer, a.group) > std::make_pair(b.layer, b.group);
  });
  std::vector<int64_t> groups_left(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l) groups_left[l] = config.kv_heads(l);
  std::vector<bool> removed(groups.size(), false);
  PrunePlan plan;
  plan.heads_before = config.total_heads();
  for (const GroupScore& g : order) {
    if (plan.removed + Hg > heads_to_remove) break;
    if (groups_left[g.layer] == 1) continue;  // the layer's last group stays
    removed[static_cast<size_t>(first_group[g.layer] + g.group)] = true;
    --groups_left[g.layer];
    plan.removed += Hg;
  }
  plan.kept.resize(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < config.heads(l); ++h)
      if (!removed[static_cast<size_t>(first_group[l] + h / Hg)]) plan.kept[l].push_back(h);
  return plan;
}

train::Run prune_run(train::Run run, const PrunePlan& plan) {
  const layers::ModelConfig& before = run.recipe.model;
  TF_CHECK(static_cast<int64_t>(plan.kept.size()) == before.n_layers, "prune_run: the plan has ", plan.kept.size(),
           " layers, the model ", before.n_layers);
  std::vector<LayerCut> cuts;
  train::Recipe recipe = run.recipe;
  recipe.model.heads_per_layer.clear();
  for (int64_t l = 0; l < before.n_layers; ++l) {
    cuts.push_back(layer_cut(before, l, plan.kept[l]));
    recipe.model.heads_per_layer.push_back(static_cast<int64_t>(plan.kept[l].size()));
  }
  recipe.model.d_head = before.head_dim();  // no longer d_model / n_heads in general

  train::Run pruned = train::build_run(recipe, std::move(run.tokenizer), run.params.front().tensor.dtype());
  const optim::OptimizerState state_before = run.optimizer->state();
  optim::OptimizerState state_after;
  state_after.kind = state_before.kind;
  state_after.step = state_before.step;
  for (size_t i = 0; i < pruned.params.size(); ++i) {
    const layers::NamedParam& to = pruned.params[i];
    const auto from = std::find_if(run.params.begin(), run.params.end(),
                                   [&](const layers::NamedParam& p) { return p.name == to.name; });
    TF_CHECK(from != run.params.end(), "prune_run: the pruned model has a parameter '", to.name, "' the model lacks");
    const Tensor cut = cut_by_name(to.name, from->tensor, cuts);
    TF_CHECK(cut.shape() == to.tensor.shape(), "prune_run: ", to.name, " cut to ", cut.describe(), ", expected ",
             to.tensor.describe());
    std::memcpy(to.tensor.raw_data(), cut.raw_data(), static_cast<size_t>(cut.numel()) * dtype_size(cut.dtype()));
    if (auto s = state_before.params.find(to.name); s != state_before.params.end()) {
      optim::ParamState& slots = state_after.params[to.name];
      slots.step = s->second.step;
      for (const auto& [slot, tensor] : s->second.slots) slots.slots[slot] = cut_by_name(to.name, tensor, cuts);
    }
  }
  pruned.optimizer->load_state(state_after);
  pruned.optimizer->set_lr(run.optimizer->lr());
  pruned.dropout_rng = run.dropout_rng;
  pruned.step = run.step;
  pruned.tokens_seen = run.tokens_seen;
  pruned.run_id = run.run_id;
  pruned.elapsed_seconds = run.elapsed_seconds;
  pruned.budget_steps = run.budget_steps;
  if (run.budget_steps > 0) pruned.schedule = train::run_schedule(pruned.recipe, run.budget_steps);
  return pruned;
}

std::vector<Tensor> pruning_gates(const layers::ModelConfig& config, const PrunePlan& plan, DType dtype) {
  std::vector<Tensor> gates;
  for (int64_t l = 0; l < config.n_layers; ++l) {
    std::vector<double> open(static_cast<size_t>(config.heads(l)), 0.0);
    for (int64_t h : plan.kept.at(static_cast<size_t>(l))) open[static_cast<size_t>(h)] = 1.0;
    gates.push_back(Tensor::from_vector(open, {config.heads(l)}, dtype));
  }
  return gates;
}

}  // namespace tf::inspect
