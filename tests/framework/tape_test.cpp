// The tape's contract (framework/autograd/tape.h): summed gradients for a tensor used twice,
// no-grad scopes, leaf accumulation across backward calls, and release of saved tensors and
// intermediate gradients once backward has run.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "framework/autograd/tape.h"
#include "framework/ops/activation.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/matmul.h"
#include "framework/ops/reduce.h"
#include "framework/ops/shape.h"
#include "framework/tensor.h"
#include "support/errors.h"

namespace tf {
namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector(); }

class TapeTest : public ::testing::Test {
 protected:
  void SetUp() override { tape().clear(); }
  void TearDown() override { tape().clear(); }
};

TEST_F(TapeTest, TensorUsedTwiceReceivesTheSumOfBothGradients) {
  // y = x * x + 3 x with dy = g: dx = g * (2 x + 3), the x*x node contributing twice itself.
  Tensor x = Tensor::from_vector({1, -2, 0.5}, {3}, DType::f64).set_requires_grad();
  const Tensor three = Tensor::full({3}, 3.0, DType::f64);
  const Tensor y = ops::add(ops::mul(x, x), ops::mul(three, x));
  const Tensor g = Tensor::from_vector({1, 10, 100}, {3}, DType::f64);
  tape().backward(y, g);
  // 1*(2+3), 10*(-4+3), 100*(1+3)
  EXPECT_EQ(values(x.grad()), (std::vector<double>{5, -10, 400}));
}

TEST_F(TapeTest, ScalarLossThroughMatmul) {
  // L = u^T (A v) with A (2, 3): dL/dA = u v^T, dL/dv = A^T u, by hand.
  Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64).set_requires_grad();
  Tensor v = Tensor::from_vector({1, 0, -1}, {3, 1}, DType::f64).set_requires_grad();
  const Tensor u = Tensor::from_vector({2, -1}, {1, 2}, DType::f64);
  const Tensor loss = ops::matmul(u, ops::matmul(a, v));  // (1, 1)
  EXPECT_EQ(loss.item(), 2 * (1 - 3) - (4 - 6));           // -2
  backward(loss);
  EXPECT_EQ(values(a.grad()), (std::vector<double>{2, 0, -2, -1, 0, 1}));
  EXPECT_EQ(values(v.grad()), (std::vector<double>{2 - 4, 4 - 5, 6 - 6}));
  EXPECT_FALSE(u.grad().defined());
}

TEST_F(TapeTest, NoGradScopeRecordsNothing) {
  Tensor w = Tensor::full({2, 2}, 1.0).set_requires_grad();
  const Tensor x = Tensor::full({3, 2}, 2.0);
  Tensor y, z;
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(grad_enabled());
    y = ops::linear(x, w);
    z = ops::mul(ops::add(y, y), y);
    EXPECT_EQ(tape().size(), 0u);
  }
  EXPECT_TRUE(grad_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(z.requires_grad());
  // Nothing to run backward on: the error says why.
  testing::expect_error([&] { tape().backward(z, Tensor::full({3, 2}, 1.0)); }, "NoGradGuard");
  // Outside the scope, the same op records again.
  ops::linear(x, w);
  EXPECT_EQ(tape().size(), 1u);
}

TEST_F(TapeTest, NoGradGuardsNest) {
  {
    NoGradGuard outer;
    {
      NoGradGuard inner;
      EXPECT_FALSE(grad_enabled());
    }
    EXPECT_FALSE(grad_enabled());  // the inner guard restores the outer state, not "on"
  }
  EXPECT_TRUE(grad_enabled());
}

TEST_F(TapeTest, TensorsThatDoNotRequireGradGetNone) {
  Tensor w = Tensor::from_vector({1, 2}, {2}).set_requires_grad();
  const Tensor c = Tensor::from_vector({3, 4}, {2});
  const Tensor d = Tensor::from_vector({5, 6}, {2});
  const Tensor y = ops::div(ops::mul(w, c), ops::add(c, d));  // c + d is not recorded
  EXPECT_EQ(tape().size(), 2u);
  tape().backward(y, Tensor::full({2}, 1.0));
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(c.grad().defined());
  EXPECT_FALSE(d.grad().defined());
  EXPECT_FALSE(c.requires_grad());
}

TEST_F(TapeTest, SecondBackwardOnTheSameLossSaysTheTapeWasCleared) {
  Tensor w = Tensor::from_vector({1, 2}, {1, 2}).set_requires_grad();
  const Tensor loss = ops::matmul(w, w, false, true);  // (1, 1)
  backward(loss);
  EXPECT_EQ(tape().size(), 0u);
  testing::expect_error([&] { backward(loss); }, "cleared");  // a second backward
  // The failed call left the first gradient alone: d(w w^T)/dw = 2 w.
  EXPECT_EQ(values(w.grad()), (std::vector<double>{2, 4}));
}

