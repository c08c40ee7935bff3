// Batchers: contiguous windows, shifted targets, BERT masking proportions within binomial bounds,
// BERT's loop bit for bit at the defaults, SpanBERT's spans,
// specials never chosen, sequential evaluation passes, and exact resumption from saved state.
#include "data/batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "data/char_tokenizer.h"
#include "framework/error.h"
#include "framework/random.h"

namespace tf::data {
namespace {

std::vector<int32_t> arange(int32_t n) {
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

int32_t at(const Tensor& t, int64_t b, int64_t i) { return t.data<int32_t>()[b * t.dim(1) + i]; }

bool same_ids(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::equal(a.data<int32_t>(), a.data<int32_t>() + a.numel(), b.data<int32_t>());
}

TEST(CausalBatcher, WindowsAreContiguousAndTargetsShiftedByOne) {
  // With ids 0..n-1 a window is contiguous exactly when each id is its predecessor plus one.
  const int32_t n = 40, T = 8, B = 16;
  CausalBatcher batcher(arange(n), B, T, 3);
  std::vector<int> starts_seen(n, 0);
  for (int step = 0; step < 20; ++step) {
    const CausalBatch batch = batcher.next();
    ASSERT_EQ(batch.inputs.shape(), Shape({B, T}));
    ASSERT_EQ(batch.targets.dtype(), DType::i32);
    for (int64_t b = 0; b < B; ++b) {
      const int32_t start = at(batch.inputs, b, 0);
      ASSERT_GE(start, 0);
      ASSERT_LE(start + T, n - 1);  // the last target exists
      ++starts_seen[start];
      for (int64_t t = 0; t < T; ++t) {
        ASSERT_EQ(at(batch.inputs, b, t), start + t);
        ASSERT_EQ(at(batch.targets, b, t), start + t + 1);
      }
    }
  }
  // 320 draws over 32 possible starts: each start, first and last included, turns up.
  for (int s = 0; s <= n - T - 1; ++s) EXPECT_GT(starts_seen[s], 0) << "start " << s;
}

TEST(CausalBatcher, RestoredStateGivesTheSameNextBatch) {
  CausalBatcher batcher(arange(1000), 4, 16, 11);
  for (int i = 0; i < 3; ++i) batcher.next();
  const BatcherState saved = batcher.state();
  const CausalBatch expected = batcher.next();

  CausalBatcher resumed(arange(1000), 4, 16, 999);  // any seed: restore replaces it
  resumed.restore(saved);
  const CausalBatch got = resumed.next();
  EXPECT_TRUE(same_ids(got.inputs, expected.inputs));
  EXPECT_TRUE(same_ids(got.targets, expected.targets));
  EXPECT_FALSE(same_ids(CausalBatcher(arange(1000), 4, 16, 12).next().inputs, expected.inputs));
}

TEST(CausalBatcher, SequentialPassCoversEveryTargetOnce) {
  // n = 23, T = 5: windows start at 0, 5, 10, 15, 20; batches of 2, 2 and 1 rows.
  CausalBatcher eval = CausalBatcher::sequential(arange(23), 2, 5);
  std::vector<int> target_count(23, 0);
  std::vector<int64_t> rows;
  while (!eval.done()) {
    const CausalBatch batch = eval.next();
    rows.push_back(batch.inputs.dim(0));
    for (int64_t b = 0; b < batch.inputs.dim(0); ++b)
      for (int64_t t = 0; t < 5; ++t) {
        const int32_t target = at(batch.targets, b, t);
        if (target == kIgnoreIndex) continue;
        EXPECT_EQ(target, at(batch.inputs, b, t) + 1);
        ++target_count[target];
      }
  }
  EXPECT_EQ(rows, (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(target_count[0], 0);
  for (int i = 1; i < 23; ++i) EXPECT_EQ(target_count[i], 1) << "token " << i;
  EXPECT_THROW(eval.next(), Error);
  eval.rewind();
  EXPECT_EQ(at(eval.next().inputs, 1, 0), 5);
}

TEST(CausalBatcher, TooShortCorpusIsAnInputError) {
  EXPECT_THROW(CausalBatcher(arange(8), 2, 8, 0), InputError);
  EXPECT_NO_THROW(CausalBatcher(arange(9), 2, 8, 0));
}

// Vocabulary of 100: ordinary ids 1..95; 0 is an <unk>-like special found in the text;
// 96..99 are [PAD] [MASK] [CLS] [SEP]. The corpus cycles 0, 1, ..., 95, so a row's original
// tokens are fixed by any one position left unchanged.
MaskedLmTokens test_tokens() { return {96, 97, 98, 99, 100, {0}}; }
std::vector<int32_t> cyclic_ids(int n) {
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i % 96;
  return ids;
}
bool special(int32_t id) { return id == 0 || id >= 96; }

// Statistics of the masking over many batches.
struct MaskCounts {
  int64_t candidates = 0, chosen = 0, as_mask = 0, as_random = 0, unchanged = 0;
};

// Checks one row against the corpus and adds to the counts; L real tokens after [CLS].
void check_row(const MaskedLmBatch& batch, int64_t b, int64_t L, MaskCounts& counts) {
  const int64_t T = batch.inputs.dim(1);
  ASSERT_EQ(at(batch.inputs, b, 0), 98);
  ASSERT_EQ(at(batch.inputs, b, L + 1), 99);
  // The window's first id, from the first unchosen non-special position.
  int64_t offset = -1;
  for (int64_t t = 1; t <= L && offset < 0; ++t)
    if (at(batch.targets, b, t) == kIgnoreIndex && !special(at(batch.inputs, b, t)))
      offset = ((at(batch.inputs, b, t) - (t - 1)) % 96 + 96) % 96;
  ASSERT_GE(offset, 0);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t input = at(batch.inputs, b, t), target = at(batch.targets, b, t);
    const float attention = batch.attention_mask.data<float>()[b * T + t];
    if (t == 0 || t > L) {  // [CLS], [SEP], [PAD]: never chosen
      ASSERT_EQ(target, kIgnoreIndex);
      ASSERT_EQ(input, t == 0 ? 98 : t == L + 1 ? 99 : 96);
      ASSERT_EQ(attention, t <= L + 1 ? 1.0f : 0.0f);
      continue;
    }
    ASSERT_EQ(attention, 1.0f);
    const int32_t original = static_cast<int32_t>((offset + t - 1) % 96);
    if (special(original)) {
      ASSERT_EQ(target, kIgnoreIndex) << "special token chosen";
      ASSERT_EQ(input, original);
      continue;
    }
    ++counts.candidates;
    if (target == kIgnoreIndex) {
      ASSERT_EQ(input, original);
      continue;
    }
    ASSERT_EQ(target, original);
    ++counts.chosen;
    ASSERT_TRUE(input == original || input == 97 || !special(input)) << "random special " << input;
    if (input == 97) ++counts.as_mask;
    else if (input != original) ++counts.as_random;
    else ++counts.unchanged;
  }
}

// |observed - n p| within 5 standard deviations of Binomial(n, p): fails by chance < 1e-6.
void expect_binomial(int64_t observed, int64_t n, double p, const char* what) {
  const double sd = std::sqrt(n * p * (1 - p));
  EXPECT_LT(std::abs(observed - n * p), 5 * sd) << what << ": " << observed << " of " << n << ", expected p " << p;
}

TEST(MaskedLmBatcher, MaskingProportionsWithinBinomialBounds) {
  const int64_t B = 32, T = 130, L = T - 2;
  MaskedLmBatcher batcher(cyclic_ids(5000), B, T, 5, test_tokens());
  MaskCounts counts;
  for (int step = 0; step < 40; ++step) {
    const MaskedLmBatch batch = batcher.next();
    ASSERT_EQ(batch.inputs.shape(), Shape({B, T}));
    ASSERT_EQ(batch.attention_mask.dtype(), DType::f32);
    for (int64_t b = 0; b < B; ++b) check_row(batch, b, L, counts);
  }
  ASSERT_GT(counts.candidates, 150000);
  expect_binomial(counts.chosen, counts.candidates, 0.15, "chosen");
  // A random replacement equals the original with probability 1/95 and then looks unchanged.
  expect_binomial(counts.as_mask, counts.chosen, 0.8, "[MASK]");
  expect_binomial(counts.as_random, counts.chosen, 0.1 * 94.0 / 95.0, "random");
  expect_binomial(counts.unchanged, counts.chosen, 0.1 + 0.1 / 95.0, "unchanged");
}

TEST(MaskedLmBatcher, ShortTextIsPaddedAndEveryRowHasATarget) {
  const std::vector<int32_t> ids = {5, 6, 7, 8, 9};
  MaskedLmBatcher batcher(ids, 64, 10, 2, test_tokens());
  const MaskedLmBatch batch = batcher.next();
  MaskCounts counts;
  for (int64_t b = 0; b < 64; ++b) {
    check_row(batch, b, 5, counts);
    int targets = 0;
    for (int64_t t = 0; t < 10; ++t) targets += at(batch.targets, b, t) != kIgnoreIndex;
    EXPECT_GE(targets, 1) << "row " << b;
  }
}

TEST(MaskedLmBatcher, SequentialEvaluationWalksTheIdsInOrderAndRepeats) {
  // n = 25, T = 7 (5 text tokens per row): windows 0, 5, 10, 15, 20 in batches of 2, 2, 1.
  MaskedLmBatcher eval = MaskedLmBatcher::sequential(cyclic_ids(25), 2, 7, 9, test_tokens());
  std::vector<int32_t> originals;
  std::vector<Tensor> first_pass;
  while (!eval.done()) {
    const MaskedLmBatch batch = eval.next();
    first_pass.push_back(batch.inputs);
    for (int64_t b = 0; b < batch.inputs.dim(0); ++b)
      for (int64_t t = 1; t <= 5; ++t)
        originals.push_back(at(batch.targets, b, t) != kIgnoreIndex ? at(batch.targets, b, t) : at(batch.inputs, b, t));
  }
  EXPECT_EQ(originals, cyclic_ids(25));
  ASSERT_EQ(first_pass.size(), 3u);
  EXPECT_EQ(first_pass[2].dim(0), 1);
  eval.rewind();
  for (const Tensor& expected : first_pass) EXPECT_TRUE(same_ids(eval.next().inputs, expected));
}

TEST(MaskedLmBatcher, RestoredStateGivesTheSameNextBatch) {
  MaskedLmBatcher batcher(cyclic_ids(3000), 8, 32, 21, test_tokens());
  batcher.next();
  batcher.next();
  const BatcherState saved = batcher.state();
  const MaskedLmBatch expected = batcher.next();
  MaskedLmBatcher resumed(cyclic_ids(3000), 8, 32, 5, test_tokens());  // restore replaces the seed
  resumed.restore(saved);
  const MaskedLmBatch got = resumed.next();
  EXPECT_TRUE(same_ids(got.inputs, expected.inputs));
  EXPECT_TRUE(same_ids(got.targets, expected.targets));
}

TEST(MaskedLmBatcher, ReplacementSharesFollowTheOptions) {
  const int64_t B = 32, T = 130, L = T - 2;
  MaskedLmBatcher batcher(cyclic_ids(5000), B, T, 6, test_tokens(),
                          {.prob = 0.3, .mask_replace_prob = 0.5, .random_replace_prob = 0.3});
  MaskCounts counts;
  for (int step = 0; step < 30; ++step) {
    const MaskedLmBatch batch = batcher.next();
    for (int64_t b = 0; b < B; ++b) check_row(batch, b, L, counts);
  }
  expect_binomial(counts.chosen, counts.candidates, 0.3, "chosen");
  expect_binomial(counts.as_mask, counts.chosen, 0.5, "[MASK]");
  expect_binomial(counts.as_random, counts.chosen, 0.3 * 94.0 / 95.0, "random");
  expect_binomial(counts.unchanged, counts.chosen, 0.2 + 0.3 / 95.0, "unchanged");
}

// BERT's loop written out (Devlin et al. 2019, appendix A.1), the draws in the batcher's order: the
// default options must mask exactly as this does, so runs and checkpoints made before the options
// existed resume and evaluate unchanged.
TEST(MaskedLmBatcher, DefaultOptionsDrawAsBertsLoop) {
  const int64_t B = 4, T = 40, L = T - 2;
  const std::vector<int32_t> ids = cyclic_ids(3000);
  MaskedLmBatcher batcher(ids, B, T, 17, test_tokens());
  Rng rng(17);
  std::vector<int32_t> ordinary;
  for (int32_t id = 1; id < 96; ++id) ordinary.push_back(id);
  for (int step = 0; step < 5; ++step) {
    const MaskedLmBatch batch = batcher.next();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t start = rng.uniform_int(static_cast<int64_t>(ids.size()) - L + 1);
      std::vector<int32_t> in(ids.begin() + start, ids.begin() + start + L), tgt(L, kIgnoreIndex);
      std::vector<int64_t> chosen;
      for (int64_t t = 0; t < L; ++t)
        if (!special(in[t]) && rng.uniform() < 0.15) chosen.push_back(t);
      ASSERT_FALSE(chosen.empty());  // the fallback draw never happens with these sizes and seed
      for (const int64_t t : chosen) {
        tgt[t] = in[t];
        const double u = rng.uniform();
        if (u < 0.8) in[t] = 97;
        else if (u < 0.9) in[t] = ordinary[rng.uniform_int(static_cast<int64_t>(ordinary.size()))];
      }
      for (int64_t t = 0; t < L; ++t) {
        ASSERT_EQ(at(batch.inputs, b, t + 1), in[t]) << "step " << step << " row " << b << " position " << t;
        ASSERT_EQ(at(batch.targets, b, t + 1), tgt[t]) << "step " << step << " row " << b << " position " << t;
      }
    }
  }
}

// Maximal runs of chosen positions in a row: (first position, length).
std::vector<std::pair<int64_t, int64_t>> chosen_runs(const MaskedLmBatch& batch, int64_t b) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t t = 0; t < batch.targets.dim(1); ++t) {
    if (at(batch.targets, b, t) == kIgnoreIndex) continue;
    if (!runs.empty() && runs.back().first + runs.back().second == t) ++runs.back().second;
    else runs.push_back({t, 1});
  }
  return runs;
}

TEST(MaskedLmBatcher, SpansReachTheShareWithGeometricLengthsAndOneCorruptionEach) {
  // Sparse spans (2% of 1,000 positions) rarely touch, so a maximal run is one span. Lengths
  // geometric with mean 3, capped at 10: E = sum_{l=0}^{9} (2/3)^l = 3 (1 - (2/3)^10) = 2.948.
  const int64_t B = 16, T = 1002, L = T - 2;
  MaskedLmBatcher batcher(cyclic_ids(20000), B, T, 8, test_tokens(),
                          {.prob = 0.02, .mask_replace_prob = 0.5, .random_replace_prob = 0.0, .span = 3});
  int64_t runs = 0, run_length = 0, longest = 0, multi = 0, mixed = 0;
  for (int step = 0; step < 25; ++step) {
    const MaskedLmBatch batch = batcher.next();
    for (int64_t b = 0; b < B; ++b) {
      int64_t candidates = 0, chosen = 0;
      for (int64_t t = 1; t <= L; ++t) {
        candidates += !special(at(batch.targets, b, t) != kIgnoreIndex ? at(batch.targets, b, t) : at(batch.inputs, b, t));
        chosen += at(batch.targets, b, t) != kIgnoreIndex;
      }
      const int64_t budget = std::llround(0.02 * static_cast<double>(candidates));
      EXPECT_GE(chosen, budget);  // spans are added until the share is reached ...
      EXPECT_LT(chosen, budget + kMaxMaskSpan);  // ... and the last one overshoots by less than a span
      for (const auto& [first, length] : chosen_runs(batch, b)) {
        ++runs;
        run_length += length;
        longest = std::max(longest, length);
        if (length < 2) continue;
        ++multi;
        bool any_mask = false, any_kept = false;
        for (int64_t t = first; t < first + length; ++t) (at(batch.inputs, b, t) == 97 ? any_mask : any_kept) = true;
        mixed += any_mask && any_kept;
      }
    }
  }
  ASSERT_GT(runs, 1500);
  EXPECT_NEAR(static_cast<double>(run_length) / static_cast<double>(runs), 2.948, 0.3);
  EXPECT_LE(longest, 2 * kMaxMaskSpan);  // two capped spans side by side at most, in practice
  // One draw per span: a run of two or more is all [MASK] or all kept, save where spans touched
  // (drawn independently, half of those runs would mix).
  EXPECT_LT(static_cast<double>(mixed) / static_cast<double>(multi), 0.1) << mixed << " of " << multi;
}

TEST(MaskedLmBatcher, BadMaskingOptionsAreInputErrors) {
  const auto make = [](MaskingOptions m) { return MaskedLmBatcher(cyclic_ids(100), 1, 10, 0, test_tokens(), m); };
  EXPECT_THROW(make({.prob = 0}), InputError);
  EXPECT_THROW(make({.mask_replace_prob = 0.95, .random_replace_prob = 0.1}), InputError);
  EXPECT_THROW(make({.mask_replace_prob = -0.1}), InputError);
  EXPECT_THROW(make({.span = 0.5}), InputError);
  EXPECT_THROW(make({.span = 11}), InputError);
  EXPECT_NO_THROW(make({.prob = 1, .mask_replace_prob = 1, .random_replace_prob = 0, .span = 10}));
}

TEST(MaskedLmBatcher, TokensFromATokenizer) {
  CharTokenizer tok = CharTokenizer::train("abc", {"[PAD]", "[MASK]", "[CLS]"});
  EXPECT_THROW(MaskedLmTokens::from(tok), InputError);  // no [SEP]
  tok.add_special("[SEP]");
  const MaskedLmTokens tokens = MaskedLmTokens::from(tok);
  EXPECT_EQ(tokens.pad, 4);
  EXPECT_EQ(tokens.sep, 7);
  EXPECT_EQ(tokens.vocab_size, 8);
  EXPECT_EQ(tokens.specials, (std::vector<int32_t>{0, 4, 5, 6, 7}));
  EXPECT_THROW(MaskedLmBatcher(std::vector<int32_t>{1, 2, 9}, 1, 8, 0, tokens), InputError);  // id 9 outside the vocabulary
}

}  // namespace
}  // namespace tf::data
