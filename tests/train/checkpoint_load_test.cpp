// load_checkpoint on a checkpoint whose own recipe is damaged or forged: refused before anything
// is built (found by the checkpoint fuzz target, tests/fuzz/corpus/checkpoint/forged_huge_model.h5).
#include <gtest/gtest.h>

#include "data/char_tokenizer.h"
#include "framework/io/hdf5_io.h"
#include "support/errors.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"

namespace tf::train {
namespace {

// A file with only what load_checkpoint reads before building the run: format, recipe, tokenizer.
void write_header_only(const std::filesystem::path& file, const std::string& recipe_yaml) {
  H5Writer out(file.string());
  out.write_attr("/", "format_version", kCheckpointFormat);
  out.write_bytes("/", "recipe", recipe_yaml);
  out.write_bytes("/", "tokenizer", data::CharTokenizer::train("abc ").to_string());
  out.close();
}

TEST(CheckpointLoad, RecipeOfAModelLargerThanTheFileIsRefusedBeforeBuildingIt) {
  const tf::testing::TempDir dir;
  // 1024 blocks of width 65536: about 2^45 parameters, which build_run would try to allocate.
  write_header_only(dir / "forged.h5", parse_recipe("model:\n  d_model: 65536\n  n_layers: 1024\n", "r.yaml").to_yaml());
  tf::testing::expect_error<InputError>([&] { load_checkpoint(dir / "forged.h5"); },
                                        "describes a model of at least");
}

TEST(CheckpointLoad, ARecipeThatFitsGetsPastTheSizeCheck) {
  const tf::testing::TempDir dir;
  // Width 4, one block, 5 tokens: about 210 parameters (850 bytes) fit the file; loading then
  // stops at the first missing part (the /model group), not at the size check.
  write_header_only(dir / "small.h5",
                    parse_recipe("model:\n  d_model: 4\n  n_layers: 1\n  n_heads: 1\n  max_seq_len: 8\n"
                                 "data:\n  seq_len: 8\n", "r.yaml").to_yaml());
  const std::string message = tf::testing::error_message<InputError>([&] { load_checkpoint(dir / "small.h5"); });
  EXPECT_EQ(message.find("describes a model"), std::string::npos) << message;
  EXPECT_NE(message.find("'/model' not found"), std::string::npos) << message;
}

}  // namespace
}  // namespace tf::train
