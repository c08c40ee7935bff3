// RoPE scaling (Note [rope scaling] in framework/ops/rope.h): each rule's frequencies against the
// papers' formulas written out here at hand-picked pairs, YaRN's temperature, the identity at s = 1,
// linear scaling against position_scale, the relative-position property under every rule, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "framework/ops/rope.h"
#include "framework/random.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

using ops::RopeOptions;
using ops::RopeScalingKind;
using testing::all_close;

constexpr double kPi = std::numbers::pi;

RopeOptions scaled(RopeScalingKind kind, double factor, int64_t original_context = 0) {
  return {.scaling = {.kind = kind, .factor = factor, .original_context = original_context}};
}

TEST(RopeScaling, YarnFrequenciesFollowThePaperAtHandPickedPairs) {
  // D = 64, b = 10000, L = 1024, s = 8, alpha = 1, beta = 32 (Peng et al. 2023, section 3). Pair d
  // has wavelength lambda_d = 2 pi b^(2d / D) and makes r = L / lambda_d turns over L.
  const int64_t D = 64;
  const std::vector<double> f = ops::rope_frequencies(D, scaled(RopeScalingKind::yarn, 8.0, 1024));
  auto theta = [&](int d) { return std::pow(10000.0, -2.0 * d / D); };
  // d = 0: lambda = 2 pi, r = 163 > beta: left as trained.
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  // d = 4: lambda = 2 pi 10000^(1/8) = 19.87, r = 51.5 > 32: as trained.
  EXPECT_DOUBLE_EQ(f[4], theta(4));
  // d = 8: lambda = 2 pi 10000^(1/4) = 62.83, r = 16.30: gamma = (16.30 - 1) / 31 = 0.4934.
  const double r8 = 1024 / (2 * kPi * std::pow(10000.0, 16.0 / 64)), g8 = (r8 - 1) / 31;
  EXPECT_NEAR(r8, 16.297, 1e-3);
  EXPECT_NEAR(f[8], (1 - g8) * theta(8) / 8 + g8 * theta(8), 1e-15);
  // d = 20: lambda = 2 pi 10000^(5/8) = 1987, r = 0.515 < alpha: interpolated, theta / s.
  EXPECT_NEAR(f[20], theta(20) / 8, 1e-18);
  EXPECT_NEAR(f[31], theta(31) / 8, 1e-18);
  // The temperature: sqrt(1 / t) = 0.1 ln s + 1.
  EXPECT_DOUBLE_EQ(ops::rope_magnitude({.kind = RopeScalingKind::yarn, .factor = 8.0}), 0.1 * std::log(8.0) + 1);
  EXPECT_DOUBLE_EQ(ops::rope_magnitude({.kind = RopeScalingKind::ntk, .factor = 8.0}), 1.0);
}

TEST(RopeScaling, NtkRaisesTheBaseSoTheSlowestPairIsInterpolatedExactly) {
  // theta' = theta s^(D / (D - 2)): pair 0 keeps frequency 1; the last pair, (theta')^(-(D-2)/D),
  // is the plain one divided by s.
  const int64_t D = 16;
  const std::vector<double> plain = ops::rope_frequencies(D, {}),
                            ntk = ops::rope_frequencies(D, scaled(RopeScalingKind::ntk, 4.0));
  EXPECT_DOUBLE_EQ(ntk[0], 1.0);
  EXPECT_NEAR(ntk[D / 2 - 1], plain[D / 2 - 1] / 4, 1e-15 * plain[D / 2 - 1]);
  const double base = 10000.0 * std::pow(4.0, 16.0 / 14.0);  // hand-written theta'
  EXPECT_NEAR(ntk[3], std::pow(base, -6.0 / 16), 1e-15);
  for (size_t i = 1; i < ntk.size(); ++i) EXPECT_LT(ntk[i], plain[i]) << "pair " << i;
}

TEST(RopeScaling, LinearEqualsScaledPositions) {
  Rng rng(1);
  const Tensor x = randn({2, 2, 7, 8}, rng, 1.0, DType::f64);
  EXPECT_TRUE(all_close(ops::rope(x, scaled(RopeScalingKind::linear, 4.0)), ops::rope(x, {.position_scale = 0.25}),
                        1e-13, 1e-13));
}

TEST(RopeScaling, FactorOneIsThePlainTable) {
  Rng rng(2);
  const Tensor x = randn({1, 3, 9, 12}, rng, 1.0, DType::f64);
  const Tensor plain = ops::rope(x, {.position_offset = 40});
  for (RopeScalingKind kind : ops::kRopeScalingKinds) {
    SCOPED_TRACE(ops::rope_scaling_name(kind));
    RopeOptions o = scaled(kind, 1.0, 64);
    o.position_offset = 40;
    EXPECT_TRUE(all_close(ops::rope(x, o), plain, 1e-14, 1e-14));
  }
}

TEST(RopeScaling, ScoresStillDependOnlyOnRelativePositionAndYarnScalesThemByItsTemperature) {
  Rng rng(3);
  const Tensor q = randn({1, 1, 1, 16}, rng, 1.0, DType::f64), k = randn({1, 1, 1, 16}, rng, 1.0, DType::f64);
  auto score = [&](const RopeOptions& base, int64_t m, int64_t n) {
    RopeOptions at_m = base, at_n = base;
    at_m.position_offset = m;
    at_n.position_offset = n;
    const std::vector<double> a = ops::rope(q, at_m).to_vector(), b = ops::rope(k, at_n).to_vector();
    double dot = 0;
    for (size_t i = 0; i < a.size(); ++i) dot += a[i] * b[i];
    return dot;
  };
  for (RopeScalingKind kind : ops::kRopeScalingKinds) {
    SCOPED_TRACE(ops::rope_scaling_name(kind));
    const RopeOptions o = scaled(kind, kind == RopeScalingKind::none ? 1.0 : 5.0, 32);
    EXPECT_NEAR(score(o, 10, 3), score(o, 107, 100), 1e-12);
  }
  // At distance 0 the rotation cancels: the score is q.k times the squared magnitude.
  const double qk = score({}, 0, 0), m = 0.1 * std::log(5.0) + 1;
  EXPECT_NEAR(score(scaled(RopeScalingKind::yarn, 5.0, 32), 77, 77), m * m * qk, 1e-12);
}

TEST(RopeScaling, RejectsBadOptions) {
  const Tensor x = Tensor::zeros({1, 1, 3, 4});
  testing::expect_error([&] { ops::rope(x, scaled(RopeScalingKind::ntk, 0.5)); }, "must be >= 1, got 0.5");
  testing::expect_error([&] { ops::rope(x, scaled(RopeScalingKind::yarn, 2.0)); }, "original context");
  RopeOptions o = scaled(RopeScalingKind::yarn, 2.0, 16);
  o.scaling.alpha = 40;
  testing::expect_error([&] { ops::rope(x, o); }, "alpha < beta");
}

}  // namespace
}  // namespace tf
