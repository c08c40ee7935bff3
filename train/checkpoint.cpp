// Checkpoint save and load; the layout is documented in docs/checkpoint.md.
#include "train/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <chrono>
#include <ctime>

#include "export/gguf_model.h"
#include "export/gguf_read.h"
#include "framework/io/hdf5_io.h"
#include "optim/state_io.h"
#include "train/resume_changes.h"

namespace tf::train {

namespace fs = std::filesystem;

namespace {

// Caps on the stored texts, checked before they are read (a forged file may declare any size):
// a resolved recipe is a few kilobytes; a byte-level BPE tokenizer with 50,000 merges ~1 MB.
constexpr uint64_t kMaxRecipeBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxTokenizerBytes = uint64_t{64} << 20;

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Checks the file's parameters against the run's model and copies them in. Every mismatch is
// gathered so the error says all that differs at once.
// The first non-finite element of t, as " holds nan at element 17", or "" when every one is finite. A
// checkpoint of a diverged run would otherwise load and fail later far from its cause (or, through
// a kernel that treats a row of NaN like a masked row, give finite, wrong results).
std::string first_non_finite(const Tensor& t) {
  std::string found;
  dispatch(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      const T* x = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i)
        if (!std::isfinite(x[i])) {
          found = concat(" holds ", x[i], " at element ", i);
          return;
        }
    }
  });
  return found;
}

void load_parameters(const H5Reader& in, const fs::path& file, const layers::ParamList& params) {
  const std::vector<std::string> stored = in.list("model");
  std::vector<std::string> problems;
  for (const auto& p : params) {
    if (std::find(stored.begin(), stored.end(), p.name) == stored.end()) {
      problems.push_back("missing parameter '" + p.name + "' " + p.tensor.shape().to_string());
      continue;
    }
    const Tensor t = in.read_tensor("model", p.name);
    if (t.shape() != p.tensor.shape() || t.dtype() != p.tensor.dtype()) {
      problems.push_back("parameter '" + p.name + "' is " + t.shape().to_string() + " " + dtype_name(t.dtype()) +
                         " in the checkpoint but " + p.tensor.shape().to_string() + " " +
                         dtype_name(p.tensor.dtype()) + " in the recipe's model");
      continue;
    }
    if (const std::string bad = first_non_finite(t); !bad.empty()) {
      problems.push_back("parameter '" + p.name + "'" + bad + " (a diverged run: resume from an earlier checkpoint)");
      continue;
    }
    p.tensor.copy_from(t);
  }
  for (const std::string& name : stored) {
    const bool known = std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.name == name; });
    if (!known) problems.push_back("unexpected parameter '" + name + "' (not in the recipe's model)");
  }
  if (problems.empty()) return;
  std::string message = file.string() + ": the checkpoint does not match the model:";
  for (size_t i = 0; i < problems.size() && i < 20; ++i) message += "\n  " + problems[i];
  if (problems.size() > 20) message += "\n  ... and " + std::to_string(problems.size() - 20) + " more";
  throw InputError(message);
}

void check_format(const H5Reader& in, const fs::path& file) {
  TF_CHECK_INPUT(in.has_attr("/", "format_version"), file.string(),
                 ": not a tapeformer checkpoint (no format_version attribute)");
  const int64_t version = in.read_attr_int("/", "format_version");
  TF_CHECK_INPUT(version == kCheckpointFormat, file.string(), ": checkpoint format ", version,
                 " is not supported (this build reads format ", kCheckpointFormat, ")");
}

// The checkpoint's own recipe is untrusted input too: a damaged or forged one can describe a model
// of terabytes, which build_run would try to allocate. Every parameter is stored uncompressed (f32),
// so the file must hold at least 4 bytes per parameter of the model the recipe describes, counted
// from that model's own parameter list, built with shapes only (nothing allocated).
void check_model_fits_file(const Recipe& recipe, int64_t vocab_size, const fs::path& file) {
  layers::ModelConfig m = recipe.model;
  m.vocab_size = vocab_size;
  const double at_least = static_cast<double>(layers::count_parameters(layers::parameter_shapes(m)));
  std::error_code ec;
  const auto file_size = static_cast<double>(fs::file_size(file, ec));
  TF_CHECK_INPUT(!ec && 4 * at_least <= file_size, file.string(), ": the checkpoint's recipe describes a model of at least ",
                 at_least, " parameters, more than the file's ", file_size, " bytes can hold (damaged or forged recipe?)");
}

// Note [weights files]: `tapeformer export --format weights` writes a checkpoint without the state
// that only continuing the run needs (optimizer moments, dropout and batch order): about a third of
// the bytes for Adam. The root attribute `contents` says which kind a file is ("run" or "weights";
// absent, as in files from before it: "run"). Everything that reads a model (sample, eval, inspect,
// info, --init-from, export) takes either; `train --resume` refuses a weights file, which cannot
// continue a run bit for bit.
constexpr const char* kRunContents = "run";
constexpr const char* kWeightsContents = "weights";

bool holds_weights_only(const H5Reader& in) {
  return in.has_attr("/", "contents") && in.read_attr_string("/", "contents") == kWeightsContents;
}

