// A micro-batch split by rows among threads (Note [batch-split threads] in train/thread_split.h)
// gives the loss and the parameter gradients of the same micro-batch run whole on one thread, in
// float64 to 1e-12: for a GPT, and for a BERT whose parts hold different numbers of masked
// targets (weighting each part by its rows instead of its targets would miss by far more), cut
// into 2 and 3 parts of 5 rows. Also: gradients keep accumulating across calls as a parameter's
// do, and which split a recipe gets.
#include <gtest/gtest.h>

#include <cmath>

#include "framework/autograd/tape.h"
#include "framework/error.h"
#include "framework/ops/elementwise.h"
#include "train/run.h"
#include "train/run_fixture.h"
#include "train/thread_split.h"

namespace tf::train {
namespace {

struct Result {
  double loss = 0;
  std::vector<std::vector<double>> grads;  // by parameter
};

std::vector<std::vector<double>> gradients(const Run& run) {
  std::vector<std::vector<double>> out;
  for (const auto& p : run.params) out.push_back(p.tensor.grad().defined() ? p.tensor.grad().to_vector() : std::vector<double>());
  return out;
}

void zero_grads(Run& run) {
  for (auto& p : run.params) p.tensor.zero_grad();
}

void expect_close(const Result& split, const Result& whole, const Run& run, double times = 1) {
  EXPECT_NEAR(split.loss, whole.loss, 1e-12 * std::abs(whole.loss));
  ASSERT_EQ(split.grads.size(), whole.grads.size());
  for (size_t i = 0; i < whole.grads.size(); ++i) {
    SCOPED_TRACE(run.params[i].name);
    ASSERT_EQ(split.grads[i].size(), whole.grads[i].size());
    double scale = 0;
    for (double g : whole.grads[i]) scale = std::max(scale, std::abs(g));
    for (size_t k = 0; k < whole.grads[i].size(); ++k)
      ASSERT_NEAR(split.grads[i][k], times * whole.grads[i][k], 1e-12 * std::max(scale, 1e-300)) << "element " << k;
  }
}

class ThreadSplit : public ::testing::TestWithParam<const char*> {};

TEST_P(ThreadSplit, GivesTheWholeBatchsLossAndGradients) {
  tf::testing::TempDir tmp;
  const auto text = tmp / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(4000));
  const Recipe recipe = tf::testing::tiny_recipe(GetParam(), text, tmp / "run", tmp / "cache",
                                                 {"train.batch_size=5", "model.dropout=0"});
  data::PreparedCorpus corpus = prepare_recipe_corpus(recipe.data, recipe.model.arch, nullptr, true, nullptr);
  train::Run run = build_run(recipe, std::move(corpus.tokenizer), DType::f64);
  Batches batches(run.recipe, *run.tokenizer, corpus.train.tokens, 1);
  const Batch batch = batches.next();
  const layers::Context ctx{true, nullptr, nullptr};
  constexpr double kScale = 0.25;  // as with train.grad_accum 4

  zero_grads(run);
  Result whole;
  {
    const Tensor loss = run.model->loss(batch.inputs, batch.targets, batch.key_padding, ctx);
    whole.loss = loss.item();
    backward(ops::scale(loss, kScale));
    whole.grads = gradients(run);
  }
  if (recipe.model.arch == layers::Architecture::bert) {  // the parts must differ in targets for the test to bite
    const std::vector<double> t = rows(batch.targets, 0, 2).to_vector(), u = rows(batch.targets, 2, 5).to_vector();
    const auto count = [](const std::vector<double>& v) { return std::count_if(v.begin(), v.end(), [](double x) { return x != -100; }); };
    ASSERT_NE(count(t) * 3, count(u) * 2) << "rows 0-1 and 2-4 hold targets in proportion to their rows";
  }
  std::vector<Tensor> params;
  for (const auto& p : run.params) params.push_back(p.tensor);
  for (int64_t parts : {2, 3}) {
    SCOPED_TRACE(std::to_string(parts) + " parts");
    BatchSplit split(params, parts);
    zero_grads(run);
    Result got;
    got.loss = split.run(*run.model, batch.inputs, batch.targets, batch.key_padding, ctx, kScale);
    got.grads = gradients(run);
    expect_close(got, whole, run);
    // A second call adds to the gradients, as a second micro-batch would.
    got.loss = split.run(*run.model, batch.inputs, batch.targets, batch.key_padding, ctx, kScale);
    got.grads = gradients(run);
    expect_close(got, whole, run, 2.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ThreadSplit, ::testing::Values("tiny_gpt", "tiny_bert"));

TEST(ThreadSplit, RowsCopiesARangeOfTheFirstAxis) {
  const Tensor ids = Tensor::from_ids({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(rows(ids, 1, 3).shape(), Shape({2, 2}));
  EXPECT_EQ(rows(ids, 1, 3).to_vector(), (std::vector<double>{3, 4, 5, 6}));
  EXPECT_FALSE(rows(Tensor(), 0, 1).defined());
}

TEST(ThreadSplit, TheRecipeChoosesTheSplit) {
  auto recipe = [](std::vector<std::string> sets) {
    return parse_recipe("model: {arch: gpt}\ntrain: {batch_size: 16}\n", "split.yaml", sets);
  };
  EXPECT_EQ(batch_split_parts(recipe({}), 2, 1), 2);
  EXPECT_EQ(batch_split_parts(recipe({}), 4, 1), 4);
  EXPECT_EQ(batch_split_parts(recipe({}), 1, 1), 1);
  EXPECT_EQ(batch_split_parts(recipe({"train.batch_size=3"}), 8, 1), 3) << "at most one part per row";
  EXPECT_EQ(batch_split_parts(recipe({"train.thread_split=ops"}), 2, 1), 1);
  EXPECT_EQ(batch_split_parts(recipe({"train.thread_split=batch"}), 2, 1), 2);
  // auto keeps the split within ops where a split by rows cannot be.
  EXPECT_EQ(batch_split_parts(recipe({"train.deterministic=true"}), 2, 1), 1);
  EXPECT_EQ(batch_split_parts(recipe({"train.anomaly=true"}), 2, 1), 1);
  EXPECT_EQ(batch_split_parts(recipe({}), 2, 2), 1);
  // batch where it cannot be is the user's error, named.
  for (const auto& [sets, ranks, words] :
       std::vector<std::tuple<std::vector<std::string>, int, std::string>>{
           {{"train.thread_split=batch", "train.deterministic=true"}, 1, "train.deterministic"},
           {{"train.thread_split=batch", "train.anomaly=true"}, 1, "train.anomaly"},
           {{"train.thread_split=batch"}, 2, "more than one rank"}}) {
    try {
      batch_split_parts(recipe(sets), 2, ranks);
      ADD_FAILURE() << "no error for " << words;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("train.thread_split: batch cannot be used with " + words), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tf::train
