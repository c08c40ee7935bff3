// SGD against update sequences computed by hand, and the fast float kernel against the reference.
#include "optim/sgd.h"

#include <gtest/gtest.h>

#include "framework/kernels/mode.h"
#include "framework/random.h"
#include "optim/grads.h"
#include "support/compare.h"

namespace tf::optim {
namespace {

using testing::param;
using testing::set_grad;

// float32 runs go through the fast kernel: a few float roundings of values of order 1.
double tolerance(DType d) { return d == DType::f64 ? 1e-12 : 1e-6; }

// Runs one parameter p0 = 1 through gradients 1, 2, -1 and returns p after each step.
std::vector<double> run(const SgdOptions& options, DType dtype) {
  ParamRef p = param("w", {1.0}, dtype);
  Sgd opt({p}, options);
  std::vector<double> trace;
  for (double g : {1.0, 2.0, -1.0}) {
    set_grad(p, {g});
    opt.step();
    trace.push_back(p.param.item());
  }
  return trace;
}

class SgdByDtype : public ::testing::TestWithParam<DType> {};

TEST_P(SgdByDtype, PlainStepIsLrTimesGradient) {
  // p = 1 - 0.1 * 1 = 0.9; 0.9 - 0.1 * 2 = 0.7; 0.7 + 0.1 = 0.8.
  const std::vector<double> trace = run({.lr = 0.1}, GetParam());
  const std::vector<double> expected = {0.9, 0.7, 0.8};
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(trace[i], expected[i], tolerance(GetParam())) << "step " << i + 1;
}

TEST_P(SgdByDtype, MomentumSequence) {
  // b1 = 1, p = 1 - 0.1 = 0.9; b2 = 0.9 * 1 + 2 = 2.9, p = 0.9 - 0.29 = 0.61;
  // b3 = 0.9 * 2.9 - 1 = 1.61, p = 0.61 - 0.161 = 0.449.
  const std::vector<double> trace = run({.lr = 0.1, .momentum = 0.9}, GetParam());
  const std::vector<double> expected = {0.9, 0.61, 0.449};
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(trace[i], expected[i], tolerance(GetParam())) << "step " << i + 1;
}

TEST_P(SgdByDtype, NesterovSequence) {
  // d = g + 0.9 b: b1 = 1, d = 1.9, p = 0.81; b2 = 2.9, d = 2 + 2.61 = 4.61, p = 0.349;
  // b3 = 1.61, d = -1 + 1.449 = 0.449, p = 0.349 - 0.0449 = 0.3041.
  const std::vector<double> trace = run({.lr = 0.1, .momentum = 0.9, .nesterov = true}, GetParam());
  const std::vector<double> expected = {0.81, 0.349, 0.3041};
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(trace[i], expected[i], tolerance(GetParam())) << "step " << i + 1;
}

TEST_P(SgdByDtype, WeightDecayIsAddedToTheGradientOfDecayedParamsOnly) {
  ParamRef decayed = param("w", {2.0}, GetParam()), exempt = param("b", {2.0}, GetParam(), /*decay=*/false);
  Sgd opt({decayed, exempt}, {.lr = 0.1, .weight_decay = 0.5});
  for (int s = 0; s < 2; ++s) {
    set_grad(decayed, {1.0});
    set_grad(exempt, {1.0});
    opt.step();
  }
  // d = 1 + 0.5 * 2 = 2, p = 1.8; d = 1 + 0.9 = 1.9, p = 1.61. Exempt: 2 - 0.1 - 0.1 = 1.8.
  EXPECT_NEAR(decayed.param.item(), 1.61, tolerance(GetParam()));
  EXPECT_NEAR(exempt.param.item(), 1.8, tolerance(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SgdByDtype, ::testing::Values(DType::f64, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Sgd, ParamsWithoutGradientAreSkippedAndKeepNoState) {
  ParamRef a = param("a", {1.0}), b = param("b", {1.0});
  Sgd opt({a, b}, {.lr = 0.1, .momentum = 0.9});
  set_grad(a, {1.0});
  opt.step();
  EXPECT_DOUBLE_EQ(a.param.item(), 0.9);
  EXPECT_DOUBLE_EQ(b.param.item(), 1.0);
  const OptimizerState s = opt.state();
  EXPECT_EQ(s.step, 1);
  EXPECT_EQ(s.params.count("a"), 1u);
  EXPECT_EQ(s.params.count("b"), 0u);
  opt.zero_grad();
  EXPECT_FALSE(a.param.grad().defined());
}

TEST(Sgd, RejectsInconsistentOptions) {
  EXPECT_THROW(Sgd({param("w", {1.0})}, {.lr = 0.1, .nesterov = true}), InputError);
  EXPECT_THROW(Sgd({param("w", {1.0})}, {.lr = -1}), InputError);
  EXPECT_THROW(Sgd({param("w", {1.0})}, {.lr = 0.1, .momentum = 1.5}), InputError);
  ParamRef w = param("w", {1.0});
  EXPECT_THROW(Sgd({w, w}), Error);  // the same name twice
  ParamRef tied = w;
  tied.name = "lm_head.weight";
  EXPECT_THROW(Sgd({w, tied}), Error);  // the same tensor twice would be updated twice
}

TEST(Sgd, FastKernelMatchesReferenceOnOddSizes) {
  Rng rng(7);
  for (int64_t n : {1, 3, 17, 63, 130, 70001}) {  // 70001 > the OpenMP threshold
    for (bool nesterov : {false, true}) {
      const SgdCoeffs c{0.05, 0.9, 0.01, nesterov};
      const Tensor p0 = randn({n}, rng), b0 = randn({n}, rng), g = randn({n}, rng);
      Tensor p_fast = p0.clone(), b_fast = b0.clone(), p_ref = p0.clone(), b_ref = b0.clone();
      for (int s = 0; s < 3; ++s) {
        sgd_update_fast(p_fast.data<float>(), g.data<float>(), b_fast.data<float>(), n, c);
        sgd_update_reference<float>(p_ref.data<float>(), g.data<float>(), b_ref.data<float>(), n, c);
      }
      // Values are O(1-10); float arithmetic versus double arithmetic rounded to float differs by
      // a few ulps (1.2e-7 relative) per operation, over 3 steps of ~4 operations.
      EXPECT_TRUE(tf::testing::all_close(p_fast, p_ref, 1e-5, 1e-6)) << "n=" << n << " nesterov=" << nesterov;
      EXPECT_TRUE(tf::testing::all_close(b_fast, b_ref, 1e-5, 1e-6)) << "n=" << n << " nesterov=" << nesterov;
    }
  }
}

}  // namespace
}  // namespace tf::optim