void refuse_weights_only(const H5Reader& in, const fs::path& file) {
  TF_CHECK_INPUT(!holds_weights_only(in), file.string(),
                 ": a weights file (tapeformer export --format weights) holds no optimizer, dropout or data-order "
                 "state, so no run continues from it; start a new run from its weights with `tapeformer train "
                 "RECIPE --init-from ",
                 file.string(), "`");
}

// batches: the run's data order; nullptr writes a weights file.
void write_checkpoint_file(const Run& run, const data::BatcherState* batches, const fs::path& file) {
  H5Writer out(file.string());
  out.write_attr("/", "format_version", kCheckpointFormat);
  out.write_attr("/", "contents", batches ? kRunContents : kWeightsContents);
  out.write_attr("/", "step", run.step);
  out.write_attr("/", "tokens_seen", run.tokens_seen);
  out.write_attr("/", "created", utc_now());
  out.write_attr("/", "writer", "tapeformer");
  out.write_attr("/", "run_id", run.run_id);
  out.write_attr("/", "elapsed_s", run.elapsed_seconds);
  out.write_attr("/", "budget_steps", run.budget_steps);
  out.write_bytes("/", "recipe", run.recipe.to_yaml());
  out.write_bytes("/", "tokenizer", run.tokenizer->to_string());
  for (const auto& p : run.params) out.write_tensor("model", p.name, p.tensor);
  if (batches) {
    optim::save_optimizer_state(out, "optimizer", run.optimizer->state());
    out.write_u64("rng", "dropout", {run.dropout_rng.seed(), run.dropout_rng.counter()});
    out.write_u64("data", "train_batches",
                  {batches->seed, batches->counter, static_cast<uint64_t>(batches->cursor)});
  }
  out.close();
}

// The run id attribute, "" in checkpoints written before run ids (Note [run folders]).
std::string checkpoint_run_id(const H5Reader& in) {
  return in.has_attr("/", "run_id") ? in.read_attr_string("/", "run_id") : std::string();
}

}  // namespace

void save_checkpoint(const Run& run, const data::BatcherState& batches, const fs::path& file) {
  try {
    write_checkpoint_file(run, &batches, file);
  } catch (const InputError& e) {  // the file system refused: name the checkpoint
    throw InputError(concat("cannot save checkpoint '", file.string(), "': ", e.what()));
  }
}

void save_weights(const Run& run, const fs::path& file) {
  try {
    write_checkpoint_file(run, nullptr, file);
  } catch (const InputError& e) {
    throw InputError(concat("cannot save weights '", file.string(), "': ", e.what()));
  }
}

void check_resumable(const fs::path& file) {
  const H5Reader in(file.string());
  check_format(in, file);
  refuse_weights_only(in, file);
}

bool is_weights_file(const fs::path& file) {
  const H5Reader in(file.string());
  check_format(in, file);
  return holds_weights_only(in);
}

void save_run_checkpoint(const Run& run, const data::BatcherState& batches, const fs::path& file) {
  try {
    save_checkpoint(run, batches, file);
  } catch (const InputError& e) {  // say what is kept, and how the run goes on
    const std::optional<fs::path> previous = latest_checkpoint(file.parent_path());
    throw InputError(concat(e.what(), "; ",
                            previous ? "the newest complete checkpoint, '" + previous->string() + "', is kept"
                                     : std::string("no earlier checkpoint exists"),
                            " (free space or fix the folder, then continue with --resume)"));
  }
}


namespace {

// The root attributes both kinds of file hold.
void load_progress(const H5Reader& in, const fs::path& file, Run& run) {
  run.step = in.read_attr_int("/", "step");
  run.run_id = checkpoint_run_id(in);
  run.elapsed_seconds = in.has_attr("/", "elapsed_s") ? in.read_attr_double("/", "elapsed_s") : 0.0;
  TF_CHECK_INPUT(std::isfinite(run.elapsed_seconds) && run.elapsed_seconds >= 0, file.string(),
                 ": /elapsed_s must be a finite number of seconds >= 0, got ", run.elapsed_seconds);
  // Not bounded by train.steps: a resume may lower train.steps below a count the budget fixed
  // (train/continuation.h decides what then holds).
  run.budget_steps = in.has_attr("/", "budget_steps") ? in.read_attr_int("/", "budget_steps") : 0;
  TF_CHECK_INPUT(run.budget_steps >= 0, file.string(), ": /budget_steps must be >= 0, got ", run.budget_steps);
  if (run.budget_steps > 0) run.schedule = run_schedule(run.recipe, run.budget_steps);
  run.tokens_seen = in.read_attr_int("/", "tokens_seen");
  TF_CHECK_INPUT(run.step >= 0 && run.tokens_seen >= 0, file.string(), ": negative step or token count");
}

}  // namespace

