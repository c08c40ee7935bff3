// Batchers: token ids -> (B, T) training batches for GPT (next-token) and BERT (masked-LM).
//
// B = batch, T = seq_len. Random batchers draw window starts and masks from a counter-based tf::Rng,
// so their whole state is BatcherState and a restored batcher continues with exactly the batch the
// saved one would have given. Sequential batchers walk the ids in order once (evaluation), releasing
// the pages of a mapped token file behind them (Tokens::release_before).
//
//   tf::data::CausalBatcher train(ids, 32, 128, /*seed=*/1);
//   tf::data::CausalBatch b = train.next();          // b.inputs, b.targets: (32, 128) i32
//   tf::data::BatcherState s = train.state();        // store in the checkpoint ...
//   train.restore(s);                                // ... and resume
//
//   auto tokens = tf::data::MaskedLmTokens::from(tokenizer);   // needs [PAD] [MASK] [CLS] [SEP]
//   tf::data::MaskedLmBatcher mlm(ids, 32, 128, 1, tokens);
//   auto eval = tf::data::MaskedLmBatcher::sequential(val_ids, 32, 128, 7, tokens);
//   while (!eval.done()) { tf::data::MaskedLmBatch b = eval.next(); ... }  // then eval.rewind()
#pragma once
#include <cstdint>
#include <vector>

#include "data/tokenizer.h"
#include "data/tokens.h"
#include "framework/random.h"
#include "framework/tensor.h"

namespace tf::data {

inline constexpr int32_t kIgnoreIndex = -100;  // a target the loss skips (PyTorch's convention)
// Random batchers release a mapped file's pages every this many batches (Note [windows of a mapped
// file] in batcher.cpp).
inline constexpr int64_t kReleaseEvery = 2;

struct BatcherState {
  uint64_t seed = 0, counter = 0;  // the Rng
  int64_t cursor = 0;              // sequential mode: the next token to read
};

struct CausalBatch {
  Tensor inputs;   // (B, T) i32: ids[s .. s+T)
  Tensor targets;  // (B, T) i32: ids[s+1 .. s+T+1), the inputs shifted by one
};

class CausalBatcher {
 public:
  // Random windows of T + 1 contiguous tokens, starts uniform over [0, n - T - 1].
  CausalBatcher(Tokens ids, int64_t batch, int64_t seq_len, uint64_t seed);
  // Consecutive windows s = 0, T, 2T, ... so every token after the first is a target exactly once.
  // The last batch may have fewer rows; the last window is padded with input 0 and target
  // kIgnoreIndex (padding sits after the real tokens, so causal attention never sees it).
  static CausalBatcher sequential(Tokens ids, int64_t batch, int64_t seq_len);

  CausalBatch next();  // sequential: tf::Error once done()
  bool done() const;   // sequential: every window has been given (random batchers never are)
  void rewind();       // sequential: start again from the first window
  BatcherState state() const { return {rng_.seed(), rng_.counter(), cursor_}; }
  void restore(const BatcherState& s);

  int64_t batch() const { return batch_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t num_tokens() const { return ids_.size(); }

 private:
  CausalBatcher(Tokens ids, int64_t batch, int64_t seq_len, uint64_t seed, bool sequential);
  Tokens ids_;
  int64_t batch_, seq_len_;
  bool sequential_;
  Rng rng_;
  int64_t cursor_ = 0;
  std::vector<int32_t> window_;  // (T + 1,) next()'s copy of one window
  int64_t batches_since_release_ = 0;
};

// The ids a masked-LM batcher needs from its tokenizer.
struct MaskedLmTokens {
  int32_t pad = 0, mask = 0, cls = 0, sep = 0;
  int32_t vocab_size = 0;
  std::vector<int32_t> specials;  // never chosen for prediction, never drawn as a random token
  static MaskedLmTokens from(const Tokenizer& tokenizer);
};

struct MaskedLmBatch {
  Tensor inputs;          // (B, T) i32: [CLS] window [SEP] [PAD]..., chosen positions corrupted
  Tensor targets;         // (B, T) i32: the original id at chosen positions, kIgnoreIndex elsewhere
  Tensor attention_mask;  // (B, T) f32: 1 for real tokens (with [CLS], [SEP]), 0 for [PAD]
};

// How a masked LM corrupts its input; the defaults are BERT's (Devlin et al. 2019, section 3.1 and
// appendix A.1). Each non-special position is chosen with probability `prob`; a chosen token becomes
// [MASK] with probability mask_replace_prob, a random non-special token with random_replace_prob, and
// otherwise stays; the loss predicts the original. A row in which no position was chosen gets one
// chosen uniformly, so every row has a target.
// span > 1 chooses spans instead (SpanBERT, Joshi et al. 2020, section 3.1): lengths geometric with
// mean `span`, capped at kMaxMaskSpan, at uniform starts until a share `prob` of the row's ordinary
// tokens is chosen; a span is corrupted as a whole (one draw of [MASK] / random / kept).
struct MaskingOptions {
  double prob = 0.15;
  double mask_replace_prob = 0.8;
  double random_replace_prob = 0.1;
  double span = 1;  // mean span length before the cap; 1: positions chosen independently
};
inline constexpr int64_t kMaxMaskSpan = 10;  // SpanBERT's cap

class MaskedLmBatcher {
 public:
  // Random windows of T - 2 contiguous tokens (the whole text, padded, when it is shorter).
  MaskedLmBatcher(Tokens ids, int64_t batch, int64_t seq_len, uint64_t seed, MaskedLmTokens tokens,
                  MaskingOptions masking = {});
  // Consecutive windows of T - 2 tokens in order (the last one padded, the last batch possibly
  // smaller); masks are drawn from `seed` afresh at each rewind, so every pass is identical.
  static MaskedLmBatcher sequential(Tokens ids, int64_t batch, int64_t seq_len, uint64_t seed,
                                    MaskedLmTokens tokens, MaskingOptions masking = {});

  MaskedLmBatch next();
  bool done() const;
  void rewind();
  BatcherState state() const { return {rng_.seed(), rng_.counter(), cursor_}; }
  void restore(const BatcherState& s);

  int64_t batch() const { return batch_; }
  int64_t seq_len() const { return seq_len_; }
  const MaskedLmTokens& tokens() const { return tokens_; }

 private:
  // Fills row `b` from ids_[start .. start + length) and masks it.
  void fill_row(int64_t b, int64_t start, int64_t length, std::vector<int32_t>& inputs,
                std::vector<int32_t>& targets, std::vector<double>& attention);
  // The positions to predict, grouped into spans: chosen[span_begin[s] .. span_begin[s + 1]).
  void choose_positions(const std::vector<int64_t>& candidates, std::vector<int64_t>& chosen,
                        std::vector<size_t>& span_begin);
  void choose_spans(const std::vector<int64_t>& candidates, std::vector<int64_t>& chosen,
                    std::vector<size_t>& span_begin);
  Tokens ids_;
  int64_t batch_, seq_len_;
  uint64_t seed_;
  bool sequential_;
  MaskedLmTokens tokens_;
  MaskingOptions masking_;
  std::vector<bool> is_special_;  // by id
  std::vector<int32_t> ordinary_;  // the ids a random replacement is drawn from
  Rng rng_;
  int64_t cursor_ = 0;
  int64_t batches_since_release_ = 0;
};

}  // namespace tf::data
