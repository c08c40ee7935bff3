// The optimizers a recipe can name (optim.name), in one table: how many state slots each keeps per
// parameter (for the memory plan) and how to build it from the recipe's optim section. A new
// optimizer is its own optim/<name>.h/.cpp and one row in factory.cpp; the recipe's choice list, the
// plan and the trainer all read the table.
//
//   auto opt = optim::make_optimizer(refs, recipe.optim);   // train/run.cpp
//   double slots = optim::state_slots(recipe.optim);        // train/plan.cpp
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace tf::optim {

// The recipe's optim section (docs/recipes.md); each optimizer reads the fields it uses.
struct OptimConfig {
  std::string name = "adamw";  // one of optimizer_names()
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double momentum = 0.9;       // sgd
  bool nesterov = false;       // sgd
  double muon_lr = 0.02;       // muon: the hidden matrices' peak rate (optim.lr is AdamW's, for the rest)
  double muon_momentum = 0.95; // muon
  bool muon_nesterov = true;   // muon
  bool decay_biases_and_norms = false;
  bool decay_embeddings = false;
};

std::vector<std::string> optimizer_names();  // "sgd", "adam", "adamw", "muon"
// Tensors of state per parameter tensor, each of the parameter's size (Adam: 2, SGD with momentum: 1).
// One number for every parameter, so Muon declares AdamW's 2, the most any of its parameters keeps:
// its hidden matrices keep 1, and the memory plan over-counts them by one tensor each.
int state_slots(const OptimConfig& config);
// Throws tf::Error for a name not in optimizer_names() (a recipe's choice is validated before).
std::unique_ptr<Optimizer> make_optimizer(std::vector<ParamRef> params, const OptimConfig& config);

}  // namespace tf::optim
