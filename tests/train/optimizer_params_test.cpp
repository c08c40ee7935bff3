// The optimizer's view of a model (train::optimizer_params): which parameters decay and which are the
// hidden matrices Muon orthogonalises, named by hand for a tiny GPT with an untied head and a BERT.
#include <gtest/gtest.h>

#include <set>

#include "train/run.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

struct Groups {
  std::set<std::string> hidden, decayed;
};

Groups groups_of(const std::string& recipe, std::vector<std::string> sets) {
  Recipe r = parse_recipe(tf::testing::read_file(tf::testing::source_path("recipes/" + recipe + ".yaml")),
                          recipe + ".yaml", sets);
  r.model.vocab_size = 11;  // the trainer sets it from the tokenizer
  Groups g;
  for (const optim::ParamRef& p : optimizer_params(layers::parameter_shapes(r.model), r.optim)) {
    if (p.hidden_matrix) g.hidden.insert(p.name);
    if (p.decay) g.decayed.insert(p.name);
  }
  return g;
}

std::set<std::string> block_matrices(int layers, const std::vector<std::string>& more = {}) {
  std::set<std::string> names(more.begin(), more.end());
  for (int i = 0; i < layers; ++i)
    for (const char* m : {"attn.qkv", "attn.proj", "mlp.fc", "mlp.proj"})
      names.insert("blocks." + std::to_string(i) + "." + m + ".weight");
  return names;
}

TEST(OptimizerParams, HiddenMatricesAreTheBlocksWeightsNotTheEmbeddingsOrTheHead) {
  const Groups gpt = groups_of("tiny_gpt", {"optim.name=muon", "model.tie_embeddings=false"});
  EXPECT_EQ(gpt.hidden, block_matrices(2));
  // The head is not a hidden matrix, but it decays like one; the embeddings do neither.
  EXPECT_EQ(gpt.decayed, block_matrices(2, {"lm_head.weight"}));

  // A BERT's MLM transform is a (C, C) matrix inside the network; its decoder is the tied embedding.
  const Groups bert = groups_of("tiny_bert", {"optim.name=muon"});
  EXPECT_EQ(bert.hidden, block_matrices(2, {"mlm_head.dense.weight"}));
}

TEST(OptimizerParams, DecayFlagsAddBiasesNormsAndEmbeddingsButNoHiddenMatrix) {
  const Groups all = groups_of("tiny_gpt", {"optim.decay_embeddings=true", "optim.decay_biases_and_norms=true"});
  EXPECT_EQ(all.hidden, block_matrices(2));
  EXPECT_TRUE(all.decayed.count("token_embedding.weight"));
  EXPECT_TRUE(all.decayed.count("blocks.1.ln_2.weight"));
  EXPECT_TRUE(all.decayed.count("blocks.0.attn.qkv.bias"));
}

}  // namespace
}  // namespace tf::train
