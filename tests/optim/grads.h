// Helpers for the optimizer tests: parameters with hand-set gradients.
#pragma once
#include <cstring>
#include <string>
#include <vector>

#include "framework/autograd/tape.h"
#include "optim/optimizer.h"

namespace tf::optim::testing {

// A named leaf parameter with the given values.
inline ParamRef param(const std::string& name, const std::vector<double>& values, DType dtype = DType::f64,
                      bool decay = true) {
  Tensor t = Tensor::from_vector(values, {static_cast<int64_t>(values.size())}, dtype);
  t.set_requires_grad().set_name(name);
  return {name, t, decay};
}

// Replaces p's gradient by `values`, as a backward pass would assign it.
inline void set_grad(const ParamRef& p, const std::vector<double>& values) {
  Tensor t = p.param;
  t.zero_grad();
  accumulate_grad(t, Tensor::from_vector(values, t.shape(), t.dtype()));
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace tf::optim::testing
