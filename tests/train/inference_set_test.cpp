// eval and sample with --set on a trained model (train::check_inference_changes): a RoPE model read at
// four times its trained context with each scaling rule, factor 1 giving back the plain figures
// exactly, keys that shape or trained the weights refused by name, a learned position table refused
// beyond its length, and the rope-scaling keys' own errors pointing at the --set.
#include <gtest/gtest.h>

#include <regex>

#include "train/recipe.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using tf::testing::read_file;

class InferenceSet : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = tmp_.path() / "text.txt";
    tf::testing::write_file(text_, tf::testing::english_text(6000));
    eval_text_ = (tmp_.path() / "eval.txt").string();
    tf::testing::write_file(eval_text_, tf::testing::english_text(3000, 5));
  }
  using Outcome = tf::testing::CommandOutcome;
  Outcome run(const std::vector<std::string>& args) const { return tf::testing::run_command(args, tmp_.path()); }
  void train(const std::string& position) const {
    const auto args = tf::testing::train_args("tiny_gpt", text_, dir_, tmp_.path() / "cache",
                                              {"eval.interval=0", "train.steps=20", "schedule.warmup_steps=0",
                                               "model.position=" + position});
    const Outcome o = run(args);
    ASSERT_EQ(o.code, 0) << o.err;
  }
  // eval --json on the eval text with these --set values; the loss as printed (full precision).
  std::string eval_loss(const std::vector<std::string>& sets) const {
    std::vector<std::string> args{"eval", dir_.string(), "--text", eval_text_, "--json"};
    for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
    const Outcome o = run(args);
    EXPECT_EQ(o.code, 0) << o.err;
    std::smatch m;
    if (!std::regex_search(o.out, m, std::regex(R"("loss": ([-0-9.e]+))"))) return "no loss in: " + o.out;
    return m[1];
  }

  tf::testing::RunTempDir tmp_;
  fs::path text_, dir_ = tmp_.path() / "run";
  std::string eval_text_;
};

void expect_has(const std::string& text, const std::string& fragment) {
  EXPECT_NE(text.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << text;
}

TEST_F(InferenceSet, ARopeModelIsReadAtFourTimesItsContextWithEachScaling) {
  train("rope");  // tiny_gpt: trained at data.seq_len 32
  const std::vector<std::string> longer = {"model.max_seq_len=128", "data.seq_len=128"};
  // The longer context, scaled by `kind` with factor s (YaRN's ramp also reads the trained context,
  // a key the other two refuse as having no effect).
  auto with = [&](const std::string& kind, const std::string& s) {
    std::vector<std::string> extra = longer;
    extra.insert(extra.end(), {"model.rope_scaling=" + kind, "model.rope_scaling_factor=" + s});
    if (kind == "yarn") extra.push_back("model.rope_original_context=32");
    return extra;
  };
  const std::string plain = eval_loss(longer);
  ASSERT_NE(plain.rfind("no loss", 0), 0u) << plain;
  // s = 1 is the plain table under every rule: the same loss to the last digit.
  for (const char* kind : {"linear", "ntk", "yarn"}) EXPECT_EQ(eval_loss(with(kind, "1")), plain) << kind;
  // s = 4 changes the angles, and so the loss.
  std::vector<std::string> scaled;
  for (const char* kind : {"linear", "ntk", "yarn"}) {
    scaled.push_back(eval_loss(with(kind, "4")));
    EXPECT_NE(scaled.back(), plain) << kind;
  }
  EXPECT_NE(scaled[0], scaled[1]);
  EXPECT_NE(scaled[1], scaled[2]);
  // sample takes the same keys.
  const Outcome s = run({"sample", dir_.string(), "--tokens", "5", "--set", "model.rope_scaling=yarn", "--set",
                         "model.rope_scaling_factor=2", "--set", "model.rope_original_context=32"});
  EXPECT_EQ(s.code, 0) << s.err;
}

TEST_F(InferenceSet, KeysThatShapedOrTrainedTheWeightsAreRefusedByName) {
  train("rope");
  const fs::path newest = dir_ / "ckpt_00000020.h5";
  const auto before = fs::last_write_time(newest);
  Outcome o = run({"eval", dir_.string(), "--set", "model.d_model=64", "--set", "model.norm=rms"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "cannot change after training:\n  model.d_model: 32 in the checkpoint, 64 now\n  model.norm: layer "
                    "in the checkpoint, rms now");
  o = run({"sample", dir_.string(), "--set", "model.rope_scaling=yarn", "--set", "model.rope_scaling_factor=2"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "--set model.rope_scaling=yarn: model.rope_scaling yarn needs model.rope_original_context");
  o = run({"eval", dir_.string(), "--set", "model.rope_scaling_factor=0.5"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "model.rope_scaling_factor");
  EXPECT_EQ(fs::last_write_time(newest), before) << "nothing is written";
}

TEST_F(InferenceSet, ALearnedPositionTableIsNotReadBeyondItsLength) {
  train("learned");
  const Outcome o = run({"eval", dir_.string(), "--set", "model.max_seq_len=64", "--set", "data.seq_len=64"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "learned one position embedding for each of its 32 positions");
  const Outcome s = run({"eval", dir_.string(), "--set", "model.rope_scaling=ntk", "--set", "model.rope_scaling_factor=2"});
  EXPECT_EQ(s.code, 2);
  expect_has(s.err, "--set model.rope_scaling=ntk: model.rope_scaling ntk stretches RoPE's angles: it needs "
                    "model.position: rope, got learned");
}

}  // namespace
}  // namespace tf::train
