// rope: hand-computed values, the rotation's invariants (pair norms, relative-position scores,
// identity at position 0), offsets, linear position scaling, float against double, errors; rope_heads
// against rope on the split heads.
#include "framework/ops/rope.h"

#include <gtest/gtest.h>

#include <cmath>

#include "framework/autograd/tape.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/heads.h"
#include "framework/ops/reduce.h"
#include "framework/random.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

using ops::rope;
using ops::RopeOptions;
using testing::all_close;

TEST(Rope, HandComputedValueForD2) {
  // D = 2: one pair, frequency theta^0 = 1, so row t is rotated by t radians.
  const Tensor x = Tensor::from_vector({1, 0, 1, 0, 0.5, 2}, {1, 1, 3, 2}, DType::f64);
  const Tensor y = rope(x);
  const Tensor expected = Tensor::from_vector(
      {1, 0,                                                       // position 0: identity
       std::cos(1.0), std::sin(1.0),                               // (1, 0) rotated by 1 rad
       0.5 * std::cos(2.0) - 2 * std::sin(2.0), 0.5 * std::sin(2.0) + 2 * std::cos(2.0)},
      {1, 1, 3, 2}, DType::f64);
  EXPECT_TRUE(all_close(y, expected, 1e-15, 1e-15));
}

TEST(Rope, HandComputedValueForD4UsesInterleavedPairs) {
  // D = 4, theta = 100: pair (0, 1) turns at frequency 1, pair (2, 3) at 100^(-2/4) = 0.1.
  const Tensor x = Tensor::from_vector({0, 0, 0, 0, 1, 2, 3, 4}, {2, 4}, DType::f64);
  const Tensor y = rope(x, {.theta = 100.0});
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.1), s2 = std::sin(0.1);
  const Tensor expected = Tensor::from_vector(
      {0, 0, 0, 0, 1 * c1 - 2 * s1, 1 * s1 + 2 * c1, 3 * c2 - 4 * s2, 3 * s2 + 4 * c2}, {2, 4}, DType::f64);
  EXPECT_TRUE(all_close(y, expected, 1e-15, 1e-15));
}

TEST(Rope, PositionZeroIsTheIdentity) {
  Rng rng(1);
  const Tensor x = randn({2, 3, 1, 8}, rng, 1.0, DType::f64);  // T = 1: every row at position 0
  EXPECT_TRUE(all_close(rope(x), x, 0, 0));
}

TEST(Rope, PreservesTheNormOfEveryPair) {
  Rng rng(2);
  const Tensor x = randn({2, 2, 9, 10}, rng, 1.0, DType::f64);
  const std::vector<double> a = x.to_vector(), b = rope(x, {.position_offset = 1000}).to_vector();
  for (size_t e = 0; e < a.size(); e += 2)
    EXPECT_NEAR(std::hypot(b[e], b[e + 1]), std::hypot(a[e], a[e + 1]), 1e-14) << "pair at " << e;
  EXPECT_NE(a[2], b[2]);  // and it does rotate
}

// <rope(q at m), rope(k at n)> for one query and one key vector (RoFormer eq. 16).
double rotated_score(const Tensor& q, const Tensor& k, int64_t m, int64_t n, double position_scale = 1.0) {
  const Tensor qm = rope(q, {.position_offset = m, .position_scale = position_scale});
  const Tensor kn = rope(k, {.position_offset = n, .position_scale = position_scale});
  double dot = 0;
  for (int64_t c = 0; c < q.numel(); ++c) dot += qm.at(c) * kn.at(c);
  return dot;
}

TEST(Rope, ScoresDependOnlyOnRelativePosition) {
  Rng rng(3);
  const Tensor q = randn({1, 1, 1, 16}, rng, 1.0, DType::f64), k = randn({1, 1, 1, 16}, rng, 1.0, DType::f64);
  for (int64_t m : {0, 3, 17}) {
    for (int64_t n : {0, 5, 17}) {
      const double base = rotated_score(q, k, m, n);
      // Angles up to ~120 rad carry double rounding ~1e-14 rad, hence 1e-12 on scores of size ~4.
      for (int64_t shift : {1, 7, 100})
        EXPECT_NEAR(rotated_score(q, k, m + shift, n + shift), base, 1e-12) << m << " " << n << " +" << shift;
    }
  }
  EXPECT_GT(std::abs(rotated_score(q, k, 0, 5) - rotated_score(q, k, 0, 6)), 1e-3);  // the offset matters
  // Linear position interpolation keeps the property: positions are all scaled alike.
  EXPECT_NEAR(rotated_score(q, k, 9, 4, 0.25), rotated_score(q, k, 15, 10, 0.25), 1e-12);
}

TEST(Rope, PositionScaleEqualsScaledPositions) {
  // position_scale 0.5 at positions 0, 1, 2, 3 rotates like positions 0, 0.5, 1, 1.5; rows 0 and 2
  // of the scaled result equal rows 0 and 1 of the unscaled one.
  Rng rng(4);
  const Tensor row = randn({1, 6}, rng, 1.0, DType::f64);
  std::vector<double> rows;
  for (int t = 0; t < 4; ++t)
    for (double v : row.to_vector()) rows.push_back(v);
  const Tensor x = Tensor::from_vector(rows, {4, 6}, DType::f64);
  const std::vector<double> scaled = rope(x, {.position_scale = 0.5}).to_vector(), plain = rope(x).to_vector();
  for (int c = 0; c < 6; ++c) {
    EXPECT_NEAR(scaled[2 * 6 + c], plain[1 * 6 + c], 1e-15);
    EXPECT_NEAR(scaled[0 * 6 + c], plain[0 * 6 + c], 0);
  }
}

