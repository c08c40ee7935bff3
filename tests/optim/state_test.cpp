// Optimizer state: save, restore (in memory and through HDF5), then continue, and the result is
// bit-identical to a run that was never interrupted. Bad states are refused without harm.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "framework/random.h"
#include "optim/adam.h"
#include "optim/grads.h"
#include "optim/muon.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "optim/state_io.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace tf::optim {
namespace {

using testing::same_bits;

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<ParamRef>)>;

// Float32 parameters of a few shapes, one large enough for the kernels' OpenMP path; the weight
// matrix is a hidden matrix for Muon (the others ignore the flag), ln_f.weight is 2-D but not one.
std::vector<ParamRef> make_params() {
  Rng rng(5);
  std::vector<ParamRef> params;
  for (const auto& [name, shape] : std::vector<std::pair<std::string, Shape>>{
           {"blocks.0.mlp.fc.weight", {257, 130}}, {"blocks.0.mlp.fc.bias", {130}}, {"ln_f.weight", {3, 7}}}) {
    Tensor t = randn(shape, rng);
    t.set_requires_grad().set_name(name);
    params.push_back({name, t, !exempt_from_decay(name), name == "blocks.0.mlp.fc.weight"});
  }
  return params;
}

std::vector<ParamRef> copy_params(const std::vector<ParamRef>& params) {
  std::vector<ParamRef> out;
  for (const ParamRef& p : params) {
    Tensor t = p.param.clone();
    t.set_requires_grad().set_name(p.name);
    out.push_back({p.name, t, p.decay, p.hidden_matrix});
  }
  return out;
}

// Step s: gradients drawn from Rng(1000 + s); the bias gets none on step 1 (it then has no state).
void train_step(Optimizer& opt, const Schedule& schedule, int64_t s) {
  Rng rng(1000 + s);
  opt.zero_grad();
  for (const ParamRef& p : opt.params()) {
    const Tensor g = randn(p.param.shape(), rng, 0.1);
    if (p.name == "blocks.0.mlp.fc.bias" && s <= 1) continue;
    accumulate_grad(p.param, g);
  }
  opt.set_lr(schedule.lr_at(s));
  opt.step();
}

void expect_resume_is_bit_identical(const MakeOptimizer& make, bool through_hdf5) {
  const Schedule schedule({.kind = ScheduleKind::cosine, .lr = 1e-2, .min_lr = 1e-3, .warmup_steps = 2,
                           .decay_steps = 6});
  // Uninterrupted: 6 steps.
  std::vector<ParamRef> straight = make_params();
  std::unique_ptr<Optimizer> opt_straight = make(straight);
  for (int64_t s = 0; s < 6; ++s) train_step(*opt_straight, schedule, s);

  // Interrupted after 3 steps: parameters and optimizer state saved, then rebuilt from scratch.
  std::vector<ParamRef> first = make_params();
  std::unique_ptr<Optimizer> opt_first = make(first);
  for (int64_t s = 0; s < 3; ++s) train_step(*opt_first, schedule, s);
  OptimizerState saved = opt_first->state();
  if (through_hdf5) {
    const tf::testing::TempDir dir;
    const std::string path = (dir / "optimizer_state_test.h5").string();
    H5Writer out(path);
    save_optimizer_state(out, "/optimizer", saved);
    out.close();
    H5Reader in(path);
    saved = load_optimizer_state(in, "/optimizer");
  }
  std::vector<ParamRef> resumed = copy_params(first);
  std::unique_ptr<Optimizer> opt_resumed = make(resumed);
  opt_resumed->load_state(saved);
  for (int64_t s = 3; s < 6; ++s) train_step(*opt_resumed, schedule, s);

  for (size_t i = 0; i < straight.size(); ++i)
    EXPECT_TRUE(same_bits(straight[i].param, resumed[i].param)) << straight[i].name;
  const OptimizerState a = opt_straight->state(), b = opt_resumed->state();
  EXPECT_EQ(a.step, b.step);
  ASSERT_EQ(a.params.size(), b.params.size());
  for (const auto& [name, ps] : a.params) {
    EXPECT_EQ(ps.step, b.params.at(name).step) << name;
    for (const auto& [slot, t] : ps.slots) EXPECT_TRUE(same_bits(t, b.params.at(name).slots.at(slot))) << name << slot;
  }
}

