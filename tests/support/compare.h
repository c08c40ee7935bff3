// Test helpers: compare tensors elementwise with a tolerance and report the worst element.
#pragma once
#include <gtest/gtest.h>

#include "framework/tensor.h"

namespace tf::testing {

// Passes when |a - b| <= atol + rtol * |b| everywhere; the message names the worst element.
::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol = 0.0);

// max_i |a_i - b_i| over the elements of two tensors of the same size, in double.
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace tf::testing