TEST(Rope, OffsetRowsMatchTheSameRowsOfALongerSequence) {
  // Decoding: the row at position 7 computed alone (offset 7, T = 1) equals row 7 of the full pass.
  Rng rng(5);
  const Tensor full = randn({2, 10, 8}, rng, 1.0, DType::f64);
  const std::vector<double> all = rope(full).to_vector(), f = full.to_vector();
  for (int64_t b = 0; b < 2; ++b) {
    std::vector<double> one(f.begin() + (b * 10 + 7) * 8, f.begin() + (b * 10 + 8) * 8);
    const std::vector<double> y = rope(Tensor::from_vector(one, {1, 8}, DType::f64), {.position_offset = 7}).to_vector();
    for (int c = 0; c < 8; ++c) EXPECT_EQ(y[c], all[(b * 10 + 7) * 8 + c]);  // same table entries
  }
}

TEST(Rope, BackwardIsTheInverseRotation) {
  Rng rng(6);
  Tensor x = randn({1, 2, 5, 6}, rng, 1.0, DType::f64).set_requires_grad();
  const Tensor dy = randn({1, 2, 5, 6}, rng, 1.0, DType::f64);
  const Tensor y = rope(x, {.position_offset = 3});
  tape().backward(y, dy);
  // R orthogonal: rotating the gradient forward again must give back dy.
  EXPECT_TRUE(all_close(rope(x.grad().detach(), {.position_offset = 3}), dy, 1e-14, 1e-14));
}

TEST(Rope, FloatMatchesDouble) {
  Rng rng(7);
  const Tensor x = randn({2, 3, 130, 64}, rng, 1.0, DType::f64);
  // Tables are built in double and rounded once, so float32 results carry a few ulps (~1e-7) per
  // element of size ~1: 1e-6 absolute.
  EXPECT_TRUE(all_close(rope(x.to(DType::f32), {.position_offset = 5000}), rope(x, {.position_offset = 5000}),
                        1e-6, 1e-6));
}

// rope_heads on the fused (B, T, (H + 2G) D) rows: the queries and keys exactly as rope rotates them
// after split_heads, the values untouched, bit for bit; and its gradient the same as through
// split_heads + rope (odd sizes: T = 17, D = 6, H = 3, G = 1; an offset; float32).
TEST(Rope, RopeHeadsMatchesRopeOnTheSplitHeadsBitForBit) {
  Rng rng(8);
  const int64_t B = 2, T = 17, H = 3, G = 1, D = 6;
  Tensor x = randn({B, T, (H + 2 * G) * D}, rng).set_requires_grad();
  const RopeOptions o{.theta = 500.0, .position_offset = 4};
  std::vector<Tensor> weights;
  for (const Shape& s : {Shape{B, H, T, D}, Shape{B, G, T, D}, Shape{B, G, T, D}}) weights.push_back(randn(s, rng));
  // Values of the three groups and the gradient of sum_g w_g * group_g, one way or the other.
  auto run = [&](bool fused) {
    std::vector<Tensor> groups;
    if (fused) {
      for (const Tensor& t : ops::split_heads(ops::rope_heads(x, H + G, D, o), {H, G, G}, D)) groups.push_back(t);
    } else {
      const auto plain = ops::split_heads(x, {H, G, G}, D);
      groups = {rope(plain[0], o), rope(plain[1], o), plain[2]};
    }
    std::vector<std::vector<double>> out;
    Tensor loss = Tensor::full({}, 0.0);
    for (int g = 0; g < 3; ++g) {
      out.push_back(groups[g].to_vector());
      loss = ops::add(loss, ops::sum(ops::mul(groups[g], weights[g])));
    }
    backward(loss);
    out.push_back(x.grad().to_vector());
    x.zero_grad();
    return out;
  };
  const auto fused = run(true), split = run(false);
  const char* names[] = {"queries", "keys", "values", "gradient"};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(fused[i], split[i]) << names[i];
}

TEST(Rope, RejectsOddHeadSizeAndBadOptions) {
  const Tensor x = Tensor::zeros({1, 1, 3, 5});
  testing::expect_error([&] { rope(x); }, "D = 5");  // odd D
  const Tensor even = Tensor::zeros({1, 1, 3, 4});
  EXPECT_THROW(rope(even, {.theta = 0}), Error);
  EXPECT_THROW(rope(even, {.position_offset = -1}), Error);
  EXPECT_THROW(rope(even, {.position_scale = 0}), Error);
  EXPECT_THROW(rope(Tensor::zeros({4})), Error);
  testing::expect_error([] { ops::rope_heads(Tensor::zeros({1, 3, 12}), 3, 5); },
                        "rope_heads: expected (B, T, W) with 3 heads of an even size D = 5 within W, got (1, 3, 12) f32");
  testing::expect_error([] { ops::rope_heads(Tensor::zeros({1, 3, 12}), 4, 4); }, "4 heads of an even size D = 4");
}

}  // namespace
}  // namespace tf
