// Position encodings: the sinusoidal table against its closed form at hand-picked entries, the
// window AbsolutePosition adds at an offset, and the learned table's rows.
#include "layers/positional.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/compare.h"

namespace tf::layers {
namespace {

// PE(pos, 2i) = sin(pos / 10000^(2i / C)), PE(pos, 2i + 1) = cos(pos / 10000^(2i / C))
// (Vaswani et al. 2017, section 3.5), each entry written out by hand for C = 16.
TEST(Sinusoidal, TableEqualsTheClosedForm) {
  const Tensor table = sinusoidal_table(64, 16, DType::f64);  // (max_len, C)
  ASSERT_EQ(table.shape(), (Shape{64, 16}));
  auto pe = [&](int64_t pos, int64_t dim) { return table.at(pos * 16 + dim); };
  EXPECT_EQ(pe(0, 0), 0.0);                                   // sin 0
  EXPECT_EQ(pe(0, 1), 1.0);                                   // cos 0
  EXPECT_EQ(pe(0, 15), 1.0);
  EXPECT_NEAR(pe(1, 0), std::sin(1.0), 1e-15);                // i = 0: wavelength 2 pi
  EXPECT_NEAR(pe(1, 1), std::cos(1.0), 1e-15);
  EXPECT_NEAR(pe(5, 2), std::sin(5.0 / std::pow(10000.0, 2.0 / 16)), 1e-15);   // i = 1
  EXPECT_NEAR(pe(5, 3), std::cos(5.0 / std::pow(10000.0, 2.0 / 16)), 1e-15);
  EXPECT_NEAR(pe(37, 8), std::sin(37.0 / 100.0), 1e-15);      // i = 4: 10000^(8/16) = 100
  EXPECT_NEAR(pe(37, 9), std::cos(37.0 / 100.0), 1e-15);
  EXPECT_NEAR(pe(63, 14), std::sin(63.0 / std::pow(10000.0, 14.0 / 16)), 1e-15);  // i = 7, slowest
  EXPECT_NEAR(pe(63, 15), std::cos(63.0 / std::pow(10000.0, 14.0 / 16)), 1e-15);
  // float32 table: the same values rounded once.
  const Tensor f32 = sinusoidal_table(64, 16, DType::f32);
  EXPECT_EQ(f32.at(37 * 16 + 9), static_cast<double>(static_cast<float>(std::cos(0.37))));
}

TEST(Sinusoidal, OddDimensionEndsWithASine) {
  const Tensor table = sinusoidal_table(8, 5, DType::f64);
  EXPECT_NEAR(table.at(3 * 5 + 4), std::sin(3.0 / std::pow(10000.0, 4.0 / 5)), 1e-15);
}

TEST(AbsolutePosition, SinusoidalAddsTheWindowAtTheOffset) {
  Init init{Rng(1), DType::f64};
  const AbsolutePosition position({PositionEncoding::sinusoidal, 32, 6}, init);
  ParamList params;
  position.parameters(params, "position_embedding.");
  EXPECT_TRUE(params.empty());  // a fixed table, not a parameter
  Rng rng(2);
  const Tensor x = randn({2, 3, 6}, rng, 1.0, DType::f64);
  const Tensor y = position.add_to(x, 10);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t c = 0; c < 6; ++c) {
        const double angle = (10 + t) / std::pow(10000.0, 2.0 * (c / 2) / 6);
        const double pe = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
        EXPECT_NEAR(y.at((b * 3 + t) * 6 + c), x.at((b * 3 + t) * 6 + c) + pe, 1e-14);
      }
  EXPECT_THROW(position.add_to(x, 30), InputError);  // positions 30..32 exceed max_seq_len 32
}

TEST(AbsolutePosition, LearnedAddsTableRowsAndNoneAddsNothing) {
  Init init{Rng(1), DType::f64};
  const AbsolutePosition learned({PositionEncoding::learned, 8, 4}, init);
  ParamList params;
  learned.parameters(params, "position_embedding.");
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params[0].name, "position_embedding.weight");
  const Tensor x = Tensor::zeros({1, 2, 4}, DType::f64);
  const Tensor y = learned.add_to(x, 5);  // rows 5 and 6 of the table
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(y.at(i), learned.learned.weight.at(5 * 4 + i));
  for (auto kind : {PositionEncoding::none, PositionEncoding::rope, PositionEncoding::alibi}) {
    const AbsolutePosition nothing({kind, 8, 4}, init);
    EXPECT_TRUE(nothing.add_to(x).same(x));
  }
}

TEST(PositionEncodingNames, RoundTripAndRejectUnknown) {
  for (auto p : kPositionEncodings) EXPECT_EQ(parse_position_encoding(position_encoding_name(p)), p);
  EXPECT_THROW(parse_position_encoding("absolute"), InputError);
}

}  // namespace
}  // namespace tf::layers
