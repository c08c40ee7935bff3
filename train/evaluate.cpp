// Evaluation and baselines; see evaluate.h.
//
// B = batch, T = seq_len, V = vocabulary size.
#include "train/evaluate.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numbers>
#include <unordered_map>

#include "data/char_tokenizer.h"
#include "data/text.h"
#include "framework/autograd/tape.h"
#include "framework/error.h"
#include "framework/ops/cross_entropy.h"

namespace tf::train {

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Totals {
  double nats = 0;       // summed cross-entropy of the predicted tokens
  int64_t tokens = 0;    // predicted tokens
  int64_t correct = 0;   // of which the argmax was the target (when counted)
};

// Adds one batch: logits (B, T, V), targets (B, T) i32 with kIgnoreIndex where nothing is predicted.
void add_batch(const Tensor& logits, const Tensor& targets, bool count_correct, Totals& totals) {
  ops::CrossEntropyOptions summed;
  summed.ignore_index = data::kIgnoreIndex;
  summed.reduction = ops::Reduction::sum;
  totals.nats += ops::cross_entropy(logits, targets, summed).item();
  const int64_t V = logits.dim(logits.rank() - 1);
  const int32_t* target = targets.data<int32_t>();  // (B T)
  dispatch(logits.dtype(), [&](auto zero) {
    using Scalar = decltype(zero);
    for (int64_t i = 0; i < targets.numel(); ++i) {
      if (target[i] == data::kIgnoreIndex) continue;
      ++totals.tokens;
      if (!count_correct) continue;
      const Scalar* row = logits.data<Scalar>() + i * V;  // (V)
      int64_t best = 0;  // the first maximum, as torch.argmax
      for (int64_t v = 1; v < V; ++v)
        if (row[v] > row[best]) best = v;
      totals.correct += best == target[i];
    }
  });
}

void finish(const Totals& totals, EvalResult& r) {
  r.tokens = totals.tokens;
  r.loss = totals.tokens > 0 ? totals.nats / static_cast<double>(totals.tokens) : kNaN;
  r.perplexity = std::exp(r.loss);
}

}  // namespace

// Note [bits per character]
// Bits per character compares models across tokenizers: the total information the model needs,
// in bits, divided by the characters of the text it predicted, sum(nats) / chars / ln 2. The
// batcher holds N = num_tokens() ids encoding the whole text of chars_in_text characters, and a
// pass over it predicts at most N - 1 of them (every id but the first); with max_batches only a
// prefix is predicted. We charge the predicted tokens with their share of the text's characters,
//   chars = chars_in_text * tokens / N,
// that is, we assume every token stands for the text's average chars_in_text / N characters. For
// a character tokenizer that is exact (chars = tokens, so bits_per_char = loss / ln 2); for BPE it
// is exact over a whole pass up to the first token's characters, and over a prefix it assumes the
// prefix is as compressible by the tokenizer as the text on average.
EvalResult evaluate_causal(const layers::LanguageModel& model, data::CausalBatcher& sequential_batcher,
                           int64_t max_batches, int64_t chars_in_text, const layers::Context& eval) {
  TF_CHECK_INPUT(chars_in_text >= 0, "evaluate_causal: chars_in_text must be >= 0 (0 = unknown), got ",
                 chars_in_text);
  TF_CHECK(!eval.training, "evaluate_causal: the context must not be a training one (dropout would be on)");
  const NoGradGuard no_grad;
  Totals totals;
  EvalResult r;
  r.batches = for_each_batch(sequential_batcher, max_batches, "evaluate_causal", [&](const data::CausalBatch& b) {
    const Tensor logits = model.logits(b.inputs, Tensor(), eval);  // (B, T, V)
    add_batch(logits, b.targets, /*count_correct=*/false, totals);
  });
  finish(totals, r);
  if (chars_in_text > 0) {
    const double chars = static_cast<double>(chars_in_text) * static_cast<double>(totals.tokens) /
                         static_cast<double>(sequential_batcher.num_tokens());
    r.chars = std::llround(chars);
    r.bits_per_char = totals.nats / chars / std::numbers::ln2;
  }
  return r;
}

