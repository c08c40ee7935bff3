// Philox4x32-10 against the known-answer vectors published with Random123 (Salmon et al. 2011,
// the reference implementation's tests/kat_vectors): counter words c0..c3 and key words k0, k1,
// low words first, as philox4x32 packs them from its 64-bit arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "framework/random.h"

namespace tf {
namespace {

struct KnownAnswer {
  uint32_t counter[4], key[2], words[4];
};

uint64_t pack(uint32_t low, uint32_t high) { return static_cast<uint64_t>(high) << 32 | low; }

TEST(Philox, MatchesRandom123sKnownAnswers) {
  const KnownAnswer answers[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},  // the digits of pi
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const KnownAnswer& a : answers) {
    const PhiloxWords w = philox4x32(pack(a.key[0], a.key[1]), pack(a.counter[2], a.counter[3]),
                                     pack(a.counter[0], a.counter[1]));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(w.word[i], a.words[i]) << "word " << i << " of key " << a.key[0];
  }
}

// A uniform on [0, 1) has mean 1/2 and variance 1/12; over n draws the sample mean's standard error
// is sqrt(1 / 12n), 0.0009 for n = 100,000, and the test allows 5 of them.
TEST(Philox, UniformAtHasTheUnitIntervalsMeanAndVariance) {
  constexpr int n = 100000;
  double sum = 0, sum_sq = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double u = uniform_at(7, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
  }
  const double mean = sum / n, variance = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / (12.0 * n)));
  EXPECT_NEAR(variance, 1.0 / 12, 0.002);
}

}  // namespace
}  // namespace tf
