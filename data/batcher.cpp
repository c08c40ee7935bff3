// Causal (GPT) and masked-LM (BERT) batchers.
#include "data/batcher.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "framework/error.h"

namespace tf::data {

// ---- Causal language modelling ------------------------------------------------------------

CausalBatcher::CausalBatcher(Tokens ids, int64_t batch, int64_t seq_len, uint64_t seed,
                             bool sequential)
    : ids_(std::move(ids)), batch_(batch), seq_len_(seq_len), sequential_(sequential), rng_(seed) {
  TF_CHECK_INPUT(batch > 0 && seq_len > 0, "CausalBatcher: batch and seq_len must be positive, got ", batch, " and ",
                 seq_len);
  const int64_t needed = sequential ? 2 : seq_len + 1;
  TF_CHECK_INPUT(num_tokens() >= needed, "CausalBatcher: ", num_tokens(), " tokens are too few for ",
                 sequential ? "one input and its target" : "one window of seq_len + 1", " (", needed, " needed)");
}

CausalBatcher::CausalBatcher(Tokens ids, int64_t batch, int64_t seq_len, uint64_t seed)
    : CausalBatcher(std::move(ids), batch, seq_len, seed, false) {}

CausalBatcher CausalBatcher::sequential(Tokens ids, int64_t batch, int64_t seq_len) {
  return CausalBatcher(std::move(ids), batch, seq_len, 0, true);
}

bool CausalBatcher::done() const { return sequential_ && cursor_ + 1 >= num_tokens(); }

void CausalBatcher::rewind() {
  cursor_ = 0;
  rng_.set_counter(0);
}

void CausalBatcher::restore(const BatcherState& s) {
  rng_ = Rng(s.seed, s.counter);
  cursor_ = s.cursor;
}

CausalBatch CausalBatcher::next() {
  TF_CHECK(!done(), "CausalBatcher::next: the sequential pass is over (rewind() to start again)");
  const int64_t n = num_tokens(), T = seq_len_;
  // Sequential: as many windows as remain, up to B; each window starts T after the previous one.
  const int64_t rows = sequential_ ? std::min(batch_, (n - 1 - cursor_ + T - 1) / T) : batch_;
  // Written in place: a batch is made every step, and its tensors come from the pools.
  CausalBatch batch{Tensor::empty({rows, T}, DType::i32), Tensor::empty({rows, T}, DType::i32)};
  int32_t* inputs = batch.inputs.data<int32_t>();    // (rows, T)
  int32_t* targets = batch.targets.data<int32_t>();  // (rows, T)
  for (int64_t b = 0; b < rows; ++b) {
    int64_t start;
    if (sequential_) {
      start = cursor_;
      cursor_ += T;
    } else {
      start = rng_.uniform_int(n - T);  // [0, n - T - 1]: the window [start, start + T] fits
    }
    // The window's T + 1 ids, copied once: inputs are ids [start, start + T), targets one further.
    const int64_t have = std::min(T + 1, n - start);
    window_.resize(T + 1);
    ids_.copy(start, have, window_.data());
    for (int64_t t = 0; t < T; ++t) {
      inputs[b * T + t] = t < have ? window_[t] : 0;
      targets[b * T + t] = t + 1 < have ? window_[t + 1] : kIgnoreIndex;
    }
  }
  // Note [windows of a mapped file]: a window faults in whole large folios of the page cache (about
  // 1 MB each, measured on Linux 6.18), not its few hundred bytes; dropping the mapping's pages every
  // kReleaseEvery batches keeps the resident set at a few batches' worth, whatever the corpus's
  // size. The pages stay in the page cache, so the next touch is a minor fault. Measured on 2 cores
  // (gpt_brown_char, batch 16), tokens/s against the in-memory path and peak RSS on 2 GB against
  // 6 MB: release after every batch 0.950 (7 alternating runs); every 2nd 0.970 and +35 MB; every
  // 4th 0.970 and +97 MB; never 1.006, and the RSS grows with the corpus.
  if (sequential_) ids_.release_before(cursor_);
  else if (++batches_since_release_ % kReleaseEvery == 0) ids_.release_before(ids_.size());
  return batch;
}

// ---- Masked language modelling -------------------------------------------------------------

MaskedLmTokens MaskedLmTokens::from(const Tokenizer& tokenizer) {
  MaskedLmTokens t;
  t.pad = tokenizer.id_of("[PAD]");
  t.mask = tokenizer.id_of("[MASK]");
  t.cls = tokenizer.id_of("[CLS]");
  t.sep = tokenizer.id_of("[SEP]");
  t.vocab_size = tokenizer.vocab_size();
  t.specials = tokenizer.special_ids();
  return t;
}

MaskedLmBatcher::MaskedLmBatcher(Tokens ids, int64_t batch, int64_t seq_len, uint64_t seed,
                                 MaskedLmTokens tokens, MaskingOptions masking)
    : ids_(std::move(ids)), batch_(batch), seq_len_(seq_len), seed_(seed), sequential_(false),
      tokens_(std::move(tokens)), masking_(masking), rng_(seed) {
  TF_CHECK_INPUT(batch > 0 && seq_len >= 3, "MaskedLmBatcher: need batch > 0 and seq_len >= 3 ([CLS] x [SEP]), got ",
                 batch, " and ", seq_len);
  const MaskingOptions& m = masking_;
  TF_CHECK_INPUT(m.prob > 0 && m.prob <= 1, "MaskedLmBatcher: mask_prob must be in (0, 1], got ", m.prob);
  TF_CHECK_INPUT(m.mask_replace_prob >= 0 && m.random_replace_prob >= 0 &&
                     m.mask_replace_prob + m.random_replace_prob <= 1 + 1e-12,
                 "MaskedLmBatcher: mask_replace_prob and random_replace_prob must be at least 0 and add up to at "
                 "most 1, got ", m.mask_replace_prob, " and ", m.random_replace_prob);
  TF_CHECK_INPUT(m.span >= 1 && m.span <= kMaxMaskSpan, "MaskedLmBatcher: mask_span must be in [1, ", kMaxMaskSpan,
                 "], got ", m.span);
  TF_CHECK_INPUT(!ids_.empty(), "MaskedLmBatcher: no tokens");
  const int32_t V = tokens_.vocab_size;
  is_special_.assign(V, false);
  for (const int32_t s : {tokens_.pad, tokens_.mask, tokens_.cls, tokens_.sep}) tokens_.specials.push_back(s);
  for (const int32_t s : tokens_.specials) {
    TF_CHECK_INPUT(s >= 0 && s < V, "MaskedLmBatcher: special id ", s, " outside the vocabulary [0, ", V, ")");
    is_special_[s] = true;
  }
  for (int32_t id = 0; id < V; ++id)
    if (!is_special_[id]) ordinary_.push_back(id);
  TF_CHECK_INPUT(!ordinary_.empty(), "MaskedLmBatcher: the vocabulary of ", V, " holds only special tokens");
  // A mapped token file's ids were checked against its vocabulary when it was written (token_file.h).
  if (!ids_.mapped())
    for (int64_t i = 0; i < ids_.size(); ++i)
      TF_CHECK_INPUT(ids_[i] >= 0 && ids_[i] < V, "MaskedLmBatcher: token ", i, " has id ", ids_[i],
                     " outside the vocabulary [0, ", V, ")");
}

MaskedLmBatcher MaskedLmBatcher::sequential(Tokens ids, int64_t batch, int64_t seq_len, uint64_t seed,
                                            MaskedLmTokens tokens, MaskingOptions masking) {
  MaskedLmBatcher m(std::move(ids), batch, seq_len, seed, std::move(tokens), masking);
  m.sequential_ = true;
  return m;
}

bool MaskedLmBatcher::done() const { return sequential_ && cursor_ >= ids_.size(); }

void MaskedLmBatcher::rewind() {
  cursor_ = 0;
  rng_ = Rng(seed_);
}

void MaskedLmBatcher::restore(const BatcherState& s) {
  seed_ = s.seed;
  rng_ = Rng(s.seed, s.counter);
  cursor_ = s.cursor;
}

void MaskedLmBatcher::fill_row(int64_t b, int64_t start, int64_t length, std::vector<int32_t>& inputs,
                               std::vector<int32_t>& targets, std::vector<double>& attention) {
  const int64_t T = seq_len_;
  int32_t* in = inputs.data() + b * T;   // (T,)
  int32_t* tgt = targets.data() + b * T; // (T,)
  in[0] = tokens_.cls;
  ids_.copy(start, length, in + 1);
  in[length + 1] = tokens_.sep;
  std::fill(in + length + 2, in + T, tokens_.pad);
  std::fill(tgt, tgt + T, kIgnoreIndex);
  std::fill(attention.begin() + b * T, attention.begin() + b * T + length + 2, 1.0);

  std::vector<int64_t> candidates;  // positions that may be chosen: the window's ordinary tokens
  for (int64_t t = 1; t <= length; ++t)
    if (!is_special_[in[t]]) candidates.push_back(t);
  std::vector<int64_t> chosen;
  std::vector<size_t> span_begin;
  if (masking_.span > 1) choose_spans(candidates, chosen, span_begin);
  else choose_positions(candidates, chosen, span_begin);
  const double random_below = masking_.mask_replace_prob + masking_.random_replace_prob;
  for (size_t s = 0; s < span_begin.size(); ++s) {
    const double u = rng_.uniform();  // one draw for the whole span
    const size_t end = s + 1 < span_begin.size() ? span_begin[s + 1] : chosen.size();
    for (size_t k = span_begin[s]; k < end; ++k) {
      const int64_t t = chosen[k];
      tgt[t] = in[t];
      if (u < masking_.mask_replace_prob) in[t] = tokens_.mask;
      else if (u < random_below) in[t] = ordinary_[rng_.uniform_int(static_cast<int64_t>(ordinary_.size()))];
      // else: the token stays, and is still predicted
    }
  }
}

void MaskedLmBatcher::choose_positions(const std::vector<int64_t>& candidates, std::vector<int64_t>& chosen,
                                       std::vector<size_t>& span_begin) {
  for (const int64_t t : candidates)
    if (rng_.uniform() < masking_.prob) chosen.push_back(t);
  if (chosen.empty() && !candidates.empty()) chosen.push_back(candidates[rng_.uniform_int(candidates.size())]);
  span_begin.resize(chosen.size());
  std::iota(span_begin.begin(), span_begin.end(), size_t{0});
}

void MaskedLmBatcher::choose_spans(const std::vector<int64_t>& candidates, std::vector<int64_t>& chosen,
                                   std::vector<size_t>& span_begin) {
  const auto n = static_cast<int64_t>(candidates.size());
  if (n == 0) return;
  const int64_t budget = std::max<int64_t>(1, std::llround(masking_.prob * static_cast<double>(n)));
  std::vector<bool> taken(n, false);
  const double stop = 1 / masking_.span;  // geometric on {1, 2, ...}: P(length = l) = (1 - stop)^(l - 1) stop
  for (int64_t count = 0; count < budget;) {
    int64_t length = 1;
    while (length < kMaxMaskSpan && rng_.uniform() >= stop) ++length;
    const int64_t start = rng_.uniform_int(n);
    const size_t first = chosen.size();
    for (int64_t i = start; i < std::min(n, start + length); ++i)
      if (!taken[i]) {  // a span over positions already chosen takes only the new ones
        taken[i] = true;
        chosen.push_back(candidates[i]);
        ++count;
      }
    if (chosen.size() > first) span_begin.push_back(first);
  }
}

MaskedLmBatch MaskedLmBatcher::next() {
  TF_CHECK(!done(), "MaskedLmBatcher::next: the sequential pass is over (rewind() to start again)");
  const int64_t n = ids_.size(), T = seq_len_, L = T - 2;  // L: text tokens per row
  const int64_t rows = sequential_ ? std::min(batch_, (n - cursor_ + L - 1) / L) : batch_;
  std::vector<int32_t> inputs(rows * T), targets(rows * T);  // (rows, T)
  std::vector<double> attention(rows * T, 0.0);               // (rows, T)
  for (int64_t b = 0; b < rows; ++b) {
    int64_t start = 0;
    if (sequential_) {
      start = cursor_;
      cursor_ += L;
    } else if (n > L) {
      start = rng_.uniform_int(n - L + 1);  // [0, n - L]
    }
    fill_row(b, start, std::min(L, n - start), inputs, targets, attention);
  }
  if (sequential_) ids_.release_before(cursor_);  // Note [windows of a mapped file]
  else if (++batches_since_release_ % kReleaseEvery == 0) ids_.release_before(n);
  return {Tensor::from_ids(inputs, {rows, T}), Tensor::from_ids(targets, {rows, T}),
          Tensor::from_vector(attention, {rows, T}, DType::f32)};
}

}  // namespace tf::data
