// PrivateGradients (framework/autograd/private_grads.h): inside a scope, a thread's backward adds
// parameter gradients to the scope's own slots, while another thread's backward at the same time
// still reaches the parameter; add_to_parameter then adds the parts, and takes over the first when
// the parameter has none. Gradients by hand: d/dw sum(w * w) = 2 w, d/dw sum(3 w) = 3.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "framework/autograd/private_grads.h"
#include "framework/autograd/tape.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"
#include "framework/tensor.h"

namespace tf {
namespace {

const std::vector<double> kW = {0.5, -1.25, 2.0};

Tensor weights() { return Tensor::from_vector(kW, {3}, DType::f64).set_requires_grad(); }

void backward_of_square(const Tensor& w) { backward(ops::sum(ops::mul(w, w))); }              // 2 w
void backward_of_three_times(const Tensor& w) { backward(ops::sum(ops::scale(w, 3.0))); }    // 3

TEST(PrivateGradients, AScopedBackwardFillsTheScopesSlotsAndNotTheParameters) {
  Tensor w = weights();
  PrivateGradients part(std::vector<Tensor>{w});
  {
    PrivateGradients::Scope scope(part);
    backward_of_square(w);
  }
  EXPECT_FALSE(w.grad().defined()) << "the parameter's own gradient was written inside the scope";
  part.add_to_parameter(0);  // the parameter had none: it takes the part's over
  ASSERT_TRUE(w.grad().defined());
  const std::vector<double> g = w.grad().to_vector();
  for (size_t i = 0; i < kW.size(); ++i) EXPECT_DOUBLE_EQ(g[i], 2 * kW[i]);
  part.add_to_parameter(0);  // emptied by the first: adds nothing
  EXPECT_DOUBLE_EQ(w.grad().to_vector()[0], 2 * kW[0]);
}

TEST(PrivateGradients, TheScopeIsThisThreadsAloneAndThePartsAddInOrder) {
  Tensor w = weights();
  std::vector<PrivateGradients> parts(2, PrivateGradients(std::vector<Tensor>{w}));
  // Thread A holds its scope while the main thread runs a backward of its own, unscoped: that one
  // reaches the parameter directly.
  std::thread a([&] {
    PrivateGradients::Scope scope(parts[0]);
    backward_of_square(w);
  });
  backward_of_three_times(w);
  a.join();
  ASSERT_TRUE(w.grad().defined());
  for (double g : w.grad().to_vector()) EXPECT_DOUBLE_EQ(g, 3.0);
  {
    PrivateGradients::Scope scope(parts[1]);
    backward_of_three_times(w);
  }
  for (PrivateGradients& part : parts) part.add_to_parameter(0);
  const std::vector<double> g = w.grad().to_vector();
  for (size_t i = 0; i < kW.size(); ++i) EXPECT_DOUBLE_EQ(g[i], 3.0 + 2 * kW[i] + 3.0);
}

TEST(PrivateGradients, OnlyTheListedParametersAreRedirected) {
  Tensor w = weights(), v = weights();
  PrivateGradients part(std::vector<Tensor>{w});
  {
    PrivateGradients::Scope scope(part);
    backward(ops::sum(ops::mul(w, v)));  // dw = v, dv = w
  }
  EXPECT_FALSE(w.grad().defined());
  ASSERT_TRUE(v.grad().defined()) << "v is not listed: its gradient goes to v";
  for (size_t i = 0; i < kW.size(); ++i) EXPECT_DOUBLE_EQ(v.grad().to_vector()[i], kW[i]);
  part.discard();
  part.add_to_parameter(0);
  EXPECT_FALSE(w.grad().defined()) << "a discarded part adds nothing";
}

}  // namespace
}  // namespace tf