EvalResult evaluate_masked(const layers::LanguageModel& model, data::MaskedLmBatcher& sequential_batcher,
                           int64_t max_batches, const layers::Context& eval) {
  TF_CHECK(!eval.training, "evaluate_masked: the context must not be a training one (dropout would be on)");
  const NoGradGuard no_grad;
  Totals totals;
  EvalResult r;
  r.batches = for_each_batch(sequential_batcher, max_batches, "evaluate_masked", [&](const data::MaskedLmBatch& b) {
    // Logits at every position, though only the ~15% masked ones count: evaluation is rare enough
    // that the generic interface is worth the extra MLM-head work.
    const Tensor logits = model.logits(b.inputs, b.attention_mask, eval);  // (B, T, V)
    add_batch(logits, b.targets, /*count_correct=*/true, totals);
  });
  finish(totals, r);
  r.mlm_accuracy = totals.tokens > 0 ? static_cast<double>(totals.correct) / static_cast<double>(totals.tokens) : kNaN;
  return r;
}

double baseline_most_frequent_accuracy(data::MaskedLmBatcher& sequential_batcher, int64_t max_batches) {
  return masked_baselines(sequential_batcher, max_batches).most_frequent_accuracy;
}

// Note [masked baselines]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A masked position's input is [MASK] 80% of the time, a random token 10% and the target itself 10%
// (Devlin et al. 2019, appendix A.1). So a model that learned no context at all can still copy the
// visible token, and scores well above always guessing the most frequent token. A BERT has learned
// context only where it beats that copier. The baselines, fitted on the batches they are scored on
// (u(t) = n(t) / N, the unigram distribution of the targets):
//   most frequent   always argmax_t u(t): accuracy max_t u(t);
//   unigram         p(t) = u(t): loss H(target) = -sum_t u(t) log u(t);
//   own token       where the input is [MASK], p(t) = u(t); elsewhere p(t) = a [t = input] + (1 - a) u(t),
//                   a the share of those positions whose input is the target (one fitted number, so it
//                   cannot memorise the text). It predicts the input where one is visible.
MaskedBaselines masked_baselines(data::MaskedLmBatcher& sequential_batcher, int64_t max_batches) {
  const int32_t mask = sequential_batcher.tokens().mask;
  std::unordered_map<int32_t, int64_t> count;  // t -> n(t)
  std::vector<std::pair<int32_t, int32_t>> visible;  // (input, target) where the input is not [MASK]
  int64_t total = 0, masked_most = 0;
  std::unordered_map<int32_t, int64_t> masked_count;  // targets behind [MASK]
  for_each_batch(sequential_batcher, max_batches, "masked_baselines", [&](const data::MaskedLmBatch& b) {
    const int32_t* target = b.targets.data<int32_t>();  // (B T)
    const int32_t* input = b.inputs.data<int32_t>();
    for (int64_t i = 0; i < b.targets.numel(); ++i) {
      if (target[i] == data::kIgnoreIndex) continue;
      ++count[target[i]];
      ++total;
      if (input[i] == mask) ++masked_count[target[i]];
      else visible.emplace_back(input[i], target[i]);
    }
  });
  MaskedBaselines r;
  if (total == 0) return r;
  const double N = static_cast<double>(total);
  int32_t most_frequent = 0;
  int64_t most = 0;
  for (const auto& [t, n] : count)
    if (n > most || (n == most && t < most_frequent)) most = n, most_frequent = t;
  r.most_frequent_accuracy = static_cast<double>(most) / N;
  auto u = [&](int32_t t) { return static_cast<double>(count.at(t)) / N; };
  for (const auto& [t, n] : count) r.unigram_loss -= static_cast<double>(n) / N * std::log(u(t));
  int64_t copied = 0;
  for (const auto& [input, target] : visible) copied += input == target;
  const double a = visible.empty() ? 0.0 : static_cast<double>(copied) / static_cast<double>(visible.size());
  double nats = 0;
  for (const auto& [t, n] : masked_count) nats -= static_cast<double>(n) * std::log(u(t));
  for (const auto& [input, target] : visible) nats -= std::log((input == target ? a : 0.0) + (1 - a) * u(target));
  r.own_token_loss = nats / N;
  masked_most = masked_count.count(most_frequent) ? masked_count.at(most_frequent) : 0;
  r.own_token_accuracy = static_cast<double>(masked_most + copied) / N;
  return r;
}

