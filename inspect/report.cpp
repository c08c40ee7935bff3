// report.html; see report.h.
#include "inspect/report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>

#include "framework/error.h"
#include "inspect/attention_maps.h"
#include "inspect/heatmap.h"
#include "inspect/training_curves.h"
#include "layers/models/gpt.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/fill_mask.h"
#include "train/metrics_log.h"
#include "train/run_folder.h"

namespace tf::inspect {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kAttentionTokens = 64;  // the most tokens a map shows with readable labels

std::string html_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The picture as an <img> whose source is the PNG itself; the file is removed afterwards, so the
// report is the one file to keep.
std::string embedded_png(const fs::path& file, const std::string& alt) {
  const std::string bytes = read_bytes(file);
  fs::remove(file);
  return "<img alt=\"" + html_escape(alt) + "\" src=\"data:image/png;base64," + base64(bytes) + "\">";
}

std::string figure(double v, const char* format) {
  if (!std::isfinite(v)) return "&ndash;";
  char text[32];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

constexpr int64_t kFilledExamples = 5;   // snippets of the validation text with one token masked
constexpr int64_t kFilledCandidates = 3;  // candidates shown for each

// A BERT's accuracy means little without the baselines it must beat (Note [masked baselines],
// train/evaluate.cpp), so they come on the same masked positions as the run's own evaluation; then a
// few tokens of the validation text masked one at a time and filled in as `tapeformer fill` does.
void write_bert_section(std::ostringstream& html, const train::Run& run, const data::Tokens& val) {
  const train::Recipe& r = run.recipe;
  auto batcher = train::masked_eval_batcher(run, val);
  const train::MaskedBaselines base = train::masked_baselines(batcher, r.eval.batches);
  html << "<p>Baselines on the same masked positions (" << r.eval.batches << " batches of the validation text): "
       << figure(base.most_frequent_accuracy, "%.4f") << " always guessing the most frequent token, "
       << figure(base.own_token_accuracy, "%.4f") << " from the position's own input token alone.</p>\n";

  const data::Tokenizer& tok = *run.tokenizer;
  const int64_t length = std::min<int64_t>(48, r.model.max_seq_len - 2);
  html << "<h2>Filled examples</h2>\n<p>Stretches of " << length << " tokens of the validation text, one token in "
       << "each masked, the model's " << kFilledCandidates << " most probable tokens for it "
       << "(<code>tapeformer fill RUN --text \"...[MASK]...\"</code>).</p>\n<table><tr><th>text</th><th>original</th>"
       << "<th>candidates</th></tr>\n";
  const auto one = [&tok](int32_t id) { return tok.decode(std::span<const int32_t>(&id, 1)); };
  const auto has_letter = [](const std::string& t) {
    return std::any_of(t.begin(), t.end(), [](unsigned char c) { return std::isalpha(c); });
  };
  int64_t shown = 0, right = 0;
  for (int64_t e = 0; e < kFilledExamples && (e + 1) * length <= val.size(); ++e) {
    const std::vector<int32_t> ids = val.slice(e * length, (e + 1) * length).to_vector();
    int64_t m = length / 2;  // the first token from the middle on that holds a letter: a masked space is dull
    while (m + 1 < length && !has_letter(one(ids[m]))) ++m;
    const std::span<const int32_t> all(ids);
    const std::string before = tok.decode(all.first(m)), original = one(ids[m]), after = tok.decode(all.subspan(m + 1));
    const train::MaskedText masked = train::read_masked_text(tok, before + std::string(train::kMaskMarker) + after);
    const train::MaskPrediction p = train::fill_masks(*run.model, masked, kFilledCandidates).at(0);
    const auto shown_text = [](const std::string& t) { return html_escape(utf8_or_escaped(t)); };
    html << "<tr class=\"fill\"><td style=\"text-align:left\"><code>" << shown_text(before) << "<b>[MASK]</b>"
         << shown_text(after) << "</code></td><td><code>" << html_escape(visible_token(original)) << "</code></td><td>";
    for (const train::FillCandidate& c : p.candidates)
      html << "<code>" << html_escape(visible_token(one(c.id))) << "</code> " << figure(c.probability, "%.3f") << " ";
    html << "</td></tr>\n";
    ++shown;
    right += !p.candidates.empty() && one(p.candidates[0].id) == original;
  }
  html << "</table>\n<p>First guess right in " << right << " of " << shown << ".</p>\n";
}

}  // namespace

std::string base64(std::string_view bytes) {
  static const char* const kDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t group = 0;
    for (size_t k = 0; k < 3; ++k) group = group << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kDigits[(group >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

fs::path report_file(const fs::path& run_dir, const fs::path& out) {
  return out.empty() ? run_dir / "report.html" : out;
}

fs::path write_run_report(const fs::path& run_dir, const fs::path& out_file) {
  const fs::path checkpoint = train::checkpoint_argument(run_dir.string());
  const train::LoadedRun loaded = train::load_checkpoint(checkpoint);
  const train::Run& run = loaded.run;
  const train::Recipe& r = run.recipe;
  const bool gpt = r.model.arch == layers::Architecture::gpt;
  const fs::path out = report_file(run_dir, out_file);
  const fs::path scratch = out.parent_path().empty() ? fs::path("report-picture.png") : out.parent_path() / "report-picture.png";

  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tapeformer run "
       << html_escape(run.run_id) << "</title>\n<style>body{font-family:sans-serif;max-width:980px;margin:2em auto;"
       << "color:#222}pre{background:#f6f6f6;padding:.8em;overflow-x:auto}table{border-collapse:collapse}"
       << "td,th{padding:.2em .7em;border-bottom:1px solid #ddd;text-align:right}img{max-width:100%}</style></head>\n<body>\n"
       << "<h1>" << (gpt ? "GPT" : "BERT") << " run " << html_escape(run.run_id) << "</h1>\n<p>Checkpoint <code>"
       << html_escape(checkpoint.string()) << "</code>: step " << run.step << " of " << run.total_steps()
       << (run.budget_steps > 0 ? " (fixed by train.time_budget " + html_escape(r.train.time_budget) + ")" : "") << ", "
       << run.tokens_seen << " tokens seen, " << figure(run.elapsed_seconds, "%.0f") << " s of training; "
       << layers::count_parameters(run.params) << " parameters, vocabulary " << run.tokenizer->vocab_size() << " ("
       << html_escape(std::string(run.tokenizer->kind())) << ").</p>\n";

  // Curves and the last evaluation, from the metrics log.
  const std::vector<train::MetricsRecord> metrics = train::read_metrics_log(run_dir / "metrics.jsonl");
  html << "<h2>Training curves</h2>\n";
  if (!metrics.empty()) {
    write_training_curves(scratch, {run_dir});
    html << embedded_png(scratch, "training curves") << "\n";
  }
  const train::MetricsRecord* last_eval = nullptr;
  for (const train::MetricsRecord& m : metrics)
    if (std::isfinite(m.number("val_loss"))) last_eval = &m;
  html << "<h2>Last evaluation</h2>\n";
  if (last_eval) {
    html << "<table><tr><th>step</th><th>validation loss</th><th>perplexity</th><th>"
         << (gpt ? "bits per character" : "masked-token accuracy") << "</th></tr><tr><td>"
         << figure(last_eval->number("step"), "%.0f") << "</td><td>" << figure(last_eval->number("val_loss"), "%.4f")
         << "</td><td>" << figure(last_eval->number("val_perplexity"), "%.2f") << "</td><td>"
         << figure(last_eval->number(gpt ? "val_bits_per_char" : "val_mlm_accuracy"), "%.4f") << "</td></tr></table>\n";
  } else {
    html << "<p>No evaluation was logged (eval.interval: 0).</p>\n";
  }

  // The validation shard (prepared now when missing: the same files training reads); without the data,
  // the report leaves out what needs it.
  std::optional<data::PreparedCorpus> corpus;
  try {
    corpus.emplace(train::prepare_recipe_corpus(r.data, r.model.arch, run.tokenizer.get(), true, nullptr));
  } catch (const InputError&) {
  }
  if (!gpt && corpus) write_bert_section(html, run, corpus->val.tokens);

  // A sample, as the run printed it.
  std::string sampled;
  if (gpt && r.sample.tokens > 0) {
    std::vector<int32_t> generated;
    train::sample(dynamic_cast<const layers::Gpt&>(*run.model), run.tokenizer->encode(r.sample.prompt),
                  train::recipe_sample_options(r), [&](int32_t id) { generated.push_back(id); });
    sampled = r.sample.prompt + run.tokenizer->decode(generated);
    html << "<h2>Sample</h2>\n<p>" << r.sample.tokens << " tokens after the prompt, temperature " << r.sample.temperature
         << ", seed " << r.train.seed << ":</p>\n<pre>" << html_escape(utf8_or_escaped(sampled)) << "</pre>\n";
  }

  // Attention over the start of the validation text (or the sample, when the data is not here).
  std::string text = sampled;
  if (corpus) {
    const data::Tokens& val = corpus->val.tokens;
    text = run.tokenizer->decode(val.slice(0, std::min<int64_t>(val.size(), 4 * kAttentionTokens)).to_vector());
  }
  if (!text.empty()) {
    bool truncated = false;
    const AttentionMaps maps = capture_attention(
        *run.model, *run.tokenizer,
        inspection_ids(*run.model, *run.tokenizer, text, std::min(kAttentionTokens, r.model.max_seq_len), &truncated));
    if (maps.layers.empty()) {
      html << "<h2>Attention</h2>\n<p>No layer of this model forms attention weights (<code>model.mixer</code>).</p>\n";
    } else {
      write_overview_png(scratch, maps, "attention of every layer (rows) and head (columns)");
      html << "<h2>Attention</h2>\n<p>Over the first " << maps.ids.size() << " tokens of the "
           << (text == sampled ? "sample" : "validation text") << "; rows are queries, columns keys "
           << "(<code>tapeformer inspect</code> draws each head with its tokens).</p>\n"
           << embedded_png(scratch, "attention overview") << "\n<table><tr><th>layer</th><th>head</th>"
           << "<th>entropy (bits)</th><th>mean distance</th><th>previous token</th><th>first token</th><th>self</th></tr>\n";
      for (const HeadStats& s : head_stats(maps))
        html << "<tr><td>" << s.layer << "</td><td>" << s.head << "</td><td>" << figure(s.entropy_bits, "%.3f") << "</td><td>"
             << figure(s.mean_distance, "%.2f") << "</td><td>" << figure(s.previous_token, "%.3f") << "</td><td>"
             << figure(s.first_token, "%.3f") << "</td><td>" << figure(s.self, "%.3f") << "</td></tr>\n";
      html << "</table>\n";
    }
  }
  html << "<h2>Recipe</h2>\n<pre>" << html_escape(r.to_yaml()) << "</pre>\n</body></html>\n";

  std::ofstream file(out, std::ios::binary);
  TF_CHECK_INPUT(file, out.string(), ": cannot open for writing");
  file << html.str();
  TF_CHECK_INPUT(file.flush(), out.string(), ": write failed");
  return out;
}

}  // namespace tf::inspect
