// The table of optimizers; see factory.h.
#include "optim/factory.h"

#include "framework/error.h"
#include "optim/adam.h"
#include "optim/muon.h"
#include "optim/sgd.h"

namespace tf::optim {

namespace {

struct Entry {
  const char* name;
  int (*state_slots)(const OptimConfig&);
  std::unique_ptr<Optimizer> (*make)(std::vector<ParamRef>, const OptimConfig&);
};

AdamOptions adam_options(const OptimConfig& c) { return {c.lr, c.beta1, c.beta2, c.eps, c.weight_decay}; }

const Entry kOptimizers[] = {
    {"sgd", [](const OptimConfig& c) { return c.momentum > 0 ? 1 : 0; },
     [](std::vector<ParamRef> p, const OptimConfig& c) -> std::unique_ptr<Optimizer> {
       return std::make_unique<Sgd>(std::move(p), SgdOptions{c.lr, c.momentum, c.nesterov, c.weight_decay});
     }},
    {"adam", [](const OptimConfig&) { return 2; },  // exp_avg, exp_avg_sq
     [](std::vector<ParamRef> p, const OptimConfig& c) -> std::unique_ptr<Optimizer> {
       return std::make_unique<Adam>(std::move(p), adam_options(c));
     }},
    {"adamw", [](const OptimConfig&) { return 2; },
     [](std::vector<ParamRef> p, const OptimConfig& c) -> std::unique_ptr<Optimizer> {
       return std::make_unique<AdamW>(std::move(p), adam_options(c));
     }},
    {"muon", [](const OptimConfig&) { return 2; },  // hidden matrices 1 (momentum_buffer), the rest AdamW's 2
     [](std::vector<ParamRef> p, const OptimConfig& c) -> std::unique_ptr<Optimizer> {
       return std::make_unique<Muon>(std::move(p), MuonOptions{c.muon_lr, c.muon_momentum, c.muon_nesterov,
                                                               adam_options(c)});
     }},
};

const Entry& entry(const std::string& name) {
  for (const Entry& e : kOptimizers)
    if (name == e.name) return e;
  TF_CHECK(false, "unknown optimizer '", name, "'");
  return kOptimizers[0];
}

}  // namespace

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const Entry& e : kOptimizers) names.emplace_back(e.name);
  return names;
}

int state_slots(const OptimConfig& config) { return entry(config.name).state_slots(config); }

std::unique_ptr<Optimizer> make_optimizer(std::vector<ParamRef> params, const OptimConfig& config) {
  return entry(config.name).make(std::move(params), config);
}

}  // namespace tf::optim
