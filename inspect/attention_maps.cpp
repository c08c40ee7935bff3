// Attention maps and head statistics; see attention_maps.h.
#include "inspect/attention_maps.h"

#include <cmath>
#include <cstdio>

#include "data/batcher.h"
#include "framework/error.h"

namespace tf::inspect {

std::vector<int32_t> inspection_ids(const layers::LanguageModel& model, const data::Tokenizer& tokenizer,
                                    const std::string& text, int64_t max_tokens, bool* truncated) {
  std::vector<int32_t> ids = tokenizer.encode(text);
  TF_CHECK_INPUT(!ids.empty(), "the text to inspect is empty");
  const bool bert = model.config().arch == layers::Architecture::bert;
  const int64_t room = max_tokens - (bert ? 2 : 0);  // a BERT's input is [CLS] text [SEP], as in training
  TF_CHECK_INPUT(room >= 1, "at most ", max_tokens, " tokens leave no room for the text");
  *truncated = static_cast<int64_t>(ids.size()) > room;
  if (*truncated) ids.resize(room);
  if (bert) {
    const data::MaskedLmTokens special = data::MaskedLmTokens::from(tokenizer);
    ids.insert(ids.begin(), special.cls);
    ids.push_back(special.sep);
  }
  return ids;
}

AttentionMaps capture_attention(const layers::LanguageModel& model, const data::Tokenizer& tokenizer,
                                std::vector<int32_t> ids) {
  AttentionMaps maps;
  const int64_t T = static_cast<int64_t>(ids.size());
  maps.causal = model.config().arch == layers::Architecture::gpt;
  const Tensor input = Tensor::from_ids(ids, {1, T});  // (1, T)
  std::vector<Tensor> weights;
  const layers::Context ctx{false, nullptr, &weights};
  model.logits(input, Tensor(), ctx);
  const layers::ModelConfig& config = model.config();
  for (int64_t l = 0; l < config.n_layers; ++l)
    if (config.mixer(l) != layers::MixerKind::mamba) maps.layer_numbers.push_back(l);
  TF_CHECK(weights.size() == maps.layer_numbers.size(), "capture_attention: ", weights.size(), " maps for ",
           maps.layer_numbers.size(), " attention layers");
  for (const Tensor& w : weights) {  // (1, H, T, T)
    TF_CHECK(w.rank() == 4 && w.dim(0) == 1 && w.dim(2) == T && w.dim(3) == T, "attention map ", w.describe(),
             " for ", T, " tokens");
    maps.layers.push_back(w.to(DType::f32).clone().view({w.dim(1), T, T}));
  }
  for (int32_t id : ids) maps.tokens.push_back(tokenizer.decode(std::span<const int32_t>(&id, 1)));
  maps.ids = std::move(ids);
  return maps;
}

HeadStats head_stats(const float* map, int64_t tokens) {
  HeadStats s;
  for (int64_t i = 0; i < tokens; ++i) {
    const float* row = map + i * tokens;  // (T)
    double entropy = 0, distance = 0;
    for (int64_t j = 0; j < tokens; ++j) {
      const double p = row[j];
      if (p > 0) entropy -= p * std::log2(p);
      distance += p * static_cast<double>(std::abs(i - j));
    }
    s.entropy_bits += entropy;
    s.mean_distance += distance;
    s.self += row[i];
    if (i >= 1) {
      s.previous_token += row[i - 1];
      s.first_token += row[0];
    }
  }
  s.entropy_bits /= tokens;
  s.mean_distance /= tokens;
  s.self /= tokens;
  if (tokens > 1) {
    s.previous_token /= tokens - 1;
    s.first_token /= tokens - 1;
  }
  return s;
}

std::vector<HeadStats> head_stats(const AttentionMaps& maps) {
  std::vector<HeadStats> out;
  for (size_t l = 0; l < maps.layers.size(); ++l) {
    const Tensor& layer = maps.layers[l];  // (H, T, T)
    const int64_t T = layer.dim(1);
    for (int64_t h = 0; h < layer.dim(0); ++h) {
      HeadStats s = head_stats(layer.data<float>() + h * T * T, T);
      s.layer = maps.layer_numbers[l];
      s.map = static_cast<int64_t>(l);
      s.head = h;
      out.push_back(s);
    }
  }
  return out;
}

namespace {

// The length of the well-formed UTF-8 character at s[i] (Unicode 15, table 3-7), or 0.
size_t utf8_length(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned b0 = byte(0);
  auto continuation = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return byte(k) >= lo && byte(k) <= hi; };
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return continuation(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    const unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    return continuation(1, lo, hi) && continuation(2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    const unsigned lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    return continuation(1, lo, hi) && continuation(2) && continuation(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string utf8_or_escaped(const std::string& token) {
  std::string out;
  for (size_t i = 0; i < token.size();) {
    if (const size_t n = utf8_length(token, i)) {
      out.append(token, i, n);
      i += n;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(token[i++]));
      out += hex;
    }
  }
  return out;
}

namespace {

// utf8_or_escaped, then newlines, tabs, other control bytes and, when `spaces`, spaces made visible.
std::string visible(const std::string& raw, bool spaces) {
  const std::string text = utf8_or_escaped(raw);
  std::string out;
  for (unsigned char c : text) {
    if (c == ' ' && spaces)
      out += "\xe2\x90\xa3";  // U+2423 OPEN BOX
    else if (c == '\n')
      out += "\xe2\x86\xb5";  // U+21B5 DOWNWARDS ARROW WITH CORNER LEFTWARDS
    else if (c == '\t')
      out += "\xe2\x86\x92";  // U+2192 RIGHTWARDS ARROW
    else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

std::string visible_token(const std::string& raw) { return visible(raw, true); }
std::string visible_line(const std::string& raw) { return visible(raw, false); }

}  // namespace tf::inspect