TEST_F(TapeTest, TapeIsEmptyAfterBackward) {
  Tensor w = Tensor::full({4}, 0.5).set_requires_grad();
  Tensor y = w;
  for (int i = 0; i < 5; ++i) y = ops::mul(y, w);
  EXPECT_EQ(tape().size(), 5u);
  tape().backward(y, Tensor::full({4}, 1.0));
  EXPECT_EQ(tape().size(), 0u);
  // y = w^6: dy/dw = 6 w^5 = 6 / 32.
  for (double g : values(w.grad())) EXPECT_EQ(g, 6.0 / 32.0);
}

TEST_F(TapeTest, SavedTensorsAreReleasedAfterBackward) {
  Tensor w = Tensor::from_vector({1, 2, 3}, {3}).set_requires_grad();
  const Tensor c = Tensor::from_vector({4, 5, 6}, {3});
  std::weak_ptr<TensorImpl> hidden_impl;
  std::weak_ptr<Storage> hidden_storage;
  Tensor y;
  {
    const Tensor hidden = ops::mul(w, c);  // saved by the next node, then dropped by us
    hidden_impl = hidden.impl_ptr();
    hidden_storage = hidden.impl().storage;
    y = ops::mul(hidden, hidden);
  }
  // Only the tape keeps the intermediate alive now.
  EXPECT_FALSE(hidden_impl.expired());
  EXPECT_FALSE(hidden_storage.expired());
  tape().backward(y, Tensor::full({3}, 1.0));
  EXPECT_TRUE(hidden_impl.expired());
  EXPECT_TRUE(hidden_storage.expired());
  // y = (w c)^2: dy/dw = 2 w c^2.
  EXPECT_EQ(values(w.grad()), (std::vector<double>{2 * 1 * 16, 2 * 2 * 25, 2 * 3 * 36}));
}

// Note [gradient slots]: a node that only hands a gradient on (add, scale, reshape) holds the
// input's slot, not its storage, so an activation no backward reads dies with its last handle.
TEST_F(TapeTest, ValuesNoBackwardReadsAreFreedDuringTheForwardPass) {
  Tensor w = Tensor::from_vector({1, 2, 3}, {3}).set_requires_grad();
  const Tensor c = Tensor::from_vector({4, 5, 6}, {3});
  std::weak_ptr<Storage> hidden_storage, sum_storage;
  Tensor y;
  {
    const Tensor hidden = ops::mul(w, c);  // mul saves w and c, not its own output
    hidden_storage = hidden.impl().storage;
    const Tensor sum = ops::add(ops::reshape(hidden, {3, 1}), c.view({3, 1}));
    sum_storage = sum.impl().storage;
    y = ops::scale(sum, 2.0);
  }
  EXPECT_TRUE(hidden_storage.expired());
  EXPECT_TRUE(sum_storage.expired());
  EXPECT_EQ(tape().size(), 4u);
  tape().backward(y, Tensor::full({3, 1}, 1.0));
  // y = 2 (w c + c): dy/dw = 2 c.
  EXPECT_EQ(values(w.grad()), (std::vector<double>{8, 10, 12}));
}

// The values a backward does read stay alive, however the caller drops its handles.
TEST_F(TapeTest, OutputsABackwardReadsAreKeptUntilItRuns) {
  Tensor x = Tensor::from_vector({-1, 2, -3, 4}, {4}).set_requires_grad();
  std::weak_ptr<Storage> relu_out;
  Tensor y;
  {
    const Tensor r = ops::relu(x);  // relu's backward reads its output
    relu_out = r.impl().storage;
    y = ops::add(r, r);
  }
  EXPECT_FALSE(relu_out.expired());
  tape().backward(y, Tensor::full({4}, 1.0));
  EXPECT_TRUE(relu_out.expired());
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 2, 0, 2}));
}

TEST_F(TapeTest, IntermediateGradientsAreReleased) {
  Tensor w = Tensor::from_vector({1, 2}, {2}).set_requires_grad();
  const Tensor h = ops::scale(w, 3.0);  // intermediate, held by us this time
  const Tensor y = ops::mul(h, h);
  tape().backward(y, Tensor::full({2}, 1.0));
  EXPECT_TRUE(h.requires_grad());
  EXPECT_FALSE(h.grad().defined());  // released once the node producing h had run
  EXPECT_FALSE(y.grad().defined());
  EXPECT_EQ(values(w.grad()), (std::vector<double>{18, 36}));  // 2 * 9 w
}

