// What a trained model's attention heads do on a text: every layer's attention probabilities and
// per-head statistics of them (Clark et al. 2019, "What Does BERT Look At?", section 3: attention
// to the previous token, to [CLS] or the first token, and each head's entropy; Vig and Belinkov
// 2019 for the mean attention distance).
//
// T = tokens of the text, H = query heads of a layer; a map row i is query i's distribution over
// the keys j (it sums to 1; a causal model's row has zeros for j > i).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "framework/tensor.h"
#include "layers/models/model.h"

namespace tf::inspect {

struct AttentionMaps {
  std::vector<int32_t> ids;          // (T) the model's input: a BERT's framed by [CLS] and [SEP]
  std::vector<std::string> tokens;   // (T) each id as text (the tokenizer's decode of that id alone)
  std::vector<Tensor> layers;        // one (H, T, T) float32 tensor per attention layer, in order
  std::vector<int64_t> layer_numbers;  // the model layer of each: a Mamba layer has no map, so they can skip
  bool causal = false;
};

// The model's input for `text`: its tokens, at most `max_tokens` of them (a BERT's [CLS] and [SEP]
// included). `truncated` says whether tokens were left out.
std::vector<int32_t> inspection_ids(const layers::LanguageModel& model, const data::Tokenizer& tokenizer,
                                    const std::string& text, int64_t max_tokens, bool* truncated);

// One forward pass (evaluation mode) over `ids`, keeping every attention layer's probabilities.
AttentionMaps capture_attention(const layers::LanguageModel& model, const data::Tokenizer& tokenizer,
                                std::vector<int32_t> ids);

struct HeadStats {
  int64_t layer = 0, head = 0;  // the model's layer number
  int64_t map = 0;              // its index in AttentionMaps::layers
  double entropy_bits = 0;    // mean over query rows of -sum_j p_ij log2 p_ij
  double mean_distance = 0;   // mean over query rows of sum_j p_ij |i - j|, in tokens
  double previous_token = 0;  // mean over rows i >= 1 of p_{i, i-1}
  double first_token = 0;     // mean over rows i >= 1 of p_{i, 0} ([CLS] for a BERT)
  double self = 0;            // mean over rows of p_{i, i}
};

// The statistics of one (T, T) row-major map.
HeadStats head_stats(const float* map, int64_t tokens);
// Every head of every layer, layer by layer.
std::vector<HeadStats> head_stats(const AttentionMaps& maps);

// A token as a label: spaces, newlines and tabs made visible, other control bytes as \xNN.
std::string visible_token(const std::string& token);
// A text on one line, as visible_token shows it but with its spaces kept.
std::string visible_line(const std::string& text);
// The token's whole UTF-8 characters as they are, and each byte that is not part of one (a byte-level
// BPE token can hold part of a character) as the four characters \xNN: text that JSON and cairo take.
std::string utf8_or_escaped(const std::string& token);

}  // namespace tf::inspect
