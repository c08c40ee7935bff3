// The recipe schema: one Field per key, with its type, range, meaning and how to read/write it.
// recipe.cpp walks YAML against this table; docs/recipes.md documents the same table (a test
// checks that every key appears there).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "train/recipe.h"

namespace tf::train {

struct Field {
  std::string key;       // "model.d_model"
  std::string type;      // "integer >= 1", "number in [0, 1)", "one of: gpt, bert", ...
  std::string meaning;
  bool is_string = false;  // emitted quoted in the resolved YAML
  std::function<std::string(const Recipe&)> get;
  // Parses a YAML scalar into the recipe; throws BadValue naming what was expected.
  std::function<void(Recipe&, const std::string&)> set;
  bool is_list = false;    // a YAML list: set from its flow form "[4, 3, 2]" (integers also "4, 3, 2")
};

struct BadValue {
  std::string expected;
};

const std::vector<Field>& recipe_fields();
const Field* find_field(const std::string& key);

}  // namespace tf::train
