// The same bits for any number of threads: the kernels that sum across rows (layer-norm backward's
// dweight and dbias, cross-entropy's loss) always, and every matmul under kernels::DeterministicScope
// (train.deterministic). Each is run at 1, 2, 3 and 4 OpenMP threads on odd sizes large enough to
// fork, and compared bit for bit with the one-thread result. The matmul is also held to the float64
// reference (its pieces must add up to the whole product, not only agree with each other).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "framework/kernels/cpu/cross_entropy.h"
#include "framework/kernels/cpu/layer_norm.h"
#include "framework/kernels/matmul.h"
#include "framework/kernels/mode.h"
#include "framework/random.h"

namespace tf {
namespace {

using kernels::MatmulDims;

std::vector<float> random_floats(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(2.0 * rng.uniform() - 1.0);
  return v;
}

// Runs `compute` (which returns its outputs as one flat vector) at 1, 2, 3 and 4 threads and
// expects every run's bits to equal the one-thread run's.
void expect_same_bits_for_any_thread_count(const std::string& what, const std::function<std::vector<float>()>& compute) {
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one = compute();
  for (int threads : {2, 3, 4}) {
    omp_set_num_threads(threads);
    const std::vector<float> many = compute();
    ASSERT_EQ(many.size(), one.size());
    size_t differing = 0, first = 0;
    for (size_t i = 0; i < one.size(); ++i)
      if (std::memcmp(&one[i], &many[i], sizeof(float)) != 0 && differing++ == 0) first = i;
    EXPECT_EQ(differing, 0u) << what << ": " << differing << " of " << one.size() << " values differ at " << threads
                             << " threads from 1 thread; first at " << first << ": " << many[first] << " vs "
                             << one[first];
  }
  omp_set_num_threads(threads_before);
}

// Shapes of training: a linear layer's forward (m = rows), its weight gradient (small m and n, long k:
// where oneDNN splits k over threads), attention's batched products, and odd sizes with ragged blocks.
TEST(DeterministicMatmul, SameBitsForAnyThreadCountAndMatchesTheReference) {
  struct Shape {
    int64_t batch, m, n, k;
    bool trans_a, trans_b, b_broadcast, accumulate, bias;
  };
  const std::vector<Shape> shapes = {
      {1, 517, 97, 63, false, true, true, false, true},     // x W^T + b
      {1, 97, 63, 517, true, false, true, false, false},    // dW = dY^T X
      {1, 17, 19, 4099, true, false, true, true, false},    // a tiny output over a long k, accumulated
      {6, 130, 130, 17, false, true, false, false, false},  // Q K^T per head
      {6, 130, 17, 130, false, false, false, true, false},  // P V, accumulated
      {3, 1, 33, 65, false, true, true, false, true},       // one row (decoding)
  };
  Rng rng(41);
  for (const Shape& s : shapes) {
    const MatmulDims d{s.batch, s.m, s.n, s.k, s.trans_a, s.trans_b, s.b_broadcast, s.accumulate};
    const std::vector<float> a = random_floats(d.batch * d.m * d.k, rng);
    const std::vector<float> b = random_floats((d.b_broadcast ? 1 : d.batch) * d.k * d.n, rng);
    const std::vector<float> c0 = random_floats(d.batch * d.m * d.n, rng), bias = random_floats(d.n, rng);
    const float* bias_or_null = s.bias ? bias.data() : nullptr;
    const std::string what = "matmul " + std::to_string(s.batch) + "x" + std::to_string(s.m) + "x" +
                             std::to_string(s.n) + "x" + std::to_string(s.k);
    const kernels::DeterministicScope deterministic(true);
    auto compute = [&] {
      std::vector<float> c = c0;
      kernels::matmul_fast(d, a.data(), b.data(), c.data(), bias_or_null);
      return c;
    };
    expect_same_bits_for_any_thread_count(what, compute);

    // The pieces make up the whole product: against the float64 reference, within (k + 2) eps_f32
    // (|c0| + |bias| + sum |a||b|), the bound tests/framework/matmul_kernel_test.cpp derives.
    const std::vector<float> c = compute();
    std::vector<double> truth(c0.begin(), c0.end()), bias64(bias.begin(), bias.end());
    std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end());
    kernels::matmul_reference<double>(d, a64.data(), b64.data(), truth.data(), s.bias ? bias64.data() : nullptr);
    for (double& v : a64) v = std::abs(v);
    for (double& v : b64) v = std::abs(v);
    std::vector<double> magnitude(c.size());
    MatmulDims overwrite = d;
    overwrite.accumulate = false;
    kernels::matmul_reference<double>(overwrite, a64.data(), b64.data(), magnitude.data());
    for (size_t i = 0; i < c.size(); ++i) {
      const double bound = (d.k + 2) * 0x1.0p-23 *
                           (magnitude[i] + (d.accumulate ? std::abs(c0[i]) : 0.0) + (s.bias ? std::abs(bias[i % d.n]) : 0.0));
      ASSERT_LE(std::abs(c[i] - truth[i]), bound) << what << ", element " << i;
    }
  }
}

TEST(LayerNormBackward, ParameterGradientsHaveTheSameBitsForAnyThreadCount) {
  Rng rng(43);
  for (int64_t rows : {1, 17, 1031}) {
    const int64_t channels = 67;
    const std::vector<float> x = random_floats(rows * channels, rng), dy = random_floats(rows * channels, rng),
                             weight = random_floats(channels, rng);
    std::vector<float> mean(rows), rstd(rows), y(rows * channels);
    kernels::layer_norm_forward_fast({.rows = rows, .channels = channels, .x = x.data(), .weight = weight.data(),
                                      .y = y.data(), .mean = mean.data(), .rstd = rstd.data()});
    expect_same_bits_for_any_thread_count("layer-norm backward, " + std::to_string(rows) + " rows", [&] {
      std::vector<float> out(rows * channels + 2 * channels, 0.0f);  // dx, dweight, dbias
      float* dweight = out.data() + rows * channels;
      const kernels::LayerNormBackwardArgs<float> g{.rows = rows, .channels = channels, .dy = dy.data(),
                                                    .x = x.data(), .weight = weight.data(), .mean = mean.data(),
                                                    .rstd = rstd.data(), .dx = out.data(), .dweight = dweight,
                                                    .dbias = dweight + channels};
      kernels::layer_norm_backward_fast(g);
      return out;
    });
  }
}

TEST(CrossEntropyForward, LossHasTheSameBitsForAnyThreadCount) {
  Rng rng(47);
  for (int64_t rows : {1, 63, 2053}) {
    const kernels::CrossEntropyDims d{rows, 97, -100};
    const std::vector<float> logits = random_floats(rows * d.classes, rng);
    std::vector<int32_t> targets(rows);
    for (int64_t r = 0; r < rows; ++r) targets[r] = r % 11 == 5 ? -100 : static_cast<int32_t>(r * 7 % d.classes);
    expect_same_bits_for_any_thread_count("cross-entropy, " + std::to_string(rows) + " rows", [&] {
      std::vector<float> lse(rows);
      const kernels::CrossEntropySums sums = kernels::cross_entropy_forward_fast(d, logits.data(), targets.data(), lse.data());
      const double loss = sums.loss;
      std::vector<float> out(lse);
      float words[2];
      std::memcpy(words, &loss, sizeof loss);  // the double's bits, as two floats' worth of bytes
      out.insert(out.end(), {words[0], words[1], static_cast<float>(sums.count)});
      return out;
    });
  }
}

}  // namespace
}  // namespace tf
