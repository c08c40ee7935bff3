// The gradient checker itself: it must catch wrong backward functions (off by a factor 1.001, or
// missing a term), pass correct ones, and step off kinks such as |x| at 0. The ops under test are
// defined here, with their own nodes, so their gradients can be wrong on purpose.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "framework/autograd/tape.h"
#include "framework/gradcheck.h"
#include "framework/ops/elementwise.h"

namespace tf {
namespace {

// y = x^2 elementwise, with dx = factor * 2 x dy: factor 1 is correct.
struct SquareNode : Node {
  Tensor x;
  double factor = 1.0;
  const char* op_name() const override { return "test_square"; }
  void backward() override {
    accumulate_grad(x, ops::mul(outputs[0].grad(), ops::scale(x, 2.0 * factor)));
  }
};

Tensor square(const Tensor& x, double factor) {
  Tensor out = Tensor::empty(x.shape(), DType::f64);
  for (int64_t i = 0; i < x.numel(); ++i) out.data<double>()[i] = x.data<double>()[i] * x.data<double>()[i];
  if (needs_grad(x)) {
    auto node = std::make_unique<SquareNode>();
    node->x = x;
    node->factor = factor;
    record(std::move(node), {out});
  }
  return out;
}

// y = a * b + a elementwise: da = dy (b + 1), db = dy a. With drop_term, da forgets the "+ 1".
struct MulAddNode : Node {
  Tensor a, b;
  bool drop_term = false;
  const char* op_name() const override { return "test_mul_add"; }
  void backward() override {
    const Tensor dy = outputs[0].grad();
    accumulate_grad(a, drop_term ? ops::mul(dy, b) : ops::add(ops::mul(dy, b), dy));
    accumulate_grad(b, ops::mul(dy, a));
  }
};

Tensor mul_add(const Tensor& a, const Tensor& b, bool drop_term) {
  Tensor out = Tensor::empty(a.shape(), DType::f64);
  for (int64_t i = 0; i < a.numel(); ++i)
    out.data<double>()[i] = a.data<double>()[i] * b.data<double>()[i] + a.data<double>()[i];
  if (needs_grad(a, b)) {
    auto node = std::make_unique<MulAddNode>();
    node->a = a;
    node->b = b;
    node->drop_term = drop_term;
    record(std::move(node), {out});
  }
  return out;
}

// y = |x| with dx = sign(x) dy; sign(0) = 0, a subgradient, which differs from both one-sided
// derivatives at 0, so a check at 0 would fail unless the element is moved off the kink.
struct AbsNode : Node {
  Tensor x;
  const char* op_name() const override { return "test_abs"; }
  void backward() override {
    Tensor sign = Tensor::empty(x.shape(), DType::f64);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = x.data<double>()[i];
      sign.data<double>()[i] = (v > 0) - (v < 0);
    }
    accumulate_grad(x, ops::mul(outputs[0].grad(), sign));
  }
};

Tensor abs(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::f64);
  for (int64_t i = 0; i < x.numel(); ++i) out.data<double>()[i] = std::abs(x.data<double>()[i]);
  if (needs_grad(x)) {
    auto node = std::make_unique<AbsNode>();
    node->x = x;
    record(std::move(node), {out});
  }
  return out;
}

Tensor input(std::vector<double> v, const Shape& shape) {
  return Tensor::from_vector(v, shape, DType::f64).set_requires_grad();
}

TEST(Gradcheck, PassesACorrectGradient) {
  const auto report = gradcheck([](const auto& in) { return square(in[0], 1.0); },
                                {input({0.3, -1.2, 2.0, 0.7, -0.4, 1.5}, {2, 3})}, {"x"});
  EXPECT_TRUE(report.passed()) << report.to_string();
  ASSERT_EQ(report.tensors.size(), 1u);
  EXPECT_EQ(report.tensors[0].name, "x");
  EXPECT_EQ(report.tensors[0].shifted, 0);
  EXPECT_LT(report.max_rel_error(), 1e-7);
}

TEST(Gradcheck, CatchesAGradientOffByOnePartInAThousand) {
  const auto report = gradcheck([](const auto& in) { return square(in[0], 1.001); },
                                {input({0.3, -1.2, 2.0, 0.7, -0.4, 1.5}, {2, 3})}, {"x"});
  EXPECT_FALSE(report.passed()) << report.to_string();
  EXPECT_EQ(report.tensors[0].failures, 6);  // every element is off by 1e-3 relative
  EXPECT_NEAR(report.max_rel_error(), 1e-3, 1e-5);
}

TEST(Gradcheck, CatchesAMissingTerm) {
  const auto a = input({0.5, -1.0, 2.0}, {3}), b = input({1.5, 0.25, -3.0}, {3});
  const auto wrong = gradcheck([](const auto& in) { return mul_add(in[0], in[1], true); }, {a, b}, {"a", "b"});
  EXPECT_FALSE(wrong.passed()) << wrong.to_string();
  ASSERT_EQ(wrong.tensors.size(), 2u);
  EXPECT_EQ(wrong.tensors[0].failures, 3);  // a's gradient misses dy
  EXPECT_TRUE(wrong.tensors[1].passed());   // b's is right, and reported so

  const auto right = gradcheck([](const auto& in) { return mul_add(in[0], in[1], false); }, {a, b}, {"a", "b"});
  EXPECT_TRUE(right.passed()) << right.to_string();
}

TEST(Gradcheck, CatchesAWrongGradientOfOneElementAmongMany) {
  // A gradient wrong in a single element must still fail the check: here the square node is right,
  // but a mask op pretends element 5 does not contribute.
  struct MaskNode : Node {
    Tensor x;
    const char* op_name() const override { return "test_bad_identity"; }
    void backward() override {
      Tensor d = outputs[0].grad().clone();
      d.data<double>()[5] = 0.0;
      accumulate_grad(x, d);
    }
  };
  auto identity_with_bad_grad = [](const Tensor& x) {
    Tensor out = x.clone();
    if (needs_grad(x)) {
      auto node = std::make_unique<MaskNode>();
      node->x = x;
      record(std::move(node), {out});
    }
    return out;
  };
  std::vector<double> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1 * (i + 1);
  const auto report = gradcheck([&](const auto& in) { return square(identity_with_bad_grad(in[0]), 1.0); },
                                {input(v, {4, 6})}, {"x"});
  EXPECT_FALSE(report.passed());
  EXPECT_EQ(report.tensors[0].failures, 1);
}

TEST(Gradcheck, MovesOffTheKinkOfAbsoluteValue) {
  const Tensor x = input({-1.5, 0.0, 0.7, 2.0}, {4});
  const auto report = gradcheck([](const auto& in) { return abs(in[0]); }, {x}, {"x"});
  EXPECT_TRUE(report.passed()) << report.to_string();
  ASSERT_EQ(report.tensors.size(), 1u);
  EXPECT_EQ(report.tensors[0].shifted, 1);  // only the element at 0
  EXPECT_GT(x.at(1), 0.0);                  // nudged in place, as gradcheck.h documents
  EXPECT_EQ(x.at(0), -1.5);
}

TEST(Gradcheck, RefusesFloat32Inputs) {
  const Tensor x = Tensor::from_vector({1, 2}, {2}).set_requires_grad();
  EXPECT_THROW(gradcheck([](const auto& in) { return ops::mul(in[0], in[0]); }, {x}), Error);
}

}  // namespace
}  // namespace tf
