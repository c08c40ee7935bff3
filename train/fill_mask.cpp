// Filling in masked tokens; see fill_mask.h.
//
// T = the model's input length, V = vocabulary size.
#include "train/fill_mask.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "data/batcher.h"
#include "framework/autograd/tape.h"
#include "framework/error.h"

namespace tf::train {

MaskedText read_masked_text(const data::Tokenizer& tokenizer, std::string_view text) {
  const data::MaskedLmTokens special = data::MaskedLmTokens::from(tokenizer);
  MaskedText out;
  for (size_t start = 0;;) {
    const size_t marker = text.find(kMaskMarker, start);
    out.pieces.emplace_back(text.substr(start, marker == std::string_view::npos ? marker : marker - start));
    if (marker == std::string_view::npos) break;
    start = marker + kMaskMarker.size();
  }
  TF_CHECK_INPUT(out.pieces.size() > 1, "fill: the text holds no ", kMaskMarker, " to predict; write ", kMaskMarker,
                 " where a token is missing, e.g. \"the c", kMaskMarker, "t sat\"");
  out.ids.push_back(special.cls);
  for (size_t i = 0; i < out.pieces.size(); ++i) {
    if (i > 0) {
      out.masks.push_back(static_cast<int64_t>(out.ids.size()));
      out.ids.push_back(special.mask);
    }
    const std::vector<int32_t> piece = tokenizer.encode(out.pieces[i]);
    out.unknown += tokenizer.count_unknown(piece);
    out.ids.insert(out.ids.end(), piece.begin(), piece.end());
  }
  out.ids.push_back(special.sep);
  return out;
}

namespace {

// The top_k entries of softmax(logits) (V), most probable first; equal ones by the lower id.
std::vector<FillCandidate> top_candidates(std::span<const double> logits, int64_t top_k) {
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const double z : logits) sum += std::exp(z - max);
  std::vector<FillCandidate> all(logits.size());
  for (size_t v = 0; v < logits.size(); ++v) all[v] = {static_cast<int32_t>(v), std::exp(logits[v] - max) / sum};
  const auto k = static_cast<ptrdiff_t>(std::min<int64_t>(top_k, static_cast<int64_t>(all.size())));
  std::partial_sort(all.begin(), all.begin() + k, all.end(), [](const FillCandidate& a, const FillCandidate& b) {
    return a.probability != b.probability ? a.probability > b.probability : a.id < b.id;
  });
  all.resize(static_cast<size_t>(k));
  return all;
}

}  // namespace

std::vector<MaskPrediction> fill_masks(const layers::LanguageModel& bert, const MaskedText& text, int64_t top_k) {
  const layers::ModelConfig& config = bert.config();
  TF_CHECK(config.arch == layers::Architecture::bert, "fill_masks: needs a masked-LM (BERT) model");
  TF_CHECK_INPUT(top_k >= 1, "fill: top_k must be >= 1, got ", top_k);
  const auto T = static_cast<int64_t>(text.ids.size());
  TF_CHECK_INPUT(T <= config.max_seq_len, "fill: the text is ", T - 2, " tokens, ", T, " with [CLS] and [SEP], more "
                 "than the model's context of ", config.max_seq_len, " (model.max_seq_len): shorten the text");
  const NoGradGuard no_grad;
  const Tensor logits = bert.logits(Tensor::from_ids(text.ids, {1, T}), Tensor(), layers::Context{});  // (1, T, V)
  const int64_t V = logits.dim(2);
  std::vector<MaskPrediction> out;
  for (const int64_t at : text.masks) {
    const std::vector<double> row = dispatch(logits.dtype(), [&](auto zero) {
      using Scalar = decltype(zero);
      const Scalar* z = logits.data<Scalar>() + at * V;  // (V)
      return std::vector<double>(z, z + V);
    });
    out.push_back({at - 1, top_candidates(row, top_k)});
  }
  return out;
}

std::string filled_text(const MaskedText& text, size_t mask, const std::string& token) {
  std::string out = text.pieces[0];
  for (size_t i = 1; i < text.pieces.size(); ++i)
    out += (i - 1 == mask ? token : std::string(kMaskMarker)) + text.pieces[i];
  return out;
}

}  // namespace tf::train
