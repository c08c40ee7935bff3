// Adam and AdamW against update sequences computed by hand, the decay-by-name rule, and the fast
// float kernel against the reference.
#include "optim/adam.h"

#include <gtest/gtest.h>

#include <cmath>

#include "framework/random.h"
#include "optim/grads.h"
#include "support/compare.h"

namespace tf::optim {
namespace {

using testing::param;
using testing::set_grad;

// float32 runs go through the fast kernel: a few float roundings of values of order 1.
double tolerance(DType d) { return d == DType::f64 ? 1e-12 : 2e-6; }

class AdamByDtype : public ::testing::TestWithParam<DType> {};

TEST_P(AdamByDtype, FirstStepMovesEachParameterByLrTimesSignOfGradient) {
  // Step 1: m = (1 - b1) g, v = (1 - b2) g^2, so m_hat = g, v_hat = g^2 and the update is
  // lr * g / (|g| + eps) = lr * sign(g) * (1 - eps / |g| + ...), whatever |g| is.
  ParamRef p = param("w", {1.0, 1.0, 1.0, 1.0}, GetParam());
  Adam opt({p}, {.lr = 0.1});
  set_grad(p, {0.5, -3.0, 1e-3, -200.0});
  opt.step();
  const std::vector<double> expected = {1 - 0.1 * 0.5 / (0.5 + 1e-8), 1 + 0.1 * 3.0 / (3.0 + 1e-8),
                                        1 - 0.1 * 1e-3 / (1e-3 + 1e-8), 1 + 0.1 * 200.0 / (200.0 + 1e-8)};
  EXPECT_NEAR(expected[1], 1.1, 1e-8);  // lr * sign(g), modulo eps
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(p.param.at(i), expected[i], tolerance(GetParam())) << i;
}

TEST_P(AdamByDtype, ThreeStepSequence) {
  // lr 0.1, b1 0.9, b2 0.999, eps 1e-8, p0 = 1, gradients 0.5, -0.25, 2:
  //  t=1: m = 0.05, v = 0.00025, m_hat = 0.5, v_hat = 0.25, p = 1 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.900000002
  //  t=2: m = 0.9 * 0.05 - 0.025 = 0.02, v = 0.999 * 0.00025 + 0.001 * 0.0625 = 0.00031225,
  //       m_hat = 0.02 / 0.19, v_hat = 0.00031225 / 0.001999, p = 0.8733662987078463
  //  t=3: m = 0.018 + 0.2 = 0.218, v = 0.999 * 0.00031225 + 0.004 = 0.00431193775,
  //       m_hat = 0.218 / 0.271, v_hat = 0.00431193775 / 0.002997001, p = 0.8063015345291531
  ParamRef p = param("w", {1.0}, GetParam());
  Adam opt({p}, {.lr = 0.1});
  const double grads[] = {0.5, -0.25, 2.0};
  const double expected[] = {0.900000002, 0.8733662987078463, 0.8063015345291531};
  for (int t = 0; t < 3; ++t) {
    set_grad(p, {grads[t]});
    opt.step();
    EXPECT_NEAR(p.param.item(), expected[t], tolerance(GetParam())) << "step " << t + 1;
  }
  // The closed forms of step 2, evaluated here, agree with the literal above.
  const double p2 = 0.900000002 - 0.1 * (0.02 / 0.19) / (std::sqrt(0.00031225 / 0.001999) + 1e-8);
  EXPECT_NEAR(p2, expected[1], 1e-15);
  const OptimizerState s = opt.state();
  EXPECT_NEAR(s.params.at("w").slots.at("exp_avg").item(), 0.218, tolerance(GetParam()));
  EXPECT_NEAR(s.params.at("w").slots.at("exp_avg_sq").item(), 0.00431193775, tolerance(GetParam()) * 1e-2);
  EXPECT_EQ(s.params.at("w").step, 3);
}

TEST_P(AdamByDtype, AdamWeightDecayIsL2InTheGradient) {
  // g_eff = g + wd p: 0.5 + 0.5 * 2 = 1.5, so step 1 moves by lr * sign(1.5): p = 2 - 0.1 (1 - 1e-8/1.5);
  // step 2: g_eff = -3 + 0.5 * 1.9000000006666666 = -2.0499999996666665, p = 1.9205098542409944.
  ParamRef p = param("w", {2.0}, GetParam());
  Adam opt({p}, {.lr = 0.1, .weight_decay = 0.5});
  set_grad(p, {0.5});
  opt.step();
  EXPECT_NEAR(p.param.item(), 1.9000000006666666, tolerance(GetParam()));
  set_grad(p, {-3.0});
  opt.step();
  EXPECT_NEAR(p.param.item(), 1.9205098542409944, tolerance(GetParam()));
}

TEST_P(AdamByDtype, AdamWDecaysFirstAndOnlyDecayParams) {
  // With g = 0 the Adam step is 0 / (0 + eps) = 0, leaving the decoupled decay alone:
  // p_t = p0 (1 - lr wd)^t = 2 * 0.95^t. The exempt parameter does not move at all.
  ParamRef w = param("w", {2.0}, GetParam()), b = param("b", {2.0}, GetParam(), /*decay=*/false);
  AdamW opt({w, b}, {.lr = 0.1, .weight_decay = 0.5});
  for (int t = 1; t <= 3; ++t) {
    set_grad(w, {0.0});
    set_grad(b, {0.0});
    opt.step();
    EXPECT_NEAR(w.param.item(), 2 * std::pow(0.95, t), tolerance(GetParam())) << "step " << t;
    EXPECT_EQ(b.param.item(), 2.0);
  }
}

TEST_P(AdamByDtype, AdamWWithGradientIsDecayThenAdamStep) {
  // t=1: p = 2 * 0.95 - 0.1 * 0.5 / (0.5 + 1e-8) = 1.800000002
  // t=2: p = 1.800000002 * 0.95 - (Adam step 2 of the three-step sequence: 0.026633703292153736)
  //        = 1.6833662986078464
  ParamRef p = param("w", {2.0}, GetParam());
  AdamW opt({p}, {.lr = 0.1, .weight_decay = 0.5});
  set_grad(p, {0.5});
  opt.step();
  EXPECT_NEAR(p.param.item(), 1.800000002, tolerance(GetParam()));
  set_grad(p, {-0.25});
  opt.step();
  EXPECT_NEAR(p.param.item(), 1.6833662986078464, tolerance(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AdamByDtype, ::testing::Values(DType::f64, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Adam, BiasCorrectionCountsEachParametersOwnSteps) {
  // b receives its first gradient at the optimizer's third step; its update must still be a
  // first step (lr * sign(g)), not one corrected as if it had three steps of history.
  ParamRef a = param("a", {0.0}), b = param("b", {0.0});
  Adam opt({a, b}, {.lr = 0.1});
  for (int t = 1; t <= 3; ++t) {
    set_grad(a, {1.0});
    b.param.zero_grad();
    if (t == 3) set_grad(b, {4.0});
    opt.step();
    if (t < 3) {
      EXPECT_EQ(b.param.item(), 0.0) << "a parameter without gradient must not move";
    }
  }
  EXPECT_NEAR(b.param.item(), -0.1 * (1 - 1e-8 / 4.0), 1e-12);
  EXPECT_EQ(opt.state().params.at("b").step, 1);
  EXPECT_EQ(opt.state().params.at("a").step, 3);
  EXPECT_EQ(opt.step_count(), 3);
}

TEST(Adam, RejectsBadOptions) {
  EXPECT_THROW(Adam({param("w", {1.0})}, {.beta1 = 1.0}), InputError);
  EXPECT_THROW(AdamW({param("w", {1.0})}, {.beta2 = -0.1}), InputError);
  EXPECT_THROW(AdamW({param("w", {1.0})}, {.weight_decay = -1}), InputError);
}

TEST(Adam, FastKernelMatchesReferenceOnOddSizes) {
  Rng rng(11);
  for (int64_t n : {1, 3, 17, 63, 130, 70001}) {  // 70001 > the OpenMP threshold
    for (bool decoupled : {false, true}) {
      const Tensor p0 = randn({n}, rng);
      Tensor p_fast = p0.clone(), p_ref = p0.clone();
      Tensor m_fast = Tensor::zeros({n}), v_fast = Tensor::zeros({n});
      Tensor m_ref = Tensor::zeros({n}), v_ref = Tensor::zeros({n});
      for (int64_t t = 1; t <= 3; ++t) {
        const Tensor g = randn({n}, rng);
        const AdamCoeffs c{1e-2, 0.9, 0.95, 1e-8, 0.1, decoupled, t};
        adam_update_fast(p_fast.data<float>(), g.data<float>(), m_fast.data<float>(), v_fast.data<float>(), n, c);
        adam_update_reference<float>(p_ref.data<float>(), g.data<float>(), m_ref.data<float>(),
                                     v_ref.data<float>(), n, c);
      }
      // p is O(1) and moves by <= ~lr per step; the fast path's float arithmetic differs from the
      // double reference (rounded to float) by a few ulps (~1e-7 relative) per operation.
      EXPECT_TRUE(tf::testing::all_close(p_fast, p_ref, 1e-5, 1e-6)) << "n=" << n << " decoupled=" << decoupled;
      EXPECT_TRUE(tf::testing::all_close(m_fast, m_ref, 1e-5, 1e-7)) << "n=" << n;
      EXPECT_TRUE(tf::testing::all_close(v_fast, v_ref, 1e-5, 1e-8)) << "n=" << n;
    }
  }
}

TEST(DecayRule, DefaultsExemptBiasesNormsAndEmbeddings) {
  for (const char* name : {"blocks.0.attn.qkv.bias", "blocks.11.ln_1.weight", "blocks.0.ln2.weight", "ln_f.weight",
                           "blocks.0.norm1.weight", "encoder.layer_norm.weight", "tok_emb.weight",
                           "pos_embedding.weight", "wte.weight", "wpe.weight", "bias"})
    EXPECT_TRUE(exempt_from_decay(name)) << name;
  for (const char* name : {"blocks.0.attn.qkv.weight", "blocks.0.attn.proj.weight", "blocks.3.mlp.fc.weight",
                           "lm_head.weight", "linear.weight", "biased_head.weight"})
    EXPECT_FALSE(exempt_from_decay(name)) << name;
}

TEST(DecayRule, PatternsWithADotMatchTheWholeName) {
  const NoDecayRule rule{{"lm_head.*", "blocks.?.attn.*"}};
  EXPECT_TRUE(exempt_from_decay("lm_head.weight", rule));
  EXPECT_TRUE(exempt_from_decay("blocks.3.attn.qkv.weight", rule));
  EXPECT_FALSE(exempt_from_decay("blocks.12.attn.qkv.weight", rule));  // '?' is one character
  EXPECT_FALSE(exempt_from_decay("blocks.0.attn_lm_head.weight", rule));
  EXPECT_FALSE(exempt_from_decay("blocks.0.mlp.fc.bias", rule));       // defaults replaced

  const std::vector<ParamRef> refs = param_refs({{"w.weight", Tensor::zeros({2})}, {"w.bias", Tensor::zeros({2})}});
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_TRUE(refs[0].decay);
  EXPECT_FALSE(refs[1].decay);
}

TEST(DecayRule, GlobMatch) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("a*c", "abbbc"));
  EXPECT_TRUE(glob_match("*norm*", "layernorm"));
  EXPECT_FALSE(glob_match("a*c", "abcd"));
  EXPECT_FALSE(glob_match("?", ""));
  EXPECT_TRUE(glob_match("a*b*c", "axxbyybc"));
}

}  // namespace
}  // namespace tf::optim
