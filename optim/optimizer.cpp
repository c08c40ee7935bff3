// The optimizer base: parameter bookkeeping, the step loop, zero_grad, state save and restore.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "framework/autograd/tape.h"

namespace tf::optim {

bool glob_match(const std::string& pattern, const std::string& text) {
  // Iterative matching with backtracking to the last '*': linear in practice for short names.
  size_t p = 0, t = 0, star = std::string::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p, ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++, star_t = t;
    } else if (star != std::string::npos) {
      p = star + 1, t = ++star_t;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool exempt_from_decay(const std::string& name, const NoDecayRule& rule) {
  for (const std::string& pattern : rule.patterns) {
    if (pattern.find('.') != std::string::npos) {
      if (glob_match(pattern, name)) return true;
      continue;
    }
    size_t start = 0;
    while (start <= name.size()) {
      const size_t dot = std::min(name.find('.', start), name.size());
      if (glob_match(pattern, name.substr(start, dot - start))) return true;
      start = dot + 1;
    }
  }
  return false;
}

std::vector<ParamRef> param_refs(const std::vector<std::pair<std::string, Tensor>>& named, const NoDecayRule& rule) {
  std::vector<ParamRef> refs;
  for (const auto& [name, tensor] : named) refs.push_back({name, tensor, !exempt_from_decay(name, rule)});
  return refs;
}

std::vector<ParamRef> param_refs(const std::vector<Tensor>& params, const NoDecayRule& rule) {
  std::vector<std::pair<std::string, Tensor>> named;
  for (const Tensor& t : params) named.emplace_back(t.name(), t);
  return param_refs(named, rule);
}

Optimizer::Optimizer(std::vector<ParamRef> params, double lr, const char* kind, std::vector<std::string> slot_names)
    : params_(std::move(params)), states_(params_.size()), slot_names_(std::move(slot_names)), kind_(kind) {
  set_lr(lr);
  due_.reserve(params_.size());
  std::set<std::string> names;
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamRef& p = params_[i];
    TF_CHECK(!p.name.empty(), kind_, ": parameter ", i, " ", p.param.describe(), " has no name");
    TF_CHECK(names.insert(p.name).second, kind_, ": parameter name '", p.name, "' appears twice");
    TF_CHECK(p.param.dtype() != DType::i32, kind_, ": parameter '", p.name, "' is i32; optimizers update floats");
    for (size_t j = 0; j < i; ++j)  // tied weights must be listed once, or they are updated twice
      TF_CHECK(!params_[j].param.same(p.param), kind_, ": '", params_[j].name, "' and '", p.name,
               "' are the same tensor; list tied parameters once");
  }
}

void Optimizer::set_lr(double lr) {
  TF_CHECK_INPUT(lr >= 0 && std::isfinite(lr), kind_, ": learning rate must be finite and >= 0, got ", lr);
  lr_ = lr;
}

const std::vector<std::string>& Optimizer::slot_names(const ParamRef&) const { return slot_names_; }

void Optimizer::step() {
  NoGradGuard no_grad;
  ++step_;
  due_.clear();  // reserved in the constructor: a step allocates nothing
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamRef& p = params_[i];
    const Tensor grad = p.param.grad();
    if (!grad.defined()) continue;
    check_same_shape(kind_, p.param, grad);
    ParamState& s = states_[i];
    if (s.slots.empty())
      for (const std::string& slot : slot_names(p)) s.slots[slot] = Tensor::zeros(p.param.shape(), p.param.dtype());
    ++s.step;
    due_.push_back(i);
  }
  update_all(due_);
}

void Optimizer::update_all(const std::vector<size_t>& due) {
  for (size_t i : due) update_one(i);
}

void Optimizer::update_one(size_t i) { update(params_[i], params_[i].param.grad(), states_[i]); }

void Optimizer::zero_grad() {
  for (ParamRef& p : params_) p.param.zero_grad();
}

OptimizerState Optimizer::state() const {
  OptimizerState out;
  out.kind = kind_;
  out.step = step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (states_[i].step == 0) continue;
    ParamState& copy = out.params[params_[i].name];
    copy.step = states_[i].step;
    for (const auto& [slot, t] : states_[i].slots) copy.slots[slot] = t.clone();
  }
  return out;
}

void Optimizer::load_state(const OptimizerState& state) {
  TF_CHECK_INPUT(state.kind == kind_, "optimizer state is for '", state.kind, "', this optimizer is '", kind_, "'");
  TF_CHECK_INPUT(state.step >= 0, kind_, " state: negative step count ", state.step);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index[params_[i].name] = i;
  std::vector<ParamState> loaded(params_.size());
  for (const auto& [name, ps] : state.params) {
    const auto it = index.find(name);
    TF_CHECK_INPUT(it != index.end(), kind_, " state names parameter '", name, "', which the model does not have");
    const ParamRef& p = params_[it->second];
    TF_CHECK_INPUT(ps.step > 0 && ps.step <= state.step, kind_, " state of '", name, "': step ", ps.step,
                   " outside [1, ", state.step, "]");
    const std::vector<std::string>& slots = slot_names(p);
    TF_CHECK_INPUT(ps.slots.size() == slots.size(), kind_, " state of '", name, "': ", ps.slots.size(),
                   " slots, expected ", slots.size());
    ParamState& dst = loaded[it->second];
    dst.step = ps.step;
    for (const std::string& slot : slots) {
      const auto st = ps.slots.find(slot);
      TF_CHECK_INPUT(st != ps.slots.end(), kind_, " state of '", name, "': slot '", slot, "' missing");
      TF_CHECK_INPUT(st->second.shape() == p.param.shape() && st->second.dtype() == p.param.dtype(), kind_,
                     " state of '", name, "': slot '", slot, "' is ", st->second.describe(), ", the parameter is ",
                     p.param.describe());
      dst.slots[slot] = st->second.clone();
    }
  }
  states_ = std::move(loaded);  // only now: a refused state leaves the optimizer unchanged
  step_ = state.step;
}

}  // namespace tf::optim
