// Gradient checking in float64: the tape's gradients against central finite differences.
//
// For f: inputs -> output, gradcheck forms the scalar L = sum(w * f(inputs)) with a fixed random
// w (so every output element contributes with its own weight), runs the tape once for dL/dx, and
// compares each element with (L(x + eps) - L(x - eps)) / 2 eps. An element passes when its
// relative error |analytic - numeric| / max(|analytic|, |numeric|) is at most rtol, or its
// absolute error is at most atol * max(1, |L|) (the floor for entries near zero, where central
// differences have absolute rounding error ~1e-16 |L| / eps).
//
// Non-differentiable points (ReLU at 0, |x| at 0): where the one-sided differences disagree, the
// element is moved by `kink_shift` before checking, since a derivative does not exist there.
//
//   auto report = gradcheck([](const std::vector<Tensor>& in) { return ops::mul(in[0], in[1]); },
//                           {a, b}, {"a", "b"});
//   EXPECT_TRUE(report.passed()) << report.to_string();
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "framework/random.h"
#include "framework/tensor.h"

namespace tf {

struct GradcheckOptions {
  double eps = 1e-6;
  double rtol = 1e-6;
  double atol = 1e-8;
  double kink_shift = 1e-3;
  uint64_t seed = 1234;
};

struct TensorGradCheck {
  std::string name;
  Shape shape;
  double max_abs_error = 0, max_rel_error = 0;
  int64_t failures = 0;  // elements outside both tolerances
  int64_t shifted = 0;   // elements moved off a kink
  // The element with the largest relative error: its flat index, and the two gradients compared there.
  int64_t worst_index = -1;
  double worst_analytic = 0, worst_numeric = 0;
  bool passed() const { return failures == 0; }
};

struct GradcheckReport {
  std::vector<TensorGradCheck> tensors;
  bool passed() const;
  double max_rel_error() const;
  double max_abs_error() const;
  std::string to_string() const;
};

// The multi-index of flat index i in `shape`, as "[2, 0, 3]".
std::string index_in(const Shape& shape, int64_t i);

// What gradcheck compares and when an element passes, in words, for the program's header.
std::string gradcheck_rule(const GradcheckOptions& options = {});

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Checks every input that requires grad. Inputs must be float64; they may be nudged off kinks.
GradcheckReport gradcheck(const GradcheckFn& f, std::vector<Tensor> inputs,
                          std::vector<std::string> names = {}, const GradcheckOptions& options = {});

// One op under test: how to make its float64 inputs and how to apply it. The same list drives the
// unit tests and `tapeformer gradcheck --ops`.
struct OpCase {
  std::string name;    // "matmul (trans_b)"
  std::string shapes;  // "(2, 3, 5) . (2, 4, 5)^T"
  std::function<std::vector<Tensor>(Rng&)> make_inputs;  // float64, requires_grad where checked
  GradcheckFn forward;
  GradcheckOptions options = {};
};

// Every op's cases, in the order `tapeformer gradcheck --ops` prints them (framework/ops/cases.cpp).
const std::vector<OpCase>& op_cases();
// A float64 normal(0, std) input that requires grad, named for the report.
Tensor gradcheck_input(Rng& rng, const Shape& shape, const std::string& name, double std = 1.0);
GradcheckReport run_op_case(const OpCase& c);

}  // namespace tf
