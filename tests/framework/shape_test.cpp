// reshape, transpose, permute, concat and split: hand-computed values, the fast permute against
// the reference on odd shapes, split's backward with unused outputs, and the error messages.
#include <gtest/gtest.h>

#include <numeric>

#include "framework/autograd/tape.h"
#include "framework/random.h"
#include "framework/kernels/mode.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"
#include "framework/ops/shape.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

Tensor arange(const Shape& shape, DType dtype = DType::f32) {
  std::vector<double> values(shape.numel());
  std::iota(values.begin(), values.end(), 0.0);
  return Tensor::from_vector(values, shape, dtype);
}

using testing::expect_error;

TEST(Reshape, IsAViewAndInfersMinusOne) {
  const Tensor x = arange({2, 6});
  const Tensor y = ops::reshape(x, {3, -1});
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  y.data<float>()[5] = 42.0f;  // same storage: visible through x
  EXPECT_EQ(x.at(5), 42.0);
  EXPECT_EQ(ops::reshape(x, {-1}).shape(), Shape{12});
  EXPECT_EQ(ops::reshape(x, Shape{2, 2, 3}).shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(ops::reshape(Tensor::zeros({0, 4}), {-1, 2}).shape(), (Shape{0, 2}));
}

TEST(Reshape, GradientHasTheInputShape) {
  Tensor x = arange({2, 3}, DType::f64).set_requires_grad();
  const Tensor w = arange({3, 2}, DType::f64);
  backward(ops::sum(ops::mul(ops::reshape(x, {3, 2}), w)));
  EXPECT_EQ(x.grad().shape(), (Shape{2, 3}));
  EXPECT_EQ(x.grad().to_vector(), w.to_vector());
}

TEST(Reshape, Errors) {
  const Tensor x = arange({2, 3});
  expect_error([&] { ops::reshape(x, {4, 2}); }, "reshape: cannot reshape (2, 3) f32 (6 elements) to (4, 2) (8 elements)");
  expect_error([&] { ops::reshape(x, {-1, -1}); }, "reshape: more than one -1 in (-1, -1)");
  expect_error([&] { ops::reshape(x, {4, -1}); }, "reshape: cannot infer the -1 in (4, -1)");
  expect_error([&] { ops::reshape(x, {-2, 3}); }, "reshape: negative dimension -2");
}

TEST(Transpose, HandValues) {
  // [[0, 1, 2], [3, 4, 5]]^T = [[0, 3], [1, 4], [2, 5]]
  const Tensor t = ops::transpose(arange({2, 3}), 0, 1);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.to_vector(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(ops::transpose(arange({2, 3}), -1, -2).to_vector(), t.to_vector());
  // (B, T, H, D) = (1, 2, 2, 2) -> (B, H, T, D): element [b, t, h, d] = 4 t + 2 h + d moves to [b, h, t, d].
  EXPECT_EQ(ops::transpose(arange({1, 2, 2, 2}), 1, 2).to_vector(), (std::vector<double>{0, 1, 4, 5, 2, 3, 6, 7}));
}

TEST(Permute, HandValuesAndTokenIds) {
  // x[i, j, k] = 6 i + 3 j + k over (2, 2, 3); order (2, 0, 1): out[k, i, j] = x[i, j, k].
  const Tensor p = ops::permute(arange({2, 2, 3}), {2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(p.to_vector(), (std::vector<double>{0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}));
  const Tensor ids = Tensor::from_ids({0, 1, 2, 3, 4, 5}, {2, 3});
  const Tensor idst = ops::permute(ids, {1, 0});
  EXPECT_EQ(idst.dtype(), DType::i32);
  EXPECT_EQ(idst.to_vector(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(Permute, FastMatchesReferenceOnOddShapes) {
  // Pure data movement: the fast kernel must agree bit for bit.
  Rng rng(3);
  const std::vector<Shape> shapes = {{1, 3, 17, 63}, {3, 17, 1, 5}, {2, 130, 3, 7}, {63, 1, 1, 1}, {17, 3, 130, 1}};
  const std::vector<std::vector<int>> orders = {{0, 2, 1, 3}, {0, 1, 3, 2}, {3, 2, 1, 0}, {1, 0, 2, 3},
                                                {2, 0, 3, 1}, {0, 1, 2, 3}};
  for (const Shape& shape : shapes) {
    const Tensor x = randn(shape, rng);
    for (const auto& order : orders) {
      Shape out_shape;
      for (int a : order) out_shape.push_back(shape[a]);
      Tensor fast = Tensor::empty(out_shape), reference = Tensor::empty(out_shape);
      ops::permute_fast<float>(shape, order, x.data<float>(), fast.data<float>());
      ops::permute_reference<float>(shape, order, x.data<float>(), reference.data<float>());
      EXPECT_EQ(fast.to_vector(), reference.to_vector()) << shape << " order " << order[0] << order[1] << order[2]
                                                         << order[3];
      // And through the op, with and without the guard.
      Tensor via_op = ops::permute(x, order), via_reference;
      {
        kernels::ReferenceKernelsGuard guard;
        via_reference = ops::permute(x, order);
      }
      EXPECT_EQ(via_op.to_vector(), via_reference.to_vector());
    }
  }
  // Large enough to take the OpenMP path: (B, T, H, D) = (4, 130, 6, 17) -> (B, H, T, D).
  const Tensor big = randn({4, 130, 6, 17}, rng);
  Tensor fast = Tensor::empty({4, 6, 130, 17}), reference = Tensor::empty({4, 6, 130, 17});
  ops::permute_fast<float>(big.shape(), {0, 2, 1, 3}, big.data<float>(), fast.data<float>());
  ops::permute_reference<float>(big.shape(), {0, 2, 1, 3}, big.data<float>(), reference.data<float>());
  EXPECT_EQ(fast.to_vector(), reference.to_vector());
}

TEST(Permute, RoundTripIsIdentity) {
  const Tensor x = arange({2, 3, 4, 5});
  EXPECT_EQ(ops::permute(ops::permute(x, {3, 1, 0, 2}), {2, 1, 3, 0}).to_vector(), x.to_vector());
}

TEST(Permute, Errors) {
  const Tensor x = arange({2, 3, 4});
  expect_error([&] { ops::permute(x, {0, 1}); }, "permute: order (0, 1) has 2 axes but the input has shape (2, 3, 4)");
  expect_error([&] { ops::permute(x, {0, 1, 1}); }, "permute: axis 1 appears twice in order (0, 1, 1)");
  expect_error([&] { ops::permute(x, {0, 1, 3}); }, "permute: axis 3 in order (0, 1, 3) out of range for shape (2, 3, 4)");
  expect_error([&] { ops::transpose(x, 0, 3); }, "transpose: axis 3 out of range for shape (2, 3, 4)");
}

TEST(Concat, HandValues) {
  const Tensor a = Tensor::from_vector({1, 2, 3, 4}, {2, 2}), b = Tensor::from_vector({5, 6}, {2, 1});
  const Tensor c = ops::concat({a, b}, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.to_vector(), (std::vector<double>{1, 2, 5, 3, 4, 6}));
  const Tensor d = ops::concat({a, Tensor::from_vector({7, 8}, {1, 2})}, -2);
  EXPECT_EQ(d.to_vector(), (std::vector<double>{1, 2, 3, 4, 7, 8}));
  EXPECT_EQ(ops::concat({a, Tensor::zeros({2, 0})}, 1).to_vector(), a.to_vector());
}

TEST(Concat, GradientsAreTheSlices) {
  Tensor a = arange({2, 2}, DType::f64).set_requires_grad(), b = arange({2, 1}, DType::f64).set_requires_grad();
  const Tensor w = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  tape().backward(ops::concat({a, b}, 1), w);
  EXPECT_EQ(a.grad().to_vector(), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(b.grad().to_vector(), (std::vector<double>{3, 6}));
}

TEST(Concat, Errors) {
  const Tensor a = arange({2, 3});
  expect_error([&] { ops::concat({a, arange({3, 4})}, 0); },
               "concat: tensor 1 has shape (3, 4) but tensor 0 has shape (2, 3); all dimensions except axis 0 must agree");
  expect_error([&] { ops::concat({a, arange({2, 3, 1})}, 1); }, "concat: tensor 1 has shape (2, 3, 1)");
  expect_error([&] { ops::concat({a, arange({2, 3}, DType::f64)}, 0); }, "dtypes must agree");
  expect_error([&] { ops::concat({a}, 2); }, "concat: axis 2 out of range for shape (2, 3)");
  expect_error([] { ops::concat({}, 0); }, "concat: no tensors given");
}

TEST(Split, HandValues) {
  const auto parts = ops::split(arange({2, 5}), {2, 0, 3}, -1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].to_vector(), (std::vector<double>{0, 1, 5, 6}));
  EXPECT_EQ(parts[1].shape(), (Shape{2, 0}));
  EXPECT_EQ(parts[2].to_vector(), (std::vector<double>{2, 3, 4, 7, 8, 9}));
}

TEST(Split, UnusedOutputsGetZeroGradient) {
  Tensor x = arange({2, 5}, DType::f64).set_requires_grad();
  const auto parts = ops::split(x, {1, 3, 1}, 1);
  backward(ops::sum(ops::scale(parts[1], 2.0)));  // parts[0] and parts[2] never reach the loss
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{0, 2, 2, 2, 0, 0, 2, 2, 2, 0}));
}

TEST(Split, Errors) {
  const Tensor x = arange({2, 5});
  expect_error([&] { ops::split(x, {2, 2}, 1); }, "split: sizes (2, 2) add up to 4 but axis 1 of (2, 5) f32 has 5");
  expect_error([&] { ops::split(x, {6, -1}, 1); }, "split: negative size -1 in (6, -1)");
  expect_error([&] { ops::split(x, {5}, -3); }, "split: axis -3 out of range for shape (2, 5)");
}

}  // namespace
}  // namespace tf
