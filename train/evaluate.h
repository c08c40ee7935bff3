// Evaluation of a language model on held-out text: token-weighted loss, perplexity, bits per
// character (GPT), masked-LM accuracy (BERT), and the trivial baselines to compare them with.
//
//   auto val = tf::data::CausalBatcher::sequential(val_ids, 16, 128);
//   tf::train::EvalResult r = tf::train::evaluate_causal(gpt, val, 0, tf::train::count_code_points(val_text));
//   // r.loss (nats/token), r.perplexity, r.bits_per_char vs tf::train::unigram_bits_per_char(val_text)
//
//   auto mlm = tf::data::MaskedLmBatcher::sequential(val_ids, 16, 128, /*seed=*/7, tokens);
//   tf::train::EvalResult m = tf::train::evaluate_masked(bert, mlm, 0);
//   // m.mlm_accuracy vs tf::train::baseline_most_frequent_accuracy(mlm, 0)
//
// Every function here rewinds the sequential batcher first (so repeated calls see the same batches
// and give the same figures), runs the model in eval mode under NoGradGuard (nothing is recorded
// on the tape), and reads at most max_batches batches (0 = the whole pass). A random (training)
// batcher is never done: give it max_batches > 0. `ctx` may carry head gates (layers::Context);
// it must not be a training context.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "data/batcher.h"
#include "framework/error.h"
#include "layers/models/model.h"

namespace tf::train {

// A number for JSON in the shortest form that reads back to the same double (metrics.jsonl is an exact
// record: resumed and straight runs compare bit for bit; eval --json hands other tools every digit).
// Non-finite values have no JSON form: "null".
std::string json_number(double v);

struct EvalResult {
  double loss = 0;        // mean cross-entropy in nats per predicted token
  double perplexity = 0;  // exp(loss)
  double bits_per_char = std::numeric_limits<double>::quiet_NaN();  // causal with chars known
  double mlm_accuracy = std::numeric_limits<double>::quiet_NaN();   // masked: argmax == target
  int64_t tokens = 0;   // predicted tokens (targets other than kIgnoreIndex)
  int64_t chars = 0;    // characters those tokens stand for (see Note [bits per character])
  int64_t batches = 0;  // batches read
};

// Next-token loss over the batcher's targets. chars_in_text: the number of characters (code
// points) of the text the batcher's ids encode, for bits_per_char; 0 = unknown (bits_per_char
// stays NaN, chars 0).
EvalResult evaluate_causal(const layers::LanguageModel& model, data::CausalBatcher& sequential_batcher,
                           int64_t max_batches, int64_t chars_in_text, const layers::Context& ctx = {});

// Masked-LM loss and accuracy over the masked positions of the batcher's batches.
EvalResult evaluate_masked(const layers::LanguageModel& model, data::MaskedLmBatcher& sequential_batcher,
                           int64_t max_batches, const layers::Context& ctx = {});

// Rewinds the batcher and calls f(batch) for each batch of the pass, at most max_batches of them
// (0 = all); returns how many were read. `what` names the caller in the error for max_batches < 0.
template <class Batcher, class F>
int64_t for_each_batch(Batcher& batcher, int64_t max_batches, const char* what, F&& f) {
  TF_CHECK_INPUT(max_batches >= 0, what, ": max_batches must be >= 0 (0 = the whole pass), got ", max_batches);
  batcher.rewind();
  int64_t batches = 0;
  while (!batcher.done() && (max_batches == 0 || batches < max_batches)) {
    f(batcher.next());
    ++batches;
  }
  return batches;
}

// The accuracy of always predicting the most frequent target among the masked positions of the
// same batches evaluate_masked reads: BERT's floor. It picks the constant after seeing the
// targets, so no constant predictor does better on these batches. 0 when there are no targets.
double baseline_most_frequent_accuracy(data::MaskedLmBatcher& sequential_batcher, int64_t max_batches);

// What predictors that ignore context score on the masked positions of those batches, each fitted to
// the targets it is scored on (so no predictor of its kind does better there; Note [masked baselines]).
struct MaskedBaselines {
  double most_frequent_accuracy = 0;  // always the most frequent target
  double unigram_loss = 0;            // nats: the targets' entropy H(target), the best loss that ignores input
  // From the position's own input token alone: the unigram behind [MASK], else mostly a copy of the
  // visible token (BERT keeps 10% of the chosen tokens unchanged); its accuracy and loss in nats.
  double own_token_accuracy = 0;
  double own_token_loss = 0;
};
MaskedBaselines masked_baselines(data::MaskedLmBatcher& sequential_batcher, int64_t max_batches);

// The entropy, in bits, of the code-point unigram distribution of `text`: H = -sum_c p(c) log2 p(c)
// with p(c) the frequency of character c. The bits per character of the best model that ignores
// context: GPT's floor. tf::InputError for an empty text or invalid UTF-8.
double unigram_bits_per_char(std::string_view text);
// The same of a tokenized text, read a slice at a time (a validation shard of any size). A char
// tokenizer's ids are its characters (those outside its vocabulary count as one, <unk>); other
// tokenizers' ids are decoded; NaN for the ids tokenizer (a corpus tokenized elsewhere: no text).
double unigram_bits_per_char(const data::Tokenizer& tokenizer, const data::Tokens& ids);

// The number of code points of a UTF-8 text (the chars_in_text of evaluate_causal).
// tf::InputError naming the offset of the first invalid byte.
int64_t count_code_points(std::string_view text);

}  // namespace tf::train