namespace {

// Calls f(code point) for each character of a valid UTF-8 text; InputError at the first bad byte.
template <class F>
void for_each_code_point(std::string_view text, const char* what, F&& f) {
  const size_t bad = data::first_invalid_utf8(text);
  TF_CHECK_INPUT(bad == std::string_view::npos, what, ": the text is not valid UTF-8 at byte ", bad);
  for (size_t i = 0; i < text.size();) {
    const size_t length = data::utf8_sequence_length(text, i);
    f(data::utf8_decode(text.data() + i, length));
    i += length;
  }
}

}  // namespace

namespace {

double entropy_bits(const std::unordered_map<char32_t, int64_t>& count, int64_t n) {
  double bits = 0;  // H = -sum_c p(c) log2 p(c) (Shannon 1948)
  for (const auto& [c, k] : count) {
    const double p = static_cast<double>(k) / static_cast<double>(n);
    bits -= p * std::log2(p);
  }
  return bits;
}

}  // namespace

double unigram_bits_per_char(const data::Tokenizer& tokenizer, const data::Tokens& ids) {
  TF_CHECK_INPUT(!ids.empty(), "unigram_bits_per_char: the text is empty");
  if (tokenizer.kind() == "ids") return std::numeric_limits<double>::quiet_NaN();  // ids stand for no known text
  std::unordered_map<char32_t, int64_t> count;  // code point (char: id) -> occurrences
  int64_t n = 0;
  constexpr int64_t kSlice = 1 << 20;
  std::vector<int32_t> slice;
  std::string carry;  // a character whose bytes a slice boundary split
  for (int64_t at = 0; at < ids.size(); at += kSlice) {
    slice.resize(std::min(kSlice, ids.size() - at));
    ids.copy(at, static_cast<int64_t>(slice.size()), slice.data());
    ids.release_before(at + static_cast<int64_t>(slice.size()));  // a shard's pages, read once
    if (tokenizer.kind() == "char") {
      for (const int32_t id : slice) ++count[static_cast<char32_t>(id)];
      n += static_cast<int64_t>(slice.size());
      continue;
    }
    std::string text = carry + tokenizer.decode(slice);
    // The last character may continue in the next slice: from its lead byte on, carry it over.
    size_t end = text.size();
    size_t lead = end;
    while (lead > 0 && end - lead < 4 && (static_cast<unsigned char>(text[lead - 1]) & 0xC0) == 0x80) --lead;
    if (lead > 0 && at + kSlice < ids.size() && data::utf8_sequence_length(text, lead - 1) == 0) end = lead - 1;
    carry = text.substr(end);
    for (size_t i = 0; i < end;) {
      const size_t length = std::max<size_t>(1, data::utf8_sequence_length(text, i));  // a stray byte counts as one
      ++count[length == 1 ? static_cast<unsigned char>(text[i]) : data::utf8_decode(text.data() + i, length)];
      ++n;
      i += length;
    }
  }
  return entropy_bits(count, n);
}

double unigram_bits_per_char(std::string_view text) {
  TF_CHECK_INPUT(!text.empty(), "unigram_bits_per_char: the text is empty");
  std::unordered_map<char32_t, int64_t> count;  // code point -> occurrences
  int64_t n = 0;
  for_each_code_point(text, "unigram_bits_per_char", [&](char32_t c) {
    ++count[c];
    ++n;
  });
  return entropy_bits(count, n);
}

int64_t count_code_points(std::string_view text) {
  int64_t n = 0;
  for_each_code_point(text, "count_code_points", [&](char32_t) { ++n; });
  return n;
}

}  // namespace tf::train
