// The warm-up tests' first step (seq_len_warmup_test.cpp, batch_warmup_test.cpp): a fresh run of a
// recipe with its training batcher, and what its first step's loss must be: the untrained model's
// loss on the first batch that batcher draws, cut as the warm-up cuts it, computed by a twin run
// (the same recipe, the same seeds).
#pragma once
#include <functional>
#include <memory>

#include "framework/autograd/tape.h"
#include "train/run.h"
#include "train/step.h"

namespace tf::testing {

struct WarmupStart {
  train::Run run;
  std::unique_ptr<train::Batches> batches;
  double first_loss = 0;  // the twin's loss on the cut first batch
};

// `cut` takes the first batch and returns its (inputs, targets, key_padding) as the first step trains on them.
inline WarmupStart warmup_start(const train::Recipe& r,
                                const std::function<train::Batch(const train::Batch&)>& cut) {
  data::PreparedCorpus corpus = train::prepare_recipe_corpus(r.data, r.model.arch, nullptr, true, nullptr);
  const data::Tokens train_tokens = corpus.train.tokens;
  WarmupStart start{train::build_run(r, std::move(corpus.tokenizer)), nullptr, 0};
  start.batches = std::make_unique<train::Batches>(start.run.recipe, *start.run.tokenizer, train_tokens, 1);

  data::PreparedCorpus again = train::prepare_recipe_corpus(r.data, r.model.arch, nullptr, true, nullptr);
  train::Run twin = train::build_run(r, std::move(again.tokenizer));
  train::Batches twin_batches(twin.recipe, *twin.tokenizer, train_tokens, 1);
  const train::Batch first = cut(twin_batches.next());
  NoGradGuard no_grad;
  start.first_loss =
      twin.model->loss(first.inputs, first.targets, first.key_padding, layers::Context{false, nullptr, nullptr}).item();
  return start;
}

}  // namespace tf::testing