data::BatcherState load_checkpoint_into(Run& run, const fs::path& file) {
  const H5Reader in(file.string());
  check_format(in, file);
  refuse_weights_only(in, file);
  load_parameters(in, file, run.params);
  try {
    const optim::OptimizerState state = optim::load_optimizer_state(in, "optimizer");
    for (const auto& [name, param_state] : state.params)
      for (const auto& [slot, tensor] : param_state.slots)
        if (const std::string bad = first_non_finite(tensor); !bad.empty())
          throw InputError(concat(file.string(), ": /optimizer: state '", slot, "' of parameter '", name, "'", bad,
                                  " (a diverged run: resume from an earlier checkpoint)"));
    run.optimizer->load_state(state);
  } catch (const InputError& e) {  // the optimizer's messages do not know the file
    const std::string message = e.what();
    if (message.find(file.string()) != std::string::npos) throw;
    throw InputError(concat(file.string(), ": /optimizer: ", message));
  }
  load_progress(in, file, run);
  const std::vector<uint64_t> rng = in.read_u64("rng", "dropout");
  TF_CHECK_INPUT(rng.size() == 2, file.string(), ": /rng/dropout must hold 2 values, found ", rng.size());
  run.dropout_rng = Rng(rng[0], rng[1]);
  const std::vector<uint64_t> b = in.read_u64("data", "train_batches");
  TF_CHECK_INPUT(b.size() == 3, file.string(), ": /data/train_batches must hold 3 values, found ", b.size());
  return {b[0], b[1], static_cast<int64_t>(b[2])};
}

// Note [gguf round trip]: a GGUF file that tapeformer exported carries its recipe and tokenizer
// (tapeformer.recipe, tapeformer.tokenizer), so `train --init-from model.gguf` builds the same model
// and reads the tensors back through the export's own mapping (export/gguf_model.h): from f32,
// bit for bit the checkpoint's weights; from f16 or q8_0, their rounded values.
namespace {

std::string gguf_text(const fs::path& file, const std::string& key) {
  const exporting::GgufContents g = exporting::read_gguf(file);
  const auto it = g.strings.find(key);
  TF_CHECK_INPUT(it != g.strings.end(), file.string(), ": a GGUF file without ", key,
                 ": only files that `tapeformer export` wrote start a run with --init-from (this one holds no "
                 "tapeformer recipe to build the model from)");
  return it->second;
}

}  // namespace

void load_weights(Run& run, const fs::path& file) {
  if (exporting::is_gguf_file(file)) {
    exporting::load_gguf_parameters(exporting::read_gguf(file), file.string(), run.model->config(), run.params);
    return;
  }
  const H5Reader in(file.string());
  check_format(in, file);
  load_parameters(in, file, run.params);
}

std::string checkpoint_recipe(const fs::path& file) {
  if (exporting::is_gguf_file(file)) return gguf_text(file, "tapeformer.recipe");
  const H5Reader in(file.string());
  check_format(in, file);
  return in.read_bytes("/", "recipe", kMaxRecipeBytes);
}

std::string checkpoint_tokenizer(const fs::path& file) {
  if (exporting::is_gguf_file(file)) return gguf_text(file, "tapeformer.tokenizer");
  const H5Reader in(file.string());
  check_format(in, file);
  return in.read_bytes("/", "tokenizer", kMaxTokenizerBytes);
}

LoadedRun load_checkpoint(const fs::path& file, const std::vector<std::string>& overrides) {
  const std::string stored_text = checkpoint_recipe(file), source = file.string() + ":/recipe";
  const Recipe recipe = parse_recipe(stored_text, source, overrides);
  if (!overrides.empty()) check_inference_changes(file, parse_recipe(stored_text, source), recipe);
  std::unique_ptr<data::Tokenizer> tokenizer = data::Tokenizer::from_string(checkpoint_tokenizer(file));
  check_model_fits_file(recipe, tokenizer->vocab_size(), file);
  LoadedRun loaded{build_run(recipe, std::move(tokenizer)), {}};
  const H5Reader in(file.string());
  if (holds_weights_only(in)) {  // the model and its progress; the optimizer stays as built
    load_parameters(in, file, loaded.run.params);
    load_progress(in, file, loaded.run);
    loaded.weights_only = true;
    return loaded;
  }
  loaded.batches = load_checkpoint_into(loaded.run, file);
  return loaded;
}

fs::path checkpoint_path(const fs::path& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "ckpt_%08lld.h5", static_cast<long long>(step));
  return dir / name;
}

std::vector<std::pair<int64_t, fs::path>> list_checkpoints(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    // "ckpt_" + at least 8 digits + ".h5"; anything else (a .partial file) is not a checkpoint.
    const std::string name = entry.path().filename().string();
    const std::string digits = name.size() > 8 ? name.substr(5, name.size() - 8) : "";
    const bool named = name.rfind("ckpt_", 0) == 0 && name.ends_with(".h5") && digits.size() >= 8 &&
                       std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (named) out.emplace_back(std::stoll(digits), entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<fs::path> latest_checkpoint(const fs::path& dir) {
  const auto all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

std::string checkpoint_run_id(const fs::path& file) { return checkpoint_run_id(H5Reader(file.string())); }

int64_t checkpoint_step(const fs::path& file) {
  const H5Reader in(file.string());
  check_format(in, file);
  return in.read_attr_int("/", "step");
}

}  // namespace tf::train
