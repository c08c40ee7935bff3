// Recipe keys that have no effect in a recipe's configuration: an option of a position scheme, a
// mixer or an optimizer the recipe does not use, a window that covers the whole context, a sampling
// option with nothing sampled. A key the user wrote there is an error (recipe.cpp reports it), so a
// setting never silently does nothing.
//
//   for (const InertKey& k : inert_keys(recipe, [&](const std::string& key) { return wrote.count(key); }))
//     report(k.key, k.message);  // "model.rope_theta has no effect: model.position is learned, ..."
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "train/recipe.h"

namespace tf::train {

struct InertKey {
  std::string key;      // "model.rope_theta"
  std::string message;  // the key, the setting that makes it inert, and what to do
};

// The keys for which `written` holds that have no effect in `r`, in the schema's order; each once.
std::vector<InertKey> inert_keys(const Recipe& r, const std::function<bool(const std::string&)>& written);

}  // namespace tf::train
