// Recipe parsing: defaults, overrides, the resolved YAML round trip, and bad recipes whose errors
// name the file, line, column, key and what was expected (keys without effect among them), all of
// them at once.
#include "train/recipe.h"

#include <gtest/gtest.h>

#include <sstream>

#include "support/errors.h"
#include "train/recipe_schema.h"

namespace tf::train {
namespace {

// The InputError message of parsing `text` (as file "bad.yaml"), or "" (and a failure) if it parsed.
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return testing::error_message<InputError>([&] { parse_recipe(text, "bad.yaml", overrides); });
}

TEST(Recipe, EmptyRecipeGivesDocumentedDefaults) {
  const Recipe r = parse_recipe("", "empty.yaml");
  EXPECT_EQ(r.model.d_model, 128);
  EXPECT_EQ(r.optim.name, "adamw");
  EXPECT_TRUE(r.model.causal);
  EXPECT_TRUE(r.model.pre_norm);
}

TEST(Recipe, BertDefaultsFollowTheArchitecture) {
  const Recipe r = parse_recipe("model:\n  arch: bert\nsample:\n", "bert.yaml");
  EXPECT_FALSE(r.model.causal);
  EXPECT_FALSE(r.model.pre_norm);
  EXPECT_EQ(r.model.gelu, ops::GeluApprox::erf);
}

// Checkpoints store to_yaml(), which writes every key; a BERT's must parse back (found by fuzzing:
// the default sample.tokens 300 was written out and then refused as "set" for a BERT).
TEST(Recipe, BertResolvedRecipeParsesBack) {
  const Recipe r = parse_recipe("model:\n  arch: bert\n", "bert.yaml");
  EXPECT_EQ(r.sample.tokens, 0);
  const std::string yaml = r.to_yaml();
  EXPECT_EQ(parse_recipe(yaml, "resolved.yaml").to_yaml(), yaml);
}

TEST(Recipe, OverridesApplyAfterTheFile) {
  const Recipe r = parse_recipe("optim:\n  lr: 0.01\n", "r.yaml", {"optim.lr=3e-4", "train.steps=500"});
  EXPECT_DOUBLE_EQ(r.optim.lr, 3e-4);
  EXPECT_EQ(r.train.steps, 500);
}

TEST(Recipe, ResolvedYamlParsesBackToTheSameRecipe) {
  const Recipe r = parse_recipe("model:\n  d_model: 96\n  n_heads: 3\n  position: rope\noptim:\n  lr: 0.0003\n"
                                "sample:\n  prompt: \"He said: \\\"yes\\\"\"\n",
                                "r.yaml");
  const std::string yaml = r.to_yaml();
  const Recipe back = parse_recipe(yaml, "resolved.yaml");
  EXPECT_EQ(back.to_yaml(), yaml);
  EXPECT_EQ(back.model.d_model, 96);
  EXPECT_EQ(back.sample.prompt, "He said: \"yes\"");
  EXPECT_DOUBLE_EQ(back.optim.lr, 3e-4);
}

struct BadCase {
  const char* what;
  std::string text;
  std::vector<std::string> overrides;
  std::vector<std::string> expected_parts;  // each must appear in the message
};

class BadRecipe : public ::testing::TestWithParam<BadCase> {};

std::string case_name(const ::testing::TestParamInfo<BadCase>& info) {
  std::string name;
  for (char ch : std::string(info.param.what)) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

TEST_P(BadRecipe, ErrorNamesFileLineKeyAndExpectation) {
  const BadCase& c = GetParam();
  const std::string message = error_of(c.text, c.overrides);
  ASSERT_FALSE(message.empty()) << c.what << ": parsed without error";
  for (const std::string& part : c.expected_parts)
    EXPECT_NE(message.find(part), std::string::npos) << c.what << ": '" << part << "' not in: " << message;
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, BadRecipe,
    ::testing::Values(
        BadCase{"unknown key with suggestion", "optim:\n  lrr: 0.1\n", {}, {"bad.yaml:2:3", "optim.lrr", "did you mean 'optim.lr'"}},
        BadCase{"unknown section", "modle:\n  d_model: 64\n", {}, {"bad.yaml:1:1", "unknown section 'modle'", "model"}},
        BadCase{"integer given text", "model:\n  d_model: wide\n", {}, {"bad.yaml:2:3", "model.d_model", "integer", "'wide'"}},
        BadCase{"integer given float", "train:\n  steps: 10.5\n", {}, {"bad.yaml:2:3", "train.steps", "integer"}},
        BadCase{"number out of range", "model:\n  dropout: 1.5\n", {}, {"bad.yaml:2:3", "model.dropout", "[0.0, 1.0)", "'1.5'"}},
        BadCase{"boolean given yes-ish", "model:\n  bias: maybe\n", {}, {"bad.yaml:2:3", "model.bias", "boolean"}},
        BadCase{"choice not in set", "model:\n  position: absolute\n", {}, {"bad.yaml:2:3", "model.position", "one of: none, sinusoidal, learned, rope"}},
        BadCase{"d_model not divisible by heads", "model:\n  d_model: 100\n  n_heads: 3\n", {}, {"bad.yaml:2:3", "divisible", "model.n_heads"}},
        BadCase{"bert with causal mask", "model:\n  arch: bert\n  causal: true\n", {}, {"bad.yaml:", "model.causal", "false for a BERT"}},
        BadCase{"seq_len beyond max positions", "model:\n  max_seq_len: 64\ndata:\n  seq_len: 128\n", {}, {"bad.yaml:4:3", "data.seq_len", "model.max_seq_len"}},
        BadCase{"duplicate key", "train:\n  steps: 10\n  steps: 20\n", {}, {"bad.yaml:3:3", "train.steps", "twice", "bad.yaml:2:3"}},
        BadCase{"section is a list", "optim:\n  - lr\n", {}, {"bad.yaml:1:1", "optim", "mapping"}},
        BadCase{"value is a list", "optim:\n  lr: [1, 2]\n", {}, {"bad.yaml:2:3", "optim.lr", "a list"}},
        BadCase{"section key is a list (fuzzing)", "? [a, b]\n: 1\n", {}, {"bad.yaml:1:", "a key must be a name, got a list"}},
        BadCase{"key is a mapping (fuzzing)", "data:\n ? orpus: files\n", {}, {"bad.yaml:2:", "a key must be a name, got a mapping"}},
        BadCase{"YAML syntax", "model:\n  d_model: [64\n", {}, {"bad.yaml:", "YAML syntax error"}},
        BadCase{"override with bad type", "", {"optim.lr=fast"}, {"--set optim.lr=fast", "optim.lr", "number"}},
        BadCase{"override unknown key", "", {"train.step=5"}, {"--set train.step=5", "did you mean 'train.steps'"}},
        BadCase{"override without '='", "", {"train.steps"}, {"--set train.steps", "section.key=value"}},
        BadCase{"files corpus without path", "data:\n  corpus: files\n", {}, {"bad.yaml:2:3", "data.train_path"}},
        BadCase{"min_lr above lr", "optim:\n  lr: 0.001\nschedule:\n  min_lr: 0.01\n", {}, {"bad.yaml:4:3", "schedule.min_lr"}},
        BadCase{"odd head_dim with rope", "model:\n  d_model: 12\n  n_heads: 4\n  position: rope\n", {}, {"bad.yaml:", "rope", "even head_dim"}},
        BadCase{"dotted key in YAML", "model.d_model: 32\n", {},
                {"bad.yaml:1:1", "'model.d_model' is one YAML key with a dot in it", "'model:' on its own line", "'  d_model: ...'"}},
        BadCase{"another tool's name", "train:\n  max_iters: 3\n", {}, {"bad.yaml:2:3", "did you mean 'train.steps'"}},
        BadCase{"another tool's name, override", "", {"optim.learning_rate=3e-4"}, {"did you mean 'optim.lr'"}},
        BadCase{"empty sample prompt", "sample:\n  prompt: \"\"\n", {}, {"bad.yaml:2:3", "sample.prompt is empty", "sample.tokens: 0"}},
        BadCase{"val_path with brown", "data:\n  val_path: v.txt\n", {}, {"bad.yaml:2:3", "data.val_path is set but data.corpus is 'brown'"}},
        BadCase{"odd T5 bucket count", "model:\n  position: t5\n  relative_buckets: 7\n", {}, {"bad.yaml:3:3", "model.relative_buckets must be even and >= 4"}},
        BadCase{"T5 reach below its buckets", "model:\n  position: t5\n  relative_max_distance: 16\n", {}, {"bad.yaml:3:3", "model.relative_max_distance must be >= model.relative_buckets (32)"}},
        BadCase{"segments no batcher makes", "model:\n  arch: bert\n  n_segments: 2\n", {}, {"bad.yaml:3:3", "model.n_segments must be 0", "never be used or trained"}},
        BadCase{"deeply nested YAML", "model:\n  d_model: " + std::string(3000, '[') + std::string(3000, ']') + "\n", {},
                {"bad.yaml:2:", "levels deep here, more than the parser takes", "two levels"}},
        BadCase{"global tokens without a window", "model:\n  attention_global_tokens: 2\n", {}, {"bad.yaml:2:3", "set model.attention_window too"}},
        BadCase{"rope scaling without rope", "model:\n  rope_scaling: yarn\n", {}, {"bad.yaml:2:3", "it needs model.position: rope, got learned"}},
        BadCase{"rope scaling factor below 1", "model:\n  position: rope\n  rope_scaling: ntk\n  rope_scaling_factor: 0.5\n", {}, {"bad.yaml:4:3", "model.rope_scaling_factor", "[1.0, inf)"}}),
    case_name);

// A key written in the recipe or by --set that its configuration never reads (train/recipe_inert.h).
INSTANTIATE_TEST_SUITE_P(
    KeysWithoutEffect, BadRecipe,
    ::testing::Values(
        // The default value written out is still a key that does nothing.
        BadCase{"rope option with learned positions", "model:\n  rope_theta: 10000\n", {},
                {"bad.yaml:2:3: model.rope_theta has no effect: model.position is learned, and only rope turns "
                 "queries and keys; remove the key, or set model.position: rope"}},
        BadCase{"yarn option with ntk", "model:\n  position: rope\n  rope_scaling: ntk\n  rope_scaling_factor: 2\n"
                "  yarn_beta: 8\n", {},
                {"bad.yaml:5:3: model.yarn_beta has no effect: model.rope_scaling is ntk, and only yarn reads it"}},
        BadCase{"scaling factor without scaling", "model:\n  position: rope\n  rope_scaling_factor: 1\n", {},
                {"bad.yaml:3:3: model.rope_scaling_factor has no effect: model.rope_scaling is none"}},
        BadCase{"t5 option with rope", "model:\n  position: rope\n  relative_buckets: 16\n", {},
                {"bad.yaml:3:3: model.relative_buckets has no effect: model.position is rope, and only t5"}},
        BadCase{"mamba option without a mamba layer", "model:\n  mixer: [attention, linear]\n  mamba_state: 8\n", {},
                {"bad.yaml:3:3: model.mamba_state has no effect: model.mixer has no mamba layer"}},
        BadCase{"heads in a mamba-only model", "model:\n  mixer: mamba\n  position: none\n  n_heads: 4\n", {},
                {"bad.yaml:4:3: model.n_heads has no effect: model.mixer is mamba in every layer"}},
        BadCase{"window covering the context", "model:\n  max_seq_len: 128\n  attention_window: 128\ndata:\n"
                "  seq_len: 128\n", {},
                {"bad.yaml:3:3: model.attention_window (128) covers the whole context of data.seq_len (128) and "
                 "model.max_seq_len (128), so it has no effect"}},
        BadCase{"global tokens beside such a window", "model:\n  attention_window: 300\n  attention_global_tokens: 2\n",
                {},
                {"bad.yaml:2:3: model.attention_window (300) covers the whole context of data.seq_len (128) and "
                 "model.max_seq_len (256)",
                 "bad.yaml:3:3: model.attention_global_tokens has no effect: model.attention_window (300) covers",
                 "2 errors in the recipe"}},
        BadCase{"BigBird block without random blocks", "model:\n  attention_window: 16\n  attention_block_size: 8\n",
                {}, {"bad.yaml:3:3: model.attention_block_size has no effect: model.attention_random_blocks is 0"}},
        BadCase{"gelu form with swiglu in a GPT", "model:\n  feed_forward: swiglu\n  gelu: erf\n", {},
                {"bad.yaml:3:3: model.gelu has no effect: model.feed_forward is swiglu"}},
        BadCase{"BPE size with the char tokenizer", "data:\n  bpe_vocab_size: 2048\n", {},
                {"bad.yaml:2:3: data.bpe_vocab_size has no effect: data.tokenizer is char"}},
        BadCase{"BPE sample with the char tokenizer", "data:\n  bpe_sample_mb: 8\n", {},
                {"bad.yaml:2:3: data.bpe_sample_mb has no effect: data.tokenizer is char"}},
        BadCase{"mask_prob in a GPT", "data:\n  mask_prob: 0.2\n", {},
                {"bad.yaml:2:3: data.mask_prob has no effect: model.arch is gpt"}},
        BadCase{"SpanBERT's spans in a GPT", "data:\n  mask_span: 3\n", {},
                {"bad.yaml:2:3: data.mask_span has no effect: model.arch is gpt"}},
        BadCase{"replacement shares over 1", "model:\n  arch: bert\ndata:\n  mask_replace_prob: 0.95\n  random_replace_prob: 0.1\n",
                {}, {"bad.yaml:5:3", "data.random_replace_prob", "0.95", "0.1", "add up to more than 1"}},
        BadCase{"a span longer than the cap", "model:\n  arch: bert\ndata:\n  mask_span: 12\n", {},
                {"bad.yaml:4:3", "data.mask_span", "[1.0, 10.0]"}},
        BadCase{"brown_dir with your own files", "data:\n  corpus: files\n  train_path: t.txt\n  brown_dir: b\n", {},
                {"bad.yaml:4:3: data.brown_dir has no effect: data.corpus is files"}},
        BadCase{"Adam's beta with SGD", "optim:\n  name: sgd\n  beta2: 0.95\n", {},
                {"bad.yaml:3:3: optim.beta2 has no effect: optim.name is sgd"}},
        BadCase{"momentum with AdamW", "optim:\n  momentum: 0.8\n", {},
                {"bad.yaml:2:3: optim.momentum has no effect: optim.name is adamw"}},
        BadCase{"SGD's momentum with Muon", "optim:\n  name: muon\n  momentum: 0.8\n", {},
                {"bad.yaml:3:3: optim.momentum has no effect: optim.name is muon", "Muon's optim.muon_momentum"}},
        BadCase{"Muon's rate with AdamW", "", {"optim.muon_lr=0.01"},
                {"--set optim.muon_lr=0.01: optim.muon_lr has no effect: optim.name is adamw, and only muon reads "
                 "it; remove the key, or set optim.name: muon"}},
        BadCase{"decay flags without decay", "optim:\n  weight_decay: 0\n  decay_embeddings: true\n", {},
                {"bad.yaml:3:3: optim.decay_embeddings has no effect: optim.weight_decay is 0"}},
        BadCase{"min_lr with a constant schedule", "schedule:\n  kind: constant\n  min_lr: 0.0001\n", {},
                {"bad.yaml:3:3: schedule.min_lr has no effect: schedule.kind is constant"}},
        BadCase{"a cooldown without wsd", "schedule:\n  cooldown_fraction: 0.3\n", {},
                {"bad.yaml:2:3: schedule.cooldown_fraction has no effect: schedule.kind is cosine, and only wsd has a "
                 "cooldown"}},
        BadCase{"a cooldown beyond the run", "schedule:\n  kind: wsd\n  cooldown_fraction: 1.5\n", {},
                {"bad.yaml:3:3", "schedule.cooldown_fraction", "[0.0, 1.0]"}},
        BadCase{"sampling option in a BERT", "model:\n  arch: bert\nsample:\n  temperature: 0.5\n", {},
                {"bad.yaml:4:3: sample.temperature has no effect: model.arch is bert"}},
        BadCase{"sampling option with nothing sampled", "sample:\n  tokens: 0\n  top_k: 5\n", {},
                {"bad.yaml:3:3: sample.top_k has no effect: sample.tokens is 0"}},
        BadCase{"top_p when greedy", "sample:\n  temperature: 0\n  top_p: 0.9\n", {},
                {"bad.yaml:3:3: sample.top_p has no effect: sample.temperature is 0"}},
        BadCase{"an override's own key", "", {"schedule.kind=constant", "schedule.min_lr=0"},
                {"--set schedule.min_lr=0: schedule.min_lr has no effect: schedule.kind is constant"}}),
    case_name);

TEST(Recipe, MissingFileIsAnInputErrorNamingIt) {
  testing::expect_error<InputError>([] { load_recipe("/nonexistent/recipe.yaml"); }, "/nonexistent/recipe.yaml");
}

// Parsing `yaml` as bad.yaml throws an InputError whose message holds every fragment.
void expect_refused(const std::string& yaml, const std::vector<std::string>& fragments) {
  const std::string message = testing::error_message<InputError>([&] { parse_recipe(yaml, "bad.yaml"); });
  for (const std::string& f : fragments) EXPECT_NE(message.find(f), std::string::npos) << f << " not in: " << message;
}

TEST(Recipe, HeadsPerLayerIsAListFromYamlOrSetAndRoundTrips) {
  const std::string text = "model:\n  n_layers: 3\n  n_heads: 4\n  heads_per_layer: [4, 1, 3]\n  head_dim: 8\n";
  const Recipe r = parse_recipe(text, "pruned.yaml");
  EXPECT_EQ(r.model.heads_per_layer, (std::vector<int64_t>{4, 1, 3}));
  EXPECT_EQ(r.model.heads(1), 1);
  EXPECT_EQ(r.model.total_heads(), 8);
  EXPECT_EQ(r.model.head_dim(), 8);
  const Recipe again = parse_recipe(r.to_yaml(), "resolved.yaml");
  EXPECT_EQ(again.model.heads_per_layer, r.model.heads_per_layer);
  EXPECT_NE(r.to_yaml().find("heads_per_layer: [4, 1, 3]"), std::string::npos) << r.to_yaml();
  EXPECT_EQ(parse_recipe(text, "pruned.yaml", {"model.heads_per_layer=2, 2, 2"}).model.heads_per_layer,
            (std::vector<int64_t>{2, 2, 2}));
  EXPECT_TRUE(parse_recipe(text, "pruned.yaml", {"model.heads_per_layer=[]"}).model.heads_per_layer.empty());
  expect_refused("model:\n  heads_per_layer: [4, x]\n", {"bad.yaml:2:3", "model.heads_per_layer", "list of integers"});
  expect_refused("model:\n  n_layers: 2\n  heads_per_layer: [4]\n", {"bad.yaml:3:3", "lists 1 layers, model.n_layers is 2"});
  expect_refused("model:\n  n_layers: 2\n  n_kv_heads: 2\n  heads_per_layer: [4, 1]\n", {"layer 1 has 1 heads", "group size"});
  expect_refused("model:\n  n_layers: 2\n  position: alibi\n  heads_per_layer: [4, 2]\n",
                 {"cannot be used with model.position alibi"});
}

TEST(Recipe, TrainPathIsOnePathOrAListFromYamlOrSetAndRoundTrips) {
  const std::string one = "data:\n  corpus: files\n  train_path: corpus/a.txt\n";
  EXPECT_EQ(parse_recipe(one, "one.yaml").data.train_path, (std::vector<std::string>{"corpus/a.txt"}));
  // A path with a comma stays whole when written alone, and when quoted in a list.
  EXPECT_EQ(parse_recipe("data:\n  corpus: files\n  train_path: a, b.txt\n", "c.yaml").data.train_path,
            (std::vector<std::string>{"a, b.txt"}));
  const std::string list = "data:\n  corpus: files\n  train_path: [a.txt, 'b, c.txt', 'books/**/*.txt']\n"
                           "  val_path:\n    - v1.txt\n    - v2/\n";
  const Recipe r = parse_recipe(list, "list.yaml");
  EXPECT_EQ(r.data.train_path, (std::vector<std::string>{"a.txt", "b, c.txt", "books/**/*.txt"}));
  EXPECT_EQ(r.data.val_path, (std::vector<std::string>{"v1.txt", "v2/"}));
  const Recipe again = parse_recipe(r.to_yaml(), "resolved.yaml");
  EXPECT_EQ(again.data.train_path, r.data.train_path);
  EXPECT_EQ(again.data.val_path, r.data.val_path);
  EXPECT_NE(parse_recipe(one, "one.yaml").to_yaml().find("train_path: \"corpus/a.txt\""), std::string::npos);
  EXPECT_EQ(parse_recipe(one, "one.yaml", {"data.train_path=[x.txt, \"y,z.txt\"]"}).data.train_path,
            (std::vector<std::string>{"x.txt", "y,z.txt"}));
  EXPECT_TRUE(parse_recipe(one, "one.yaml", {"data.val_path="}).data.val_path.empty());
  expect_refused("data:\n  corpus: files\n  train_path: [a.txt, [b.txt]]\n",
                 {"bad.yaml:3:3", "data.train_path", "path or list of paths", "nested"});
  expect_refused("data:\n  corpus: files\n  train_path: [a.txt, '']\n", {"bad.yaml:3:3", "each a non-empty string"});
  expect_refused("data:\n  corpus: linux\n  train_path: [a.txt]\n",
                 {"data.train_path is set but data.corpus is 'linux'"});
}

TEST(Recipe, MixerIsAPatternOfNamesAndRefusesWhatItsLayersCannotTake) {
  const std::string text = "model:\n  n_layers: 4\n  mixer: [attention, linear]\n";
  const Recipe r = parse_recipe(text, "hybrid.yaml");
  EXPECT_EQ(r.model.mixers, (std::vector<layers::MixerKind>{layers::MixerKind::attention, layers::MixerKind::linear}));
  EXPECT_EQ(r.model.mixer(2), layers::MixerKind::attention);  // the pattern repeats
  EXPECT_EQ(r.model.mixer(3), layers::MixerKind::linear);
  EXPECT_NE(r.to_yaml().find("mixer: [attention, linear]"), std::string::npos) << r.to_yaml();
  EXPECT_EQ(parse_recipe(r.to_yaml(), "resolved.yaml").model.mixers, r.model.mixers);
  EXPECT_EQ(parse_recipe("model:\n  mixer: linear\n", "linear.yaml").model.mixers,
            (std::vector<layers::MixerKind>{layers::MixerKind::linear}));
  EXPECT_EQ(parse_recipe("", "x.yaml", {"model.mixer=linear, attention"}).model.mixer(0), layers::MixerKind::linear);
  EXPECT_TRUE(parse_recipe("", "x.yaml").model.mixers.empty());
  // The softmax layers of a hybrid take the score options; linear layers alone cannot.
  EXPECT_NO_THROW(parse_recipe("model:\n  position: rope\n  attention_window: 8\n  mixer: [linear, attention]\n", "ok.yaml"));
  expect_refused("model:\n  mixer: [attention, mamba5]\n", {"bad.yaml:2:3", "model.mixer", "list of: attention, linear"});
  expect_refused("model:\n  n_layers: 3\n  mixer: [attention, linear]\n", {"bad.yaml:3:3", "does not divide model.n_layers 3"});
  expect_refused("model:\n  position: alibi\n  mixer: [linear]\n", {"bad.yaml:2:3", "model.position none, sinusoidal or learned"});
  expect_refused("model:\n  position: rope\n  mixer: linear\n", {"bad.yaml:2:3", "got rope"});
  expect_refused("model:\n  mixer: [linear]\n  attention_window: 4\n", {"bad.yaml:3:3", "would act on nothing"});
  expect_refused("model:\n  mixer: [linear]\n  attn_dropout: 0.1\n", {"bad.yaml:3:3", "model.attn_dropout"});
  expect_refused("model:\n  n_kv_heads: 2\n  mixer: [attention, linear]\n", {"bad.yaml:2:3", "one key/value head per query head"});
  // Differential attention pairs heads and has no T5 table or probability dropout.
  EXPECT_EQ(parse_recipe("model:\n  mixer: [differential, attention]\n", "d.yaml").model.mixer(0),
            layers::MixerKind::differential);
  expect_refused("model:\n  d_model: 96\n  n_heads: 3\n  mixer: differential\n",
                 {"bad.yaml:3:3", "pairs heads: layer 0 needs an even number"});
  expect_refused("model:\n  n_kv_heads: 1\n  mixer: [attention, differential]\n", {"bad.yaml:2:3", "layer 1"});
  expect_refused("model:\n  position: t5\n  mixer: differential\n", {"bad.yaml:2:3", "does not take model.position t5"});
  expect_refused("model:\n  mixer: [attention, differential]\n  attn_dropout: 0.1\n",
                 {"bad.yaml:3:3", "does not take model.attn_dropout"});
  // Mamba: causal only, and alone it forms no scores for the score options to act on.
  const Recipe jamba = parse_recipe("model:\n  position: rope\n  mixer: [attention, mamba, mamba, mamba]\n"
                                    "  mamba_state: 8\n", "jamba.yaml");
  EXPECT_EQ(jamba.model.mixer(1), layers::MixerKind::mamba);
  EXPECT_EQ(jamba.model.mamba_state, 8);
  expect_refused("model:\n  arch: bert\n  mixer: [attention, mamba]\n", {"bad.yaml:3:3", "a BERT cannot use it"});
  expect_refused("model:\n  position: rope\n  mixer: mamba\n",
                 {"bad.yaml:2:3", "model.mixer mamba in every layer takes model.position none"});
  expect_refused("model:\n  mixer: [linear, mamba]\n  attention_window: 4\n",
                 {"bad.yaml:3:3", "model.attention_window acts on attention scores: with model.mixer linear and mamba in every layer it would act on nothing"});
  expect_refused("model:\n  mixer: mamba\n  mamba_conv: 0\n", {"bad.yaml:3:3", "model.mamba_conv"});
}

// The lines of a message.
std::vector<std::string> lines_of(const std::string& message) {
  std::vector<std::string> lines;
  std::istringstream in(message);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Like a compiler: every error of the file and its overrides, one a line, each starting with where
// its value came from, then their count.
TEST(Recipe, EveryErrorIsReportedAtOnceWithItsCount) {
  const std::string tiny = "model:\n  d_model: 32\n  n_heads: 2\n";
  std::vector<std::string> lines =
      lines_of(error_of(tiny, {"model.d_model=-5", "optim.lr=abc", "train.bogus=1"}));
  ASSERT_EQ(lines.size(), 4u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "--set model.d_model=-5: key 'model.d_model' expects an integer in [1, 65536], got '-5'");
  EXPECT_EQ(lines[1], "--set optim.lr=abc: key 'optim.lr' expects a number in (0.0, 10.0], got 'abc'");
  EXPECT_EQ(lines[2].rfind("--set train.bogus=1: unknown key 'train.bogus'", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3], "3 errors in the recipe");
  // Values, unknown keys, model and cross-section inconsistencies and keys without effect together,
  // the file's in the order found. train.steps 0 is refused, so the warmup is not compared with it.
  lines = lines_of(error_of("model:\n  d_model: wide\n  position: t5\n  relative_buckets: 7\noptim:\n  lrr: 0.1\n"
                            "schedule:\n  kind: constant\n  min_lr: 0.001\n",
                            {"train.steps=0"}));
  ASSERT_EQ(lines.size(), 6u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0].rfind("bad.yaml:2:3: key 'model.d_model' expects an integer", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("bad.yaml:6:3: unknown key 'optim.lrr' (did you mean 'optim.lr'?)", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("--set train.steps=0: key 'train.steps' expects an integer", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("bad.yaml:4:3: model.relative_buckets must be even and >= 4", 0), 0u) << lines[3];
  EXPECT_EQ(lines[4].rfind("bad.yaml:9:3: schedule.min_lr has no effect: schedule.kind is constant", 0), 0u)
      << lines[4];
  EXPECT_EQ(lines[5], "5 errors in the recipe");
}

// A refused value leaves the default in its place; an inconsistency with that default is the same
// error's echo, not a second one. One error reads as it always did: no count.
TEST(Recipe, ARefusedValueIsNotComparedWithOtherKeys) {
  EXPECT_EQ(error_of("model:\n  d_model: wide\n  n_heads: 3\n"),
            "bad.yaml:2:3: key 'model.d_model' expects an integer in [1, 65536], got 'wide'");
  EXPECT_EQ(error_of("train:\n  steps: 10\n  steps: 20\n"), "bad.yaml:3:3: key 'train.steps' appears twice (first at "
                                                               "bad.yaml:2:3)");
  EXPECT_EQ(error_of("optim:\n  lrr: 0.1\n"), "bad.yaml:2:3: unknown key 'optim.lrr' (did you mean 'optim.lr'?)");
}

// train.time_budget: empty, 0 and none all mean no budget, from the command line too (a shipped
// recipe's 5m switched off), and the resolved recipe writes it one way.
TEST(Recipe, NoTimeBudgetIsEmptyZeroOrNone) {
  const std::string budget = "train:\n  steps: 1000\n  time_budget: 5m\n";
  EXPECT_EQ(parse_recipe(budget, "r.yaml").train.time_budget, "5m");
  for (const char* off : {"train.time_budget=", "train.time_budget=0", "train.time_budget=none"}) {
    const Recipe r = parse_recipe(budget, "r.yaml", {off});
    EXPECT_EQ(r.train.time_budget, "") << off;
    EXPECT_NE(r.to_yaml().find("time_budget: \"\""), std::string::npos) << off;
  }
  EXPECT_EQ(parse_recipe("train:\n  time_budget:\n", "r.yaml").train.time_budget, "");
  EXPECT_EQ(parse_recipe("train:\n  time_budget: none\n", "r.yaml").train.time_budget, "");
  EXPECT_EQ(parse_duration("none"), 0.0);
  EXPECT_EQ(parse_duration("0"), 0.0);
  EXPECT_EQ(parse_duration("90s"), 90.0);
  expect_refused("train:\n  time_budget: 5 minutes\n", {"bad.yaml:2:3", "or 0, none or empty for no budget"});
}

TEST(Recipe, MuonKeysReachTheOptimizerConfig) {
  const Recipe d = parse_recipe("optim:\n  name: muon\n", "r.yaml");
  EXPECT_EQ(d.optim.muon_lr, 0.02);  // Jordan et al.'s defaults
  EXPECT_EQ(d.optim.muon_momentum, 0.95);
  EXPECT_TRUE(d.optim.muon_nesterov);
  const Recipe r = parse_recipe("optim:\n  name: muon\n  muon_lr: 0.01\n  muon_momentum: 0.9\n  muon_nesterov: false\n",
                                "r.yaml");
  EXPECT_EQ(r.optim.muon_lr, 0.01);
  EXPECT_EQ(r.optim.muon_momentum, 0.9);
  EXPECT_FALSE(r.optim.muon_nesterov);
  EXPECT_EQ(parse_recipe(r.to_yaml(), "back.yaml").to_yaml(), r.to_yaml());
  expect_refused("optim:\n  name: muon\n  muon_momentum: 1\n", {"bad.yaml:3:3", "optim.muon_momentum"});
}

TEST(Recipe, EveryKeyHasTypeAndMeaning) {
  for (const RecipeKeyDoc& k : recipe_keys()) {
    EXPECT_FALSE(k.type.empty()) << k.key;
    EXPECT_FALSE(k.meaning.empty()) << k.key;
    EXPECT_FALSE(k.default_value.empty()) << k.key;
  }
}

}  // namespace
}  // namespace tf::train
