// Global gradient-norm clipping: the norm, the exact scaling to max_norm, non-finite norms, and a
// norm that does not depend on the thread count.
#include "optim/clip.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>

#include "framework/random.h"
#include "optim/grads.h"

namespace tf::optim {
namespace {

using testing::param;
using testing::same_bits;
using testing::set_grad;

TEST(Clip, ScalesToExactlyMaxNorm) {
  // Gradients (3) and (0, 4) have norm 5; a third parameter has no gradient and counts as 0.
  for (DType dtype : {DType::f64, DType::f32}) {
    std::vector<ParamRef> params = {param("a", {1.0}, dtype), param("b", {1.0, 1.0}, dtype), param("c", {1.0}, dtype)};
    set_grad(params[0], {3.0});
    set_grad(params[1], {0.0, 4.0});
    EXPECT_DOUBLE_EQ(grad_norm(params), 5.0);
    EXPECT_DOUBLE_EQ(clip_grad_norm(params, 1.0), 5.0);  // the norm before clipping
    const double eps = dtype == DType::f64 ? 1e-15 : 1e-7;  // one rounding of each element
    EXPECT_NEAR(params[0].param.grad().item(), 0.6, eps);
    EXPECT_NEAR(params[1].param.grad().at(1), 0.8, eps);
    EXPECT_NEAR(grad_norm(params), 1.0, eps);
    EXPECT_FALSE(params[2].param.grad().defined());
  }
}

TEST(Clip, LeavesSmallGradientsUntouched) {
  std::vector<ParamRef> params = {param("a", {1.0, 1.0}, DType::f32)};
  set_grad(params[0], {0.3, -0.4});
  const Tensor before = params[0].param.grad().clone();
  EXPECT_NEAR(clip_grad_norm(params, 1.0), 0.5, 1e-7);
  EXPECT_TRUE(same_bits(params[0].param.grad(), before));
}

TEST(Clip, NonFiniteNormIsReturnedAndNothingIsScaled) {
  for (double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    std::vector<ParamRef> params = {param("a", {1.0, 1.0}, DType::f32), param("b", {1.0}, DType::f32)};
    set_grad(params[0], {bad, 1.0});
    set_grad(params[1], {2.0});
    const Tensor a = params[0].param.grad().clone(), b = params[1].param.grad().clone();
    const double norm = clip_grad_norm(params, 1.0);
    EXPECT_FALSE(std::isfinite(norm));
    EXPECT_EQ(std::isnan(norm), std::isnan(bad));
    EXPECT_TRUE(same_bits(params[0].param.grad(), a));
    EXPECT_TRUE(same_bits(params[1].param.grad(), b));
  }
}

TEST(Clip, NormIsTheSameBitsForAnyThreadCount) {
  Rng rng(3);
  Tensor w = randn({300007}, rng);  // many blocks, so the parallel loop splits them
  w.set_requires_grad().set_name("w");
  accumulate_grad(w, randn({300007}, rng, 10.0));
  const std::vector<ParamRef> params = {{"w", w, true}};
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = grad_norm(params);
  omp_set_num_threads(3);
  const double three = grad_norm(params);
  omp_set_num_threads(threads);
  EXPECT_EQ(one, three);
  // And it is the norm: against a plain serial sum in long double.
  long double sum = 0;
  for (int64_t i = 0; i < w.numel(); ++i) sum += static_cast<long double>(w.grad().at(i)) * w.grad().at(i);
  EXPECT_NEAR(one, std::sqrt(static_cast<double>(sum)), 1e-12 * one);
}

TEST(Clip, ScaleGradsAndBadMaxNorm) {
  std::vector<ParamRef> params = {param("a", {1.0, 1.0})};
  set_grad(params[0], {2.0, -6.0});
  scale_grads(params, 0.25);  // e.g. averaging 4 accumulated micro-batches
  EXPECT_EQ(params[0].param.grad().at(0), 0.5);
  EXPECT_EQ(params[0].param.grad().at(1), -1.5);
  EXPECT_THROW(clip_grad_norm(params, 0.0), InputError);
}

}  // namespace
}  // namespace tf::optim
