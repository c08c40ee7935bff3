// The optimizer interface: named parameters, a step() that reads their gradients, and a state
// that a checkpoint saves and restores exactly (a resumed run is bit-identical to an uninterrupted one).
//
// Semantics, following PyTorch's torch.optim:
//  - step() runs without recording (NoGradGuard) and updates each parameter in place from
//    param.grad(). A parameter whose gradient is undefined is skipped entirely: neither it, its
//    state nor its step count changes (so a parameter unused at some step is not decayed either).
//  - State is per parameter, created on the parameter's first update: a step count and named
//    slots ("exp_avg", "momentum_buffer", ...) of the parameter's shape and dtype. Adam's bias
//    correction uses the parameter's own step count, as PyTorch does.
//  - Hyperparameters (lr, betas, weight decay) are configuration, not state: the recipe rebuilds
//    them and the schedule sets lr() before every step; load_state() restores only what the
//    optimizer accumulated.
//
//   std::vector<ParamRef> params = param_refs(model.named_parameters());  // decay chosen by name
//   AdamW opt(params, {.lr = 3e-4, .weight_decay = 0.1});
//   for (int64_t s = 0; ...; ++s) {
//     opt.zero_grad();
//     backward(loss(...));
//     clip_grad_norm(params, 1.0);
//     opt.set_lr(schedule.lr_at(s));
//     opt.step();
//   }
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor.h"

namespace tf::optim {

struct ParamRef {
  std::string name;  // checkpoint key, e.g. "blocks.0.attn.qkv.weight"
  Tensor param;      // the leaf tensor updated in place (f32 in training, f64 in tests)
  bool decay = true; // whether weight decay applies (see no_decay_by_name)
  // A 2-D weight inside the network (not an embedding table or the output head): Muon orthogonalises
  // its update (optim/muon.h); every other optimizer ignores the flag. The caller decides, as it
  // decides `decay` (train/run.cpp, optimizer_params).
  bool hidden_matrix = false;
};

// Which parameters are exempt from weight decay. A pattern is a glob ('*' any run of characters,
// '?' one character). A pattern without a dot is matched against each dot-separated component of
// the name ("bias" matches "blocks.0.attn.qkv.bias"); a pattern with a dot against the whole name
// ("lm_head.*"). The defaults exempt biases, normalisation gains and embeddings, the common
// practice for transformers (e.g. BERT's and GPT-2's training code exclude bias and LayerNorm).
struct NoDecayRule {
  std::vector<std::string> patterns = {"bias", "ln*", "*norm*", "*emb*", "wte", "wpe"};
};
bool glob_match(const std::string& pattern, const std::string& text);
bool exempt_from_decay(const std::string& name, const NoDecayRule& rule = {});

// ParamRefs for (name, tensor) pairs, or for tensors carrying their names; decay from the rule.
// Names must be non-empty and distinct (they are checkpoint keys).
std::vector<ParamRef> param_refs(const std::vector<std::pair<std::string, Tensor>>& named,
                                 const NoDecayRule& rule = {});
std::vector<ParamRef> param_refs(const std::vector<Tensor>& params, const NoDecayRule& rule = {});

// One parameter's accumulated state.
struct ParamState {
  int64_t step = 0;                      // updates this parameter has received
  std::map<std::string, Tensor> slots;   // slot name -> tensor of the parameter's shape and dtype
};

// Everything an optimizer accumulated, keyed by parameter name. Parameters not yet updated have
// no entry. Tensors are copies: later steps do not change a saved state.
struct OptimizerState {
  std::string kind;                            // "sgd", "adam", "adamw", "muon": must match on load
  int64_t step = 0;                            // step() calls so far
  std::map<std::string, ParamState> params;    // by ParamRef::name
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  void step();
  // Drops every parameter's gradient (PyTorch's set_to_none=True): the next backward assigns it.
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);
  int64_t step_count() const { return step_; }
  const std::vector<ParamRef>& params() const { return params_; }
  const char* kind() const { return kind_; }

  OptimizerState state() const;
  // InputError (the state comes from a checkpoint) on another optimizer's state, an unknown
  // parameter name, a missing or unknown slot, or a slot whose shape or dtype differs.
  void load_state(const OptimizerState& state);

 protected:
  Optimizer(std::vector<ParamRef> params, double lr, const char* kind, std::vector<std::string> slot_names);
  // Updates p.param in place from grad; s.step has already been incremented for this update.
  virtual void update(const ParamRef& p, const Tensor& grad, ParamState& s) = 0;
  // Updates the parameters at indices `due` (those with a gradient, in order; their states already
  // counted this step). The base calls update_one on each in turn; an optimizer whose updates are
  // independent and small may spread them over threads (Muon: Note [one matrix per thread]).
  virtual void update_all(const std::vector<size_t>& due);
  void update_one(size_t i);
  ParamState& state_of(size_t i) { return states_[i]; }
  // The slots parameter p keeps: the constructor's list for every parameter, unless an optimizer
  // treats parameters differently (Muon: a momentum buffer for hidden matrices, Adam's two moments
  // for the rest). Creating the state on the first update and load_state() both read it.
  virtual const std::vector<std::string>& slot_names(const ParamRef& p) const;

 private:
  std::vector<ParamRef> params_;
  std::vector<ParamState> states_;  // parallel to params_; slots empty until the first update
  std::vector<size_t> due_;         // this step's parameters with a gradient
  std::vector<std::string> slot_names_;
  double lr_;
  const char* kind_;
  int64_t step_ = 0;
};

}  // namespace tf::optim
