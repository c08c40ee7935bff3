// bfloat16 matmuls (train.matmul_precision: bf16; Note [bfloat16 matmuls] in kernels/onednn.cpp):
// the rounding against hand-computed bit patterns, and the fast matmuls under Bf16MatmulScope
// against the float64 product of the rounded operands on odd sizes. On a CPU without bf16 in
// hardware the same numbers come from the float32 primitive, so every check holds on any CPU.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "framework/kernels/bf16.h"
#include "framework/kernels/matmul.h"
#include "framework/kernels/mode.h"
#include "framework/random.h"

namespace tf {
namespace {

using kernels::MatmulDims;
using kernels::to_bf16;

uint16_t bf16_of_bits(uint32_t bits) { return to_bf16(std::bit_cast<float>(bits)); }

TEST(Bf16Rounding, RoundsToNearestTiesToEven) {
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(to_bf16(-0.0f), 0x8000);
  // 1 + 2^-8 lies halfway between 1 (0x3f80) and 1 + 2^-7 (0x3f81): to the even one, 1.
  EXPECT_EQ(bf16_of_bits(0x3f808000), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 0x3f81 and 0x3f82: to the even one, up.
  EXPECT_EQ(bf16_of_bits(0x3f818000), 0x3f82);
  // Just above and below the halfway point.
  EXPECT_EQ(bf16_of_bits(0x3f808001), 0x3f81);
  EXPECT_EQ(bf16_of_bits(0x3f807fff), 0x3f80);
  // A carry into the exponent: the largest float below 2 rounds to 2.
  EXPECT_EQ(bf16_of_bits(0x3fffffff), 0x4000);
  // The largest float is above the largest bfloat16 (0x7f7f) by more than half its ulp: infinity.
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  // Subnormal floats become zeros of their sign (as vcvtneps2bf16 does); a NaN whose payload is all
  // in the low bits stays NaN.
  EXPECT_EQ(bf16_of_bits(0x00000001), 0x0000);
  EXPECT_EQ(bf16_of_bits(0x00400000), 0x0000);
  EXPECT_EQ(bf16_of_bits(0x807fffff), 0x8000);
  EXPECT_EQ(bf16_of_bits(0x00800000), 0x0080);  // the smallest normal float stays
  EXPECT_TRUE(std::isnan(kernels::from_bf16(bf16_of_bits(0x7f800001))));
  EXPECT_TRUE(std::isnan(kernels::from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(kernels::from_bf16(0x3f81), 1.0f + 0x1.0p-7f);
}

TEST(Bf16Rounding, ArraysRoundEveryElementAsOne) {
  Rng rng(5);
  for (int64_t n : {1, 3, 17, 63, 70001}) {  // the last is above the size that rounds on every thread
    std::vector<float> x(n), as_float(n);
    std::vector<uint16_t> as_bf16(n);
    for (float& v : x) v = static_cast<float>(rng.normal() * 100.0);
    // The special values, in every position of a 32-wide block along the array.
    const uint32_t special[] = {0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0x00400000, 0x80000001,
                                0x3f808000, 0x3f818000, 0x7f7fffff, 0x00800000};
    for (int64_t i = 0; i < n; i += 7) x[i] = std::bit_cast<float>(special[(i / 7) % 10]);
    kernels::round_to_bf16(x.data(), as_bf16.data(), n);
    kernels::round_to_bf16(x.data(), as_float.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(as_bf16[i], to_bf16(x[i])) << "n " << n << ", element " << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(as_float[i]), std::bit_cast<uint32_t>(kernels::from_bf16(to_bf16(x[i]))))
          << "n " << n << ", element " << i;
    }
  }
}

std::vector<float> random_floats(int64_t n, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(2.0 * rng.uniform() - 1.0);
  return v;
}

std::vector<double> rounded(const std::vector<float>& v, bool to_bfloat16) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to_bfloat16 ? kernels::from_bf16(to_bf16(v[i])) : v[i];
  return out;
}

struct Bf16Case {
  bool trans_a, trans_b, b_broadcast, accumulate, deterministic;
  int64_t batch;
};

std::string describe(const MatmulDims& d) {
  return "batch " + std::to_string(d.batch) + ", m " + std::to_string(d.m) + ", n " + std::to_string(d.n) + ", k " +
         std::to_string(d.k);
}

class Bf16Matmul : public ::testing::TestWithParam<Bf16Case> {};

// The product, bias and C0 are float32: against the float64 product of the rounded operands the
// error bound is the float32 one of matmul_kernel_test ((k + 2) eps |C0| + |bias| + sum |a||b|).
// Against the unrounded operands the result must be off by more than that somewhere: the
// operands really were rounded.
TEST_P(Bf16Matmul, IsTheFloat32ProductOfTheRoundedOperands) {
  const Bf16Case p = GetParam();
  const kernels::DeterministicScope deterministic(p.deterministic);
  Rng rng(23);
  for (int64_t m : {1, 3, 17, 63}) {
    for (int64_t n : {1, 3, 17, 130}) {
      for (int64_t k : {1, 3, 17, 63}) {
        const MatmulDims d{p.batch, m, n, k, p.trans_a, p.trans_b, p.b_broadcast, p.accumulate};
        const int64_t na = d.batch * m * k, nb = (d.b_broadcast ? 1 : d.batch) * k * n, nc = d.batch * m * n;
        const std::vector<float> a = random_floats(na, rng), b = random_floats(nb, rng), c0 = random_floats(nc, rng),
                                 bias = random_floats(n, rng);
        std::vector<float> c = c0;
        {
          const kernels::Bf16MatmulScope bf16(true);
          kernels::matmul_fast(d, a.data(), b.data(), c.data(), bias.data());
        }
        std::vector<double> truth(nc), unrounded(nc), magnitude(nc);
        const std::vector<double> bias64(bias.begin(), bias.end());
        kernels::matmul_reference<double>(d, rounded(a, true).data(), rounded(b, true).data(), truth.data(), bias64.data());
        kernels::matmul_reference<double>(d, rounded(a, false).data(), rounded(b, false).data(), unrounded.data(),
                                          bias64.data());
        std::vector<double> abs_a(na), abs_b(nb);
        for (int64_t i = 0; i < na; ++i) abs_a[i] = std::abs(a[i]);
        for (int64_t i = 0; i < nb; ++i) abs_b[i] = std::abs(b[i]);
        MatmulDims plain = d;
        plain.accumulate = false;
        kernels::matmul_reference<double>(plain, abs_a.data(), abs_b.data(), magnitude.data());
        double worst = 0, off_unrounded = 0;
        for (int64_t i = 0; i < nc; ++i) {
          const double c0_i = d.accumulate ? c0[i] : 0.0;
          const double tol = (k + 2) * 0x1.0p-23 * (magnitude[i] + std::abs(c0_i) + std::abs(bias[i % n]));
          worst = std::max(worst, std::abs(c[i] - (truth[i] + c0_i)) / tol);
          off_unrounded = std::max(off_unrounded, std::abs(c[i] - (unrounded[i] + c0_i)) / tol);
        }
        ASSERT_LE(worst, 1.0) << describe(d) << ": off the rounded operands' product by that many tolerances";
        ASSERT_GT(off_unrounded, 1.0) << describe(d) << ": the result is the unrounded product";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, Bf16Matmul,
                         ::testing::Values(Bf16Case{false, false, false, false, false, 1},
                                           Bf16Case{true, false, false, true, false, 3},
                                           Bf16Case{false, true, true, false, false, 3},
                                           Bf16Case{true, true, false, true, false, 1},
                                           Bf16Case{false, true, true, true, true, 3},
                                           Bf16Case{true, false, false, false, true, 1}));

// Deterministic mode promises the same bits for any thread count; with bf16 operands too.
TEST(Bf16Matmul, DeterministicGivesTheSameBitsOnOneAndTwoThreads) {
  Rng rng(31);
  const MatmulDims d{2, 130, 63, 257, false, true, true, false};
  const std::vector<float> a = random_floats(d.batch * d.m * d.k, rng), b = random_floats(d.k * d.n, rng);
  const kernels::DeterministicScope deterministic(true);
  const kernels::Bf16MatmulScope bf16(true);
  const int threads = omp_get_max_threads();
  std::vector<float> one(d.batch * d.m * d.n), two(one.size());
  omp_set_num_threads(1);
  kernels::matmul_fast(d, a.data(), b.data(), one.data());
  omp_set_num_threads(2);
  kernels::matmul_fast(d, a.data(), b.data(), two.data());
  omp_set_num_threads(threads);
  EXPECT_EQ(one, two);
}

TEST(Bf16MatmulScope, RestoresTheSettingItFound) {
  EXPECT_FALSE(kernels::bf16_matmuls());
  {
    const kernels::Bf16MatmulScope on(true);
    EXPECT_TRUE(kernels::bf16_matmuls());
    {
      const kernels::Bf16MatmulScope off(false);
      EXPECT_FALSE(kernels::bf16_matmuls());
    }
    EXPECT_TRUE(kernels::bf16_matmuls());
  }
  EXPECT_FALSE(kernels::bf16_matmuls());
}

}  // namespace
}  // namespace tf
