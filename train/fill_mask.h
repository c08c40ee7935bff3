// Filling in masked tokens with a BERT (masked LM), as Hugging Face's fill-mask pipeline does: each
// literal "[MASK]" of a text becomes the mask token, the model runs once over [CLS] text [SEP], and
// each masked position gets its distribution over the vocabulary, most probable first.
//
// T = the model's input (the text's tokens, [CLS] and [SEP]), V = vocabulary size.
//
//   const MaskedText text = read_masked_text(*run.tokenizer, "the c[MASK]t sat");
//   for (const MaskPrediction& p : fill_masks(*run.model, text, /*top_k=*/5))
//     for (const FillCandidate& c : p.candidates)
//       std::cout << c.probability << " " << filled_text(text, 0, run.tokenizer->decode({&c.id, 1})) << "\n";
//
// Several masks are predicted in the same pass, each with the others still masked: a position's
// probabilities are its own given the visible text (as Hugging Face's pipeline gives them), not a
// joint distribution over the masks' combinations.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"
#include "layers/models/model.h"

namespace tf::train {

inline constexpr std::string_view kMaskMarker = "[MASK]";

struct MaskedText {
  std::vector<std::string> pieces;  // the text around the markers: one more than there are masks
  std::vector<int32_t> ids;         // (T) [CLS], each piece's tokens with one [MASK] between pieces, [SEP]
  std::vector<int64_t> masks;       // where the [MASK]s are in ids, ascending
  int64_t unknown = 0;              // ids that are the tokenizer's <unk> (text outside a char vocabulary)
};

// Each piece is encoded on its own (a marker splits the text as Hugging Face's added tokens do: no
// BPE merge reaches across it). The tokenizer must have BERT's specials ([MASK], [CLS], [SEP]).
// tf::InputError when the text holds no marker.
MaskedText read_masked_text(const data::Tokenizer& tokenizer, std::string_view text);

struct FillCandidate {
  int32_t id = 0;
  double probability = 0;  // softmax of the position's logits over the whole vocabulary
};
struct MaskPrediction {
  int64_t position = 0;  // the mask's index among the text's tokens, from 0 ([CLS] not counted)
  std::vector<FillCandidate> candidates;  // the top_k most probable (ties: the lower id first)
};

// One forward pass of `bert` in eval mode under NoGradGuard; a prediction per mask, in order. top_k
// is capped at V. tf::InputError when T exceeds model.max_seq_len (naming both) or top_k < 1;
// tf::Error for a causal model.
std::vector<MaskPrediction> fill_masks(const layers::LanguageModel& bert, const MaskedText& text, int64_t top_k);

// The text with its mask'th marker replaced by `token`, the other markers left as they are.
std::string filled_text(const MaskedText& text, size_t mask, const std::string& token);

}  // namespace tf::train
