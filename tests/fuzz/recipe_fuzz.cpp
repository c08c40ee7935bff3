// Fuzz target: the recipe parser and validator (train/recipe.h) on arbitrary YAML text and
// `--set key=value` overrides.
//
// Input: the YAML text, then optionally NUL-separated overrides ("yaml\0optim.lr=3e-4\0train.steps=5").
// Expected: a Recipe or a tf::InputError. Invariant: an accepted recipe's to_yaml() parses back to
// a recipe with the same to_yaml() (recipe.h promises "parses back to an equal recipe"; checkpoints
// rely on it to rebuild a run).
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "train/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tf;
  const std::string_view input = fuzz::as_text(data, size);
  const size_t nul = input.find('\0');
  const std::string yaml(input.substr(0, nul));
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    std::string_view rest = input.substr(nul + 1);
    while (true) {
      const size_t next = rest.find('\0');
      overrides.emplace_back(rest.substr(0, next));
      if (next == std::string_view::npos) break;
      rest.remove_prefix(next + 1);
    }
  }

  train::Recipe recipe;
  if (!fuzz::refused_ok([&] { recipe = train::parse_recipe(yaml, "fuzz.yaml", overrides); })) return 0;
  const std::string resolved = recipe.to_yaml();
  train::Recipe again;
  try {
    again = train::parse_recipe(resolved, "resolved.yaml");
  } catch (const InputError& e) {
    fuzz::violated(concat("the resolved recipe does not parse back: ", e.what(), "\n--- resolved:\n", resolved));
  }
  TF_FUZZ_EXPECT(again.to_yaml() == resolved, "the resolved recipe changes on a round trip:\n", resolved,
                 "--- became:\n", again.to_yaml());
  return 0;
}
