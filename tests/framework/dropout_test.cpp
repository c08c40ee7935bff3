// Dropout: the kept fraction and the mean are those of Bernoulli(1 - p) within binomial bounds, the
// mask is the Philox draw the header promises, reproducible per seed, and reused by the backward.
#include <gtest/gtest.h>

#include <cmath>

#include "framework/autograd/tape.h"
#include "framework/gradcheck.h"
#include "framework/ops/dropout.h"
#include "framework/random.h"
#include "support/errors.h"

namespace tf {
namespace {

constexpr int64_t kN = 100000;

TEST(Dropout, KeepsAboutOneMinusPAndPreservesTheMean) {
  for (double p : {0.1, 0.3, 0.5, 0.9}) {
    const Tensor y = ops::dropout(Tensor::full({kN}, 1.0), p, 1234);
    const float* v = y.data<float>();
    int64_t kept = 0;
    double sum = 0;
    for (int64_t i = 0; i < kN; ++i) {
      kept += v[i] != 0.0f;
      sum += v[i];
    }
    // kept ~ Binomial(n, 1 - p): 5 standard deviations, sqrt(n p (1 - p)), is ~145 for p = 0.3 and
    // is exceeded with probability 6e-7 (the seed is fixed, so the test is deterministic anyway).
    const double sd = std::sqrt(kN * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(kept), kN * (1 - p), 5 * sd) << "p " << p;
    // E[y] = x: the mean of ones kept and scaled by 1 / (1 - p) is kept / (n (1 - p)), whose
    // standard deviation is sd / (n (1 - p)).
    EXPECT_NEAR(sum / kN, 1.0, 5 * sd / (kN * (1 - p)) + 1e-6) << "p " << p;
  }
}

TEST(Dropout, DropsExactlyWherePhiloxDrawIsBelowP) {
  Rng rng(5);
  const Tensor x = randn({7, 13}, rng, 1.0, DType::f64);
  const double p = 0.3;
  const Tensor y = ops::dropout(x, p, 99);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (uniform_at(99, i) < p)
      EXPECT_EQ(y.at(i), 0.0) << i;
    else
      EXPECT_DOUBLE_EQ(y.at(i), x.at(i) / (1 - p)) << i;
  }
}

TEST(Dropout, SameSeedSameMaskDifferentSeedDifferentMask) {
  const Tensor x = Tensor::full({kN}, 1.0);
  const std::vector<double> a = ops::dropout(x, 0.3, 7).to_vector(), b = ops::dropout(x, 0.3, 7).to_vector();
  const std::vector<double> c = ops::dropout(x, 0.3, 8).to_vector();
  EXPECT_EQ(a, b);
  int64_t differ = 0;
  for (int64_t i = 0; i < kN; ++i) differ += (a[i] == 0) != (c[i] == 0);
  // Two independent masks disagree with probability 2 p (1 - p) = 0.42 per element.
  EXPECT_NEAR(static_cast<double>(differ) / kN, 0.42, 0.01);
}

TEST(Dropout, BackwardAppliesTheSameMask) {
  Rng rng(2);
  Tensor x = randn({3, 1000}, rng).set_requires_grad();
  const Tensor y = ops::dropout(x, 0.25, 31);
  const Tensor dy = randn({3, 1000}, rng);
  tape().backward(y, dy);
  const Tensor dx = x.grad();
  int64_t dropped = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool kept = y.at(i) != 0.0;
    dropped += !kept;
    EXPECT_EQ(dx.at(i), kept ? static_cast<float>(dy.at(i) * static_cast<float>(1 / 0.75)) : 0.0) << i;
  }
  EXPECT_GT(dropped, 600);  // ~750 expected: the mask is not trivial
}

TEST(Dropout, ZeroProbabilityIsTheIdentityWithoutANode) {
  Tensor x = Tensor::full({4}, 2.0).set_requires_grad();
  const size_t nodes = tape().size();
  const Tensor y = ops::dropout(x, 0.0, 1);
  EXPECT_TRUE(y.same(x));
  EXPECT_EQ(tape().size(), nodes);
}

TEST(Dropout, GradcheckCaseDropsSomething) {
  for (const OpCase& c : op_cases()) {
    if (c.name != "dropout") continue;
    Rng rng(c.options.seed);
    const Tensor y = c.forward(c.make_inputs(rng));
    int64_t zeros = 0;
    for (int64_t i = 0; i < y.numel(); ++i) zeros += y.at(i) == 0.0;
    EXPECT_GT(zeros, 0);
    EXPECT_LT(zeros, y.numel());
    tape().clear();
    return;
  }
  FAIL() << "no op case named dropout";
}

TEST(Dropout, RejectsProbabilitiesOutsideZeroToOne) {
  const Tensor x = Tensor::zeros({2, 3});
  for (double p : {-0.1, 1.0, 1.5, std::nan("")}) {
    SCOPED_TRACE(::testing::Message() << "p = " << p);
    const std::string message = testing::error_message([&] { ops::dropout(x, p, 1); });
    EXPECT_NE(message.find("dropout: probability p must be in [0, 1), got "), std::string::npos) << message;
    EXPECT_NE(message.find("(2, 3) f32"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace tf
