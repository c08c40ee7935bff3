// masked_fill and causal_mask: hand-checked masks, fills with broadcasting and -inf, gradients cut
// at filled positions, and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "framework/autograd/tape.h"
#include "framework/ops/mask.h"
#include "support/errors.h"

namespace tf {
namespace {

TEST(CausalMask, SquareMasksTheFuture) {
  EXPECT_EQ(ops::causal_mask(3, 3).to_vector(), (std::vector<double>{0, 1, 1,  //
                                                                     0, 0, 1,  //
                                                                     0, 0, 0}));
  EXPECT_EQ(ops::causal_mask(3, 3).shape(), (Shape{3, 3}));
  EXPECT_EQ(ops::causal_mask(3, 3, DType::f64).dtype(), DType::f64);
}

TEST(CausalMask, FewerQueriesThanKeysAreTheLastPositions) {
  // Two queries at key positions 2 and 3 of four: query 0 sees keys 0..2, query 1 sees all.
  EXPECT_EQ(ops::causal_mask(2, 4).to_vector(), (std::vector<double>{0, 0, 0, 1,  //
                                                                     0, 0, 0, 0}));
  EXPECT_EQ(ops::causal_mask(1, 5).to_vector(), (std::vector<double>{0, 0, 0, 0, 0}));  // decoding one token
  EXPECT_EQ(ops::causal_mask(0, 3).shape(), (Shape{0, 3}));
}

TEST(CausalMask, RejectsMoreQueriesThanKeys) {
  const std::string message = testing::error_message([] { ops::causal_mask(4, 2); });
  EXPECT_NE(message.find("causal_mask: need 0 <= t_q <= t_k"), std::string::npos) << message;
  EXPECT_NE(message.find("got t_q 4, t_k 2"), std::string::npos) << message;
  EXPECT_THROW(ops::causal_mask(-1, 2), Error);
  EXPECT_THROW(ops::causal_mask(2, 2, DType::i32), Error);
}

TEST(MaskedFill, BroadcastsTheMaskAndFillsWithMinusInfinity) {
  // (2, 2, 3) scores, causal-style mask (2, 3) shared by both batch entries.
  const Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3});
  const Tensor mask = Tensor::from_vector({0, 1, 1, 0, 0, 1}, {2, 3});
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor y = ops::masked_fill(x, mask, -inf);
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_EQ(y.to_vector(), (std::vector<double>{1, -inf, -inf, 4, 5, -inf, 7, -inf, -inf, 10, 11, -inf}));
  // Any nonzero mask value fills, including negative and fractional ones.
  const Tensor odd = Tensor::from_vector({-2, 0.5, 0}, {3});
  EXPECT_EQ(ops::masked_fill(Tensor::from_vector({1, 2, 3}, {3}), odd, 9).to_vector(), (std::vector<double>{9, 9, 3}));
}

TEST(MaskedFill, GradientIsZeroAtFilledPositions) {
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64).set_requires_grad();
  const Tensor mask = Tensor::from_vector({1, 0, 0}, {3}, DType::f64);  // column 0 filled in both rows
  const Tensor y = ops::masked_fill(x, mask, 0.5);
  tape().backward(y, Tensor::from_vector({10, 20, 30, 40, 50, 60}, {2, 3}, DType::f64));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{0, 20, 30, 0, 50, 60}));
}

TEST(MaskedFill, ErrorsNameTheShapes) {
  const Tensor x = Tensor::zeros({2, 3});
  EXPECT_EQ(testing::error_message([&] { ops::masked_fill(x, Tensor::zeros({4, 2, 3}), 0); }),
            "masked_fill: mask (4, 2, 3) f32 would broadcast x (2, 3) f32 to a larger shape");
  const std::string message = testing::error_message([&] { ops::masked_fill(x, Tensor::zeros({2}), 0); });
  EXPECT_NE(message.find("(2, 3)"), std::string::npos) << message;  // broadcast_shapes' message
  EXPECT_NE(message.find("(2,)"), std::string::npos) << message;
  EXPECT_EQ(testing::error_message([&] { ops::masked_fill(x, Tensor::zeros({3}, DType::f64), 0); }),
            "masked_fill: mask (3,) f64 must have the dtype of x (2, 3) f32");
}

}  // namespace
}  // namespace tf
