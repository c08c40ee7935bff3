// Recipe parsing and validation against the schema in recipe_schema.cpp.
#include "train/recipe.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "data/root.h"
#include "framework/looked_for.h"
#include "train/recipe_inert.h"
#include "train/recipe_schema.h"

namespace tf::train {

std::filesystem::path DataConfig::root_folder() const { return data::data_root(root); }
std::filesystem::path DataConfig::brown_folder() const { return brown_dir.empty() ? root_folder() / "brown" : std::filesystem::path(brown_dir); }
std::filesystem::path DataConfig::linux_folder() const { return root_folder() / "linux"; }
std::filesystem::path DataConfig::cache_folder() const { return cache_dir.empty() ? root_folder() / "shards" : std::filesystem::path(cache_dir); }

std::optional<double> parse_duration(std::string_view text) {
  if (text.empty() || text == "0" || text == "none") return 0.0;
  const char unit = text.back();
  const double scale = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600 : 0;
  if (scale == 0 || text.size() < 2) return std::nullopt;
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size() - 1, value);
  if (ec != std::errc() || end != text.data() + text.size() - 1 || !(value > 0) || !std::isfinite(value) ||
      text.front() == '-' || text.front() == '+')
    return std::nullopt;
  return value * scale;
}

namespace {

// Levenshtein distance: insertions, deletions and substitutions of one character each cost 1.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}


// Names other trainers use (nanoGPT, Hugging Face) for our keys: suggested when written here.
const std::map<std::string, std::string>& usual_names() {
  static const std::map<std::string, std::string> names = {
      {"learning_rate", "optim.lr"},        {"lr", "optim.lr"},
      {"max_iters", "train.steps"},         {"max_steps", "train.steps"},
      {"num_train_steps", "train.steps"},   {"iterations", "train.steps"},
      {"n_embd", "model.d_model"},          {"hidden_size", "model.d_model"},
      {"n_head", "model.n_heads"},          {"num_attention_heads", "model.n_heads"},
      {"n_layer", "model.n_layers"},        {"num_hidden_layers", "model.n_layers"},
      {"block_size", "data.seq_len"},       {"max_position_embeddings", "model.max_seq_len"},
      {"intermediate_size", "model.d_ff"},  {"warmup_iters", "schedule.warmup_steps"},
      {"warmup_steps", "schedule.warmup_steps"}, {"weight_decay", "optim.weight_decay"},
      {"grad_clip", "train.grad_clip"},     {"gradient_accumulation_steps", "train.grad_accum"},
      {"eval_interval", "eval.interval"},   {"batch_size", "train.batch_size"},
      {"seed", "train.seed"},               {"out_dir", "checkpoint.dir"}};
  return names;
}

// " (did you mean 'optim.lr'?)" when a known key is close, or the key is another tool's name for
// one of ours, else "".
std::string did_you_mean(const std::string& key) {
  const std::string short_name = key.substr(key.find('.') + 1);
  for (const std::string& name : {key, short_name, key.substr(0, key.find('.'))})
    if (auto it = usual_names().find(name); it != usual_names().end() && it->second != key)
      return " (did you mean '" + it->second + "'?)";
  std::vector<std::string> keys;
  for (const Field& f : recipe_fields()) keys.push_back(f.key);
  const std::string best = closest_name(key, keys);
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::set<std::string> sections() {
  std::set<std::string> out;
  for (const Field& f : recipe_fields()) out.insert(f.key.substr(0, f.key.find('.')));
  return out;
}

std::string mark(const std::string& source, const YAML::Mark& m) {
  return source + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

// Which document a value came from: the user's recipe file, or the base a fine-tuning run starts
// from (RecipeBase), whose keys the user did not write and which are not checked for having no effect.
enum class Origin { file, base };

// Walks the YAML and the overrides against the schema, like a compiler: every error is kept (with
// where it came from) and binding goes on, so that one run names them all (report()).
class Binder {
 public:
  explicit Binder(std::string source) : source_(std::move(source)) { recipe_.source = source_; }

  // `prefixes`: with Origin::base, the keys taken from the document ("model."); the rest is skipped.
  void bind_document(const YAML::Node& root, const std::string& source, Origin origin = Origin::file,
                     const std::vector<std::string>& prefixes = {}) {
    if (!root || root.IsNull()) return;  // an empty recipe: all defaults
    if (!root.IsMap())
      return error(mark(source, root.Mark()), "the recipe must be a mapping of sections (model:, data:, ...)");
    const std::set<std::string> known = sections();
    std::set<std::string> seen_sections;
    std::vector<std::string> written;  // keys of this document, in order
    for (const auto& section : root) {
      const std::string at = mark(source, section.first.Mark());
      const std::optional<std::string> name = key_name(section.first, at);
      if (!name || !known_section(*name, known, at)) continue;
      if (!seen_sections.insert(*name).second) {
        error(at, "section '" + *name + "' appears twice");
        continue;
      }
      if (section.second.IsNull()) continue;
      if (!section.second.IsMap()) {
        error(at, "section '" + *name + "' must be a mapping of keys");
        continue;
      }
      for (const auto& entry : section.second) {
        const std::string key_at = mark(source, entry.first.Mark());
        const std::optional<std::string> short_name = key_name(entry.first, key_at);
        if (!short_name) continue;
        const std::string key = *name + "." + *short_name;
        if (origin == Origin::base && !std::any_of(prefixes.begin(), prefixes.end(),
                                                   [&](const std::string& p) { return key.rfind(p, 0) == 0; }))
          continue;
        if (std::find(written.begin(), written.end(), key) != written.end()) {
          refuse(key, key_at, "key '" + key + "' appears twice (first at " + where_[key] + ")");
          continue;
        }
        written.push_back(key);
        where_[key] = key_at;
        set(key, entry.second, key_at);
      }
    }
    // A resolved recipe (Recipe::to_yaml: a checkpoint's, a run folder's recipe.yaml) writes every key,
    // defaults included, for completeness; what it writes was not chosen key by key. Three quarters
    // of the keys tell one apart from a hand-written recipe (which writes a few dozen at most) even
    // when it was written before the newest keys existed.
    const bool resolved = written.size() * 4 >= recipe_fields().size() * 3;
    if (origin == Origin::file && !resolved) file_keys_.insert(written.begin(), written.end());
  }

  // After the documents: the overrides, in order.
  void bind_overrides(const std::vector<std::string>& overrides) {
    as_written_ = recipe_;
    for (const std::string& o : overrides) bind_override(o);
  }

  // default_run_dir: checkpoint.dir when the recipe does not set it ("runs/<recipe stem>").
  Recipe finish(const std::string& default_run_dir = "") {
    if (!where_.count("checkpoint.dir") && !default_run_dir.empty()) recipe_.checkpoint.dir = default_run_dir;
    auto& m = recipe_.model;
    // Defaults that follow from the architecture, unless the recipe set them.
    if (!where_.count("model.causal")) m.causal = m.arch == layers::Architecture::gpt;
    if (!where_.count("model.pre_norm")) m.pre_norm = m.arch == layers::Architecture::gpt;
    if (!where_.count("model.gelu") && m.arch == layers::Architecture::bert) m.gelu = ops::GeluApprox::erf;
    // A BERT samples nothing: 0, so that to_yaml() (which writes every key) parses back.
    if (!where_.count("sample.tokens") && m.arch == layers::Architecture::bert) recipe_.sample.tokens = 0;
    // An inconsistency that involves a value already refused is that error's echo (the default
    // standing in for it), not an error of its own.
    for (const ConfigError& e : m.problems())
      if (std::none_of(e.keys.begin(), e.keys.end(), [&](const std::string& k) { return refused_.count(k); })) {
        error(location_of_first_set(e.keys), e.what());
        reported_.insert(e.keys.front());
      }
    check_combinations();
    check_inert_keys();
    if (!errors_.empty()) throw InputError(report());
    return recipe_;
  }

 private:
  void bind_override(const std::string& text) {
    const std::string at = "--set " + text;
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) return error(at, "expected section.key=value, e.g. --set optim.lr=3e-4");
    const std::string key = text.substr(0, eq);
    YAML::Node value;
    try {
      value = YAML::Load(text.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      return error(at, "the value is not valid YAML: " + e.msg);
    }
    where_[key] = at;
    set_keys_.insert(key);
    set(key, value, at);
  }

  // Keys of different sections that contradict each other.
  void check_combinations() {
    const auto& r = recipe_;
    const auto& m = r.model;
    check(r.data.seq_len <= m.max_seq_len, "data.seq_len",
          "data.seq_len (" + std::to_string(r.data.seq_len) + ") exceeds model.max_seq_len (" +
              std::to_string(m.max_seq_len) + "): the model has no positions beyond it", {"model.max_seq_len"});
    check(m.arch != layers::Architecture::bert || r.data.seq_len >= 3, "data.seq_len",
          "data.seq_len must be at least 3 for a BERT ([CLS], one token, [SEP])", {"model.arch"});
    check(r.data.seq_len_start <= r.data.seq_len, "data.seq_len_start",
          "data.seq_len_start (" + std::to_string(r.data.seq_len_start) + ") exceeds data.seq_len (" +
              std::to_string(r.data.seq_len) + "): the windows grow to data.seq_len, not beyond it",
          {"data.seq_len"});
    check(m.arch != layers::Architecture::bert || r.data.seq_len_warmup == 0, "data.seq_len_warmup",
          "data.seq_len_warmup is for a GPT: a BERT's window ends in [SEP], which a shortened window would lose; "
          "remove the key",
          {"model.arch"});
    check(r.train.batch_start <= r.train.batch_size, "train.batch_start",
          "train.batch_start (" + std::to_string(r.train.batch_start) + ") exceeds train.batch_size (" +
              std::to_string(r.train.batch_size) + "): the batch grows to train.batch_size, not beyond it",
          {"train.batch_size"});
    check(r.train.sequence_parallel == "off" || r.data.seq_len_warmup == 0, "data.seq_len_warmup",
          "data.seq_len_warmup and train.sequence_parallel: " + r.train.sequence_parallel +
              " cannot be combined: the ranks split windows of one fixed length; remove one of them",
          {"train.sequence_parallel"});
    check(r.data.corpus != "files" || !r.data.train_path.empty(), "data.corpus",
          "data.corpus is 'files' but data.train_path is empty: name UTF-8 text files, folders or globs",
          {"data.train_path"});
    check(r.data.corpus != "tokens" || r.data.train_path.size() == 1, "data.train_path",
          "data.corpus is 'tokens', which reads one token file per split: data.train_path must name one file, it " +
              std::string(r.data.train_path.empty() ? "is empty" : "lists " + std::to_string(r.data.train_path.size())),
          {"data.corpus"});
    check(r.data.corpus != "tokens" || r.data.val_path.size() <= 1, "data.val_path",
          "data.corpus is 'tokens', which reads one token file per split: data.val_path lists " +
              std::to_string(r.data.val_path.size()),
          {"data.corpus"});
    check(r.data.corpus == "files" || r.data.corpus == "tokens" || r.data.train_path.empty(), "data.train_path",
          "data.train_path is set but data.corpus is '" + r.data.corpus +
              "': set data.corpus: files to train on your own text",
          {"data.corpus"});
    check(r.data.corpus == "files" || r.data.corpus == "tokens" || r.data.val_path.empty(), "data.val_path",
          "data.val_path is set but data.corpus is '" + r.data.corpus +
              "' (which has its own validation split): set data.corpus: files to use your own text",
          {"data.corpus"});
    const bool prompt_is_ids = std::regex_match(r.sample.prompt, std::regex(R"(\s*(\d+\s*)+)"));
    check(r.data.corpus != "tokens" || m.arch != layers::Architecture::gpt || r.sample.tokens == 0 || prompt_is_ids,
          "sample.prompt",
          "sample.prompt '" + r.sample.prompt + "' is text, and the model of a data.corpus: tokens run reads ids: "
          "write the prompt as ids (sample.prompt: \"50256\" is GPT-2's end of text), or set sample.tokens: 0",
          {"data.corpus", "sample.tokens"});
    check(m.arch != layers::Architecture::gpt || r.sample.tokens == 0 || !r.sample.prompt.empty(), "sample.prompt",
          "sample.prompt is empty: the sample printed after training continues it; give it some text, or set "
          "sample.tokens: 0", {"sample.tokens", "model.arch"});
    const auto shortest = [](double v) {
      char buf[32];
      return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    };
    check(r.data.mask_replace_prob + r.data.random_replace_prob <= 1 + 1e-12, "data.random_replace_prob",
          "data.mask_replace_prob (" + shortest(r.data.mask_replace_prob) + ") and data.random_replace_prob (" +
              shortest(r.data.random_replace_prob) + ") add up to more than 1: they are shares of the chosen "
              "positions, and the rest keep their token",
          {"data.mask_replace_prob"});
    check(m.n_segments == 0, "model.n_segments",
          "model.n_segments must be 0: segment (token type) embeddings need sentence-pair batches with segment ids, "
          "which no batcher makes, so the table would never be used or trained");
    check(r.schedule.kind == "constant" || r.schedule.min_lr <= r.optim.lr, "schedule.min_lr",
          "schedule.min_lr must not exceed optim.lr", {"optim.lr", "schedule.kind"});
    check(r.schedule.warmup_steps <= r.train.steps, "schedule.warmup_steps",
          "schedule.warmup_steps (" + std::to_string(r.schedule.warmup_steps) + ") exceeds train.steps (" +
              std::to_string(r.train.steps) +
              (where_.count("train.steps") ? ", from " + where_.at("train.steps") : "") +
              "): the warmup must end within the run; shorten it too, e.g. --set schedule.warmup_steps=" +
              std::to_string(r.train.steps / 10) + " (a tenth of the run)",
          {"train.steps"});
    const std::optional<double> budget = parse_duration(r.train.time_budget);
    check(budget.has_value(), "train.time_budget",
          "train.time_budget: expected a duration such as 90s, 5m or 1.5h (or 0, none or empty for no budget), got '" +
              r.train.time_budget + "'");
    if (budget == 0.0) recipe_.train.time_budget = "";  // one spelling of "no budget" in the resolved recipe
    check(!r.optim.nesterov || r.optim.name == "sgd", "optim.nesterov",
          "optim.nesterov applies to optim.name: sgd only", {"optim.name"});
    check(!r.optim.nesterov || r.optim.momentum > 0, "optim.nesterov", "Nesterov momentum needs optim.momentum > 0",
          {"optim.momentum"});
    check(m.arch == layers::Architecture::gpt || r.sample.tokens == 0 || !where_.count("sample.tokens"),
          "sample.tokens", "sampling continues text with a GPT; a BERT recipe cannot set sample.tokens",
          {"model.arch"});
  }

  // Keys the user wrote that have no effect (recipe_inert.h). A --set key is checked against the
  // recipe it makes; a key of the file against the file as written too, and reported only when it has
  // no effect there either: an override that changes the configuration (--set optim.name=sgd on a
  // recipe that writes optim.beta2) leaves keys of the file inert that no --set could remove.
  void check_inert_keys() {
    auto unreported = [&](const std::set<std::string>& keys) {
      return [&](const std::string& key) { return keys.count(key) && !reported_.count(key) && !refused_.count(key); };
    };
    std::set<std::string> from_file;  // written in the file only
    for (const std::string& key : file_keys_)
      if (!set_keys_.count(key)) from_file.insert(key);
    std::set<std::string> inert_as_written;
    for (const InertKey& inert : inert_keys(as_written_, unreported(from_file))) inert_as_written.insert(inert.key);
    for (const InertKey& inert : inert_keys(recipe_, unreported(inert_as_written)))
      error(where_.at(inert.key), inert.message);
    for (const InertKey& inert : inert_keys(recipe_, unreported(set_keys_)))
      error(where_.at(inert.key), inert.message);
  }

  void error(const std::string& at, const std::string& message) { errors_.push_back(at + ": " + message); }

  // One error as it was always reported; several one a line, then their count.
  std::string report() const {
    std::string all;
    for (const std::string& e : errors_) all += (all.empty() ? "" : "\n") + e;
    if (errors_.size() > 1) all += "\n" + std::to_string(errors_.size()) + " errors in the recipe";
    return all;
  }

  bool known_section(const std::string& name, const std::set<std::string>& known, const std::string& at) {
    if (const size_t dot = name.find('.'); dot != std::string::npos && known.count(name.substr(0, dot))) {
      error(at, "'" + name + "' is one YAML key with a dot in it; in a recipe, nest it: '" + name.substr(0, dot) +
                    ":' on its own line, then '  " + name.substr(dot + 1) + ": ...' indented below it (the dotted "
                    "form is for --set)");
      return false;
    }
    if (known.count(name)) return true;
    std::string list;
    for (const auto& s : known) list += (list.empty() ? "" : ", ") + s;
    error(at, "unknown section '" + name + "'" + did_you_mean(name + ".") + "; expected one of: " + list);
    return false;
  }

  // A mapping key must be plain text; YAML also allows a list, a mapping or nothing ("? [a]: 1",
  // "? : 1"), which as<std::string>() would reject with a yaml-cpp exception, not an InputError.
  std::optional<std::string> key_name(const YAML::Node& key, const std::string& at) {
    if (key.IsScalar()) return key.Scalar();
    error(at, std::string("a key must be a name, got ") +
                  (key.IsNull() ? "nothing" : key.IsMap() ? "a mapping" : "a list"));
    return std::nullopt;
  }

  // `also`: the other keys the check reads; when one of them (or `key`) was refused, the check is
  // that error's echo and is skipped. One error per key.
  void check(bool ok, const std::string& key, const std::string& message, const std::vector<std::string>& also = {}) {
    if (ok || refused_.count(key) || reported_.count(key) ||
        std::any_of(also.begin(), also.end(), [&](const std::string& k) { return refused_.count(k) > 0; }))
      return;
    auto it = where_.find(key);
    error(it != where_.end() ? it->second : source_, message);
    reported_.insert(key);
  }

  // For errors from ModelConfig::problems, which name keys but know no lines: the location of the
  // first of the error's keys that the recipe set, else the file.
  // A key given by --set first: the command line is where the user just changed something (a stored
  // recipe sets every key).
  std::string location_of_first_set(const std::vector<std::string>& keys) const {
    for (const std::string& key : keys)
      if (auto it = where_.find(key); it != where_.end() && it->second.rfind("--set", 0) == 0) return it->second;
    for (const std::string& key : keys)
      if (auto it = where_.find(key); it != where_.end()) return it->second;
    return source_;
  }

  void set(const std::string& key, const YAML::Node& value, const std::string& at) {
    const Field* field = find_field(key);
    if (!field) return error(at, "unknown key '" + key + "'" + did_you_mean(key));
    std::string text;  // what the field's setter reads
    if (field->is_list && value.IsSequence()) {
      YAML::Emitter flow;  // "[4, 3, 2]"; an item with a comma or a bracket is quoted
      flow << YAML::Flow << YAML::BeginSeq;
      for (const YAML::Node& item : value) {
        if (!item.IsScalar())
          return refuse(key, at, "key '" + key + "' expects " + article(field->type) + ", got a nested value");
        flow << item.Scalar();
      }
      text = std::string((flow << YAML::EndSeq).c_str());
    } else if (value.IsScalar()) {
      text = value.Scalar();
    } else if (value.IsNull() && field->is_string) {
      text = "";  // `key:` in YAML, `--set key=` on the command line: the empty text
    } else {
      const char* got = value.IsNull() ? "nothing" : value.IsMap() ? "a mapping" : "a list";
      return refuse(key, at, "key '" + key + "' expects " + article(field->type) + ", got " + got);
    }
    try {
      field->set(recipe_, text);
    } catch (const BadValue& bad) {
      refuse(key, at,
             "key '" + key + "' expects " + bad.expected + ", got " + (value.IsSequence() ? text : "'" + text + "'"));
    }
  }

  void refuse(const std::string& key, const std::string& at, const std::string& message) {
    error(at, message);
    refused_.insert(key);
  }

  static std::string article(const std::string& type) {
    if (type.rfind("one of", 0) == 0) return type;
    return (std::string("aeiou").find(type[0]) != std::string::npos ? "an " : "a ") + type;
  }

  std::string source_;
  Recipe recipe_;
  std::map<std::string, std::string> where_;  // key -> "file:line:col" or "--set ..."
  // Keys the user wrote: in the file (not a resolved recipe's, not the base's), and by --set.
  std::set<std::string> file_keys_, set_keys_;
  Recipe as_written_;  // the base and the file, before the overrides
  std::set<std::string> refused_;   // keys whose value was refused
  std::set<std::string> reported_;  // keys an inconsistency was reported at
  std::vector<std::string> errors_;  // "<where>: <message>", in the order found
};

YAML::Node load_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {  // yaml-cpp's own message is a bare "bad file"
    throw InputError(mark(source, e.mark) + ": the YAML nests " + std::to_string(e.depth()) +
                     " levels deep here, more than the parser takes; a recipe has two levels, 'section:' and "
                     "'  key: value' under it (docs/recipes.md)");
  } catch (const YAML::Exception& e) {
    throw InputError(mark(source, e.mark) + ": YAML syntax error: " + e.msg);
  }
}

Recipe parse_with_default_dir(const std::string& text, const std::string& source,
                              const std::vector<std::string>& overrides, const std::string& default_run_dir,
                              const RecipeBase& base) {
  Binder binder(source);
  if (!base.yaml.empty())
    binder.bind_document(load_yaml(base.yaml, base.source), base.source, Origin::base, base.prefixes);
  binder.bind_document(load_yaml(text, source), source);
  binder.bind_overrides(overrides);
  return binder.finish(default_run_dir);
}

}  // namespace

Recipe parse_recipe(const std::string& text, const std::string& source, const std::vector<std::string>& overrides,
                    const RecipeBase& base) {
  return parse_with_default_dir(text, source, overrides, "", base);
}

Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides, const RecipeBase& base) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {  // a folder reads as an empty recipe: refuse it
    std::vector<std::string> yaml;
    for (const auto& e : std::filesystem::directory_iterator(path, ec))
      if (e.path().extension() == ".yaml") yaml.push_back(e.path().filename().string());
    std::sort(yaml.begin(), yaml.end());
    std::string listed;
    for (const std::string& y : yaml) listed += (listed.empty() ? "" : ", ") + y;
    throw InputError(path + ": is a folder, not a recipe file" +
                     (listed.empty() ? std::string() : " (it holds " + listed + ")"));
  }
  std::ifstream in(path, std::ios::binary);
  TF_CHECK_INPUT(in, path, ": cannot read the recipe file (does it exist? ", looked_for(path), ")");
  std::stringstream text;
  text << in.rdbuf();
  // Each recipe gets its own run folder unless it names one: two recipes never share a folder by default.
  return parse_with_default_dir(text.str(), path, overrides, "runs/" + std::filesystem::path(path).stem().string(),
                                base);
}

