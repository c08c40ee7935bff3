// Keys that have no effect in the recipe's configuration are errors naming the key and the setting
// that makes it inert (train/recipe_inert.h): written in the file or by --set, even equal to the
// default; never for the keys a resolved recipe writes for completeness (checkpoints, recipe.yaml).
#include <gtest/gtest.h>

#include <sstream>

#include "support/errors.h"
#include "support/temp_dir.h"
#include "train/recipe.h"
#include "train/trainer.h"

namespace tf::train {
namespace {

// The message of parsing `text` as bad.yaml with `overrides`. (Each key class's message is a case of
// BadRecipe in recipe_test.cpp, instantiation KeysWithoutEffect.)
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return testing::error_message<InputError>([&] { parse_recipe(text, "bad.yaml", overrides); });
}

// An override that changes the configuration (another optimizer, a constant schedule) leaves keys
// of the file without effect that no --set could remove: those are not errors. Nor is a key of the
// file whose configuration an override gives it.
TEST(InertKeys, AnOverrideThatSwitchesTheConfigurationLeavesTheFilesKeysAlone) {
  const std::string text = "optim:\n  beta2: 0.95\nschedule:\n  min_lr: 0.0001\n";
  const Recipe r = parse_recipe(text, "r.yaml", {"optim.name=sgd", "schedule.kind=constant"});
  EXPECT_EQ(r.optim.name, "sgd");
  EXPECT_EQ(parse_recipe("schedule:\n  kind: constant\n  min_lr: 0.0001\n", "r.yaml", {"schedule.kind=cosine"})
                .schedule.kind,
            "cosine");
  // The values a configuration forces, written out, say what happens: not errors.
  EXPECT_NO_THROW(parse_recipe("model:\n  arch: bert\n  tie_embeddings: true\nsample:\n  tokens: 0\n", "r.yaml"));
}

// A window as long as the training windows still acts when sampling, whose context grows to
// model.max_seq_len: only one covering that too has no effect.
TEST(InertKeys, AWindowActsUpToModelMaxSeqLen) {
  const Recipe r =
      parse_recipe("model:\n  max_seq_len: 256\n  attention_window: 128\ndata:\n  seq_len: 128\n", "r.yaml");
  EXPECT_EQ(r.model.attention.window, 128);
  EXPECT_NE(error_of("model:\n  max_seq_len: 256\n  attention_window: 256\ndata:\n  seq_len: 128\n")
                .find("bad.yaml:3:3: model.attention_window (256) covers the whole context of data.seq_len (128) and "
                      "model.max_seq_len (256), so it has no effect"),
            std::string::npos);
}

// A resolved recipe writes every key (the defaults of schemes it does not use included): checkpoints
// store one, and recipe.yaml in a run folder is one, given back to train --resume. Its keys are not
// checked, also when it predates the newest keys; its overrides are.
TEST(InertKeys, AResolvedRecipesKeysAreNotCheckedItsOverridesAre) {
  const Recipe r = parse_recipe("model:\n  position: learned\n", "r.yaml");
  const std::string resolved = r.to_yaml();
  ASSERT_NE(resolved.find("rope_theta:"), std::string::npos) << resolved;
  ASSERT_NE(resolved.find("mamba_state:"), std::string::npos) << resolved;
  EXPECT_EQ(parse_recipe(resolved, "recipe.yaml").to_yaml(), resolved);
  std::string older;  // without the train section's last keys, as a recipe.yaml of an earlier version
  std::istringstream in(resolved);
  for (std::string line; std::getline(in, line);)
    if (line.find("recompute:") == std::string::npos && line.find("sequence_parallel:") == std::string::npos)
      older += line + "\n";
  EXPECT_NO_THROW(parse_recipe(older, "recipe.yaml"));
  EXPECT_NE(error_of(resolved, {"model.rope_theta=500000"}).find(
                "--set model.rope_theta=500000: model.rope_theta has no effect: model.position is learned"),
            std::string::npos);
}

// train.sequence_parallel splits sequences over the ranks of mpirun: with one process there is
// nothing to split them over. The rank count is known only when the run starts.
TEST(InertKeys, SequenceParallelInOneProcessIsRefused) {
  testing::TempDir tmp;
  const Recipe r = parse_recipe("model:\n  position: rope\n", "sp.yaml",
                                {"train.sequence_parallel=zigzag", "checkpoint.dir=" + (tmp.path() / "run").string()});
  TrainOptions options;
  options.dry_run = true;
  std::ostringstream out;
  options.out = &out;
  testing::expect_error<InputError>([&] { train(r, options); },
                                    "train.sequence_parallel: zigzag splits each sequence over the ranks of mpirun, "
                                    "and this run is one process, so it has no effect");
}

}  // namespace
}  // namespace tf::train