TEST_F(TapeTest, ParameterGradientsAccumulateAcrossBackwardCalls) {
  Tensor w = Tensor::from_vector({1, 2}, {2}).set_requires_grad();
  const Tensor c = Tensor::from_vector({3, -4}, {2});
  tape().backward(ops::mul(w, c), Tensor::full({2}, 1.0));
  EXPECT_EQ(values(w.grad()), (std::vector<double>{3, -4}));
  const Tensor first_grad = w.grad();
  tape().backward(ops::mul(w, c), Tensor::full({2}, 0.5));
  EXPECT_EQ(values(w.grad()), (std::vector<double>{4.5, -6}));
  EXPECT_TRUE(first_grad.same(w.grad()));  // summed in place (+=), not replaced
  w.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST_F(TapeTest, FirstGradientIsACopyOfTheContribution) {
  // A leaf gradient must not alias the tensor it was assigned from: the second backward sums in
  // place and would otherwise write into the other gradient.
  Tensor a = Tensor::from_vector({1, 2}, {2}).set_requires_grad();
  Tensor b = Tensor::from_vector({5, 7}, {2}).set_requires_grad();
  tape().backward(ops::add(a, b), Tensor::full({2}, 1.0));
  tape().backward(ops::add(a, b), Tensor::full({2}, 1.0));
  EXPECT_EQ(values(a.grad()), (std::vector<double>{2, 2}));
  EXPECT_EQ(values(b.grad()), (std::vector<double>{2, 2}));
}

TEST_F(TapeTest, BackwardNeedsOneElementLossOrAGradient) {
  Tensor w = Tensor::full({2}, 1.0).set_requires_grad();
  const Tensor y = ops::mul(w, w);
  EXPECT_THROW(backward(y), Error);
  EXPECT_THROW(tape().backward(y, Tensor::full({3}, 1.0)), Error);  // gradient of the wrong shape
}

}  // namespace
}  // namespace tf

namespace tf {
namespace {

// Anomaly detection names the op whose output first holds a non-finite value.
TEST(TapeAnomaly, NamesTheFirstOpProducingNonFinite) {
  Tensor a = Tensor::from_vector({1.0, 0.0}, {2}, DType::f64).set_requires_grad();
  Tensor b = Tensor::from_vector({1.0, 0.0}, {2}, DType::f64).set_requires_grad();
  set_anomaly_detection(true);
  const std::string message = testing::error_message([&] {
    LayerScope block("blocks", 3);
    const Tensor product = [&] {
      LayerScope mlp("mlp");
      return ops::mul(a, b);  // finite
    }();
    LayerScope attn("attn");
    ops::div(product, b);  // 0 / 0 at element 1
  });
  EXPECT_EQ(layer_path(), "");  // every scope closed on the way out
  set_anomaly_detection(false);
  tape().clear();
  EXPECT_NE(message.find("op 'div' in layer 'blocks.3.attn' (op 2 of the forward pass)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("element 1"), std::string::npos) << message;
  // Off: the same computation runs through.
  EXPECT_NO_THROW(ops::div(ops::mul(a, b), b));
  tape().clear();
}

// In backward, the first op whose backward hands on a non-finite gradient is named, with its layer.
TEST(TapeAnomaly, NamesTheFirstBackwardProducingNonFinite) {
  // y = a / b with a = 1, b = 1e-200 is 1e200, finite; dy/db = -a / b^2 = -1e400 overflows.
  Tensor a = Tensor::from_vector({1.0, 1.0}, {2}, DType::f64).set_requires_grad();
  Tensor b = Tensor::from_vector({1.0, 1e-200}, {2}, DType::f64).set_requires_grad();
  set_anomaly_detection(true);
  const std::string message = testing::error_message([&] {
    Tensor y;
    {
      LayerScope head("lm_head");
      y = ops::div(a, b);
    }
    backward(ops::sum(y));
  });
  const size_t nodes_left = tape().size();
  set_anomaly_detection(false);
  EXPECT_EQ(nodes_left, 0u);  // the interrupted walk cleared the tape
  EXPECT_NE(message.find("anomaly: the backward of op 'div' in layer 'lm_head' (op 1 of the forward pass) produced -inf "
                         "at element 1 of the gradient for its input (2,)"),
            std::string::npos)
      << message;
  // Off: backward runs through and leaves the infinity in b's gradient for the trainer's check.
  a.zero_grad();
  b.zero_grad();
  backward(ops::sum(ops::div(a, b)));
  EXPECT_TRUE(std::isinf(b.grad().to_vector()[1]));
}

// Outside anomaly mode a LayerScope records nothing.
TEST(TapeAnomaly, LayerScopesCostNothingWhenOff) {
  LayerScope block("blocks", 0);
  EXPECT_EQ(layer_path(), "");
}

TEST_F(TapeTest, AccumulateAdoptsASoleOwnedTemporaryAndCopiesAShared) {
  Tensor a = Tensor::zeros({2, 3}, DType::f64).set_requires_grad();
  Tensor g = Tensor::full({2, 3}, 1.5, DType::f64);
  const void* storage = g.raw_data();
  accumulate_grad(a, std::move(g).view({2, 3}));  // sole owner: adopted, no copy
  EXPECT_EQ(a.grad().raw_data(), storage);

  Tensor b = Tensor::zeros({2, 3}, DType::f64).set_requires_grad();
  Tensor kept = Tensor::full({2, 3}, 2.0, DType::f64);
  accumulate_grad(b, kept.view({2, 3}));  // the storage has another owner: copied
  EXPECT_NE(b.grad().raw_data(), kept.raw_data());
  kept.fill(7.0);
  EXPECT_EQ(values(b.grad()), std::vector<double>(6, 2.0));
  accumulate_grad(b, Tensor::full({2, 3}, 0.25, DType::f64));  // a second contribution is summed
  EXPECT_EQ(values(b.grad()), std::vector<double>(6, 2.25));
}

}  // namespace
}  // namespace tf