std::string Recipe::to_yaml() const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::string open_section;
  for (const Field& f : recipe_fields()) {
    const std::string section = f.key.substr(0, f.key.find('.'));
    if (section != open_section) {
      if (!open_section.empty()) out << YAML::EndMap;
      out << YAML::Key << section << YAML::Value << YAML::BeginMap;
      open_section = section;
    }
    out << YAML::Key << f.key.substr(f.key.find('.') + 1) << YAML::Value;
    const std::string value = f.get(*this);
    if (f.is_list && value.rfind('[', 0) == 0) {
      out << YAML::Flow << YAML::BeginSeq;
      for (const YAML::Node& item : YAML::Load(value)) out << item.Scalar();
      out << YAML::EndSeq;
    } else if (f.is_string)
      out << YAML::DoubleQuoted << f.get(*this);
    else
      out << f.get(*this);
  }
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string closest_name(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(3, word.size() / 3) + 1;
  for (const std::string& c : candidates)
    if (const size_t d = edit_distance(word, c); d < best_distance) best_distance = d, best = c;
  return best;
}

std::vector<RecipeKeyDoc> recipe_keys() {
  const Recipe defaults;
  std::vector<RecipeKeyDoc> out;
  for (const Field& f : recipe_fields()) {
    const std::string value = f.get(defaults);
    out.push_back({f.key, f.type, f.is_string ? "\"" + value + "\"" : value, f.meaning});
  }
  return out;
}

}  // namespace tf::train