const MakeOptimizer make_adamw = [](std::vector<ParamRef> p) {
  return std::make_unique<AdamW>(std::move(p), AdamOptions{.beta2 = 0.95, .weight_decay = 0.1});
};
const MakeOptimizer make_sgd = [](std::vector<ParamRef> p) {
  return std::make_unique<Sgd>(std::move(p), SgdOptions{.momentum = 0.9, .nesterov = true, .weight_decay = 1e-4});
};

const MakeOptimizer make_muon = [](std::vector<ParamRef> p) {
  return std::make_unique<Muon>(std::move(p), MuonOptions{.adamw = {.beta2 = 0.95, .weight_decay = 0.1}});
};

TEST(OptimizerState, AdamWResumeIsBitIdentical) { expect_resume_is_bit_identical(make_adamw, false); }
TEST(OptimizerState, AdamWResumeThroughHdf5IsBitIdentical) { expect_resume_is_bit_identical(make_adamw, true); }
TEST(OptimizerState, SgdResumeThroughHdf5IsBitIdentical) { expect_resume_is_bit_identical(make_sgd, true); }
TEST(OptimizerState, MuonResumeIsBitIdentical) { expect_resume_is_bit_identical(make_muon, false); }
TEST(OptimizerState, MuonResumeThroughHdf5IsBitIdentical) { expect_resume_is_bit_identical(make_muon, true); }

TEST(OptimizerState, SavedStateIsASnapshot) {
  std::vector<ParamRef> params = make_params();
  AdamW opt(params);
  const Schedule schedule({.kind = ScheduleKind::constant, .lr = 1e-3});
  train_step(opt, schedule, 2);
  const OptimizerState saved = opt.state();
  const Tensor exp_avg = saved.params.at("ln_f.weight").slots.at("exp_avg").clone();
  train_step(opt, schedule, 3);
  EXPECT_TRUE(same_bits(saved.params.at("ln_f.weight").slots.at("exp_avg"), exp_avg));
}

TEST(OptimizerState, BadStatesAreRefusedAndLeaveTheOptimizerUnchanged) {
  std::vector<ParamRef> params = make_params();
  AdamW opt(params);
  const Schedule schedule({.kind = ScheduleKind::constant, .lr = 1e-3});
  train_step(opt, schedule, 2);
  const OptimizerState good = opt.state();

  OptimizerState wrong_kind = good;
  wrong_kind.kind = "sgd";
  EXPECT_THROW(opt.load_state(wrong_kind), InputError);

  OptimizerState unknown = good;
  unknown.params["blocks.9.attn.qkv.weight"] = good.params.at("ln_f.weight");
  EXPECT_THROW(opt.load_state(unknown), InputError);

  OptimizerState wrong_shape = good;
  wrong_shape.params.at("ln_f.weight").slots.at("exp_avg") = Tensor::zeros({7, 3});
  const std::string message = tf::testing::error_message<InputError>([&] { opt.load_state(wrong_shape); });
  EXPECT_NE(message.find("ln_f.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("(7, 3)"), std::string::npos) << message;

  OptimizerState missing_slot = good;
  missing_slot.params.at("ln_f.weight").slots.erase("exp_avg_sq");
  EXPECT_THROW(opt.load_state(missing_slot), InputError);

  const OptimizerState after = opt.state();  // unchanged by the refusals
  EXPECT_EQ(after.step, good.step);
  for (const auto& [name, ps] : good.params)
    for (const auto& [slot, t] : ps.slots) EXPECT_TRUE(same_bits(t, after.params.at(name).slots.at(slot)));
}

}  // namespace
}  // namespace tf::optim
