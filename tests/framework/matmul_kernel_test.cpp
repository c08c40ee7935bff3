// The fast float32 matmul kernels (oneDNN and OpenBLAS) against the reference kernel on odd sizes,
// every transpose combination, batched and shared-B, with and without bias, overwriting and
// accumulating; then the ops
// matmul / linear fast path against the same ops under ReferenceKernelsGuard, forward and backward.
//
// m, n, k = rows of C, columns of C, inner dimension.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/gemv.h"
#include "framework/kernels/matmul.h"
#include "framework/kernels/mode.h"
#include "framework/ops/matmul.h"
#include "framework/random.h"
#include "support/compare.h"

namespace tf {
namespace {

using kernels::MatmulDims;

constexpr double kEpsF32 = 0x1.0p-23;  // float32 machine epsilon (2 u)

std::vector<float> random_floats(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(2.0 * rng.uniform() - 1.0);
  return v;
}

template <class To, class From>
std::vector<To> convert(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

std::string describe(const MatmulDims& d, bool with_bias) {
  return "batch " + std::to_string(d.batch) + ", m " + std::to_string(d.m) + ", n " + std::to_string(d.n) +
         ", k " + std::to_string(d.k) + (d.trans_a ? ", trans_a" : "") + (d.trans_b ? ", trans_b" : "") +
         (d.b_broadcast ? ", b_broadcast" : "") + (d.accumulate ? ", accumulate" : "") + (with_bias ? ", bias" : "");
}

// Checks one fast kernel against the float64 reference, elementwise with the float32 error bound:
// any order of float32 multiply-adds computing c0 + bias + sum_p a_p b_p errs by at most
// gamma_{k+2} (|c0| + |bias| + sum_p |a_p| |b_p|), gamma_j = j u / (1 - j u), u = eps_f32 / 2
// (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 3.5). We allow
// (k + 2) eps_f32 times that sum, about twice the bound: rounding grows like
// k * eps_f32 * sum|a||b|, while a wrong index or transpose shows up as an error of the order of
// sum|a||b| itself.
// The float64 reference on the same float32 inputs is exact to ~k 1e-16, so it stands for the truth.
// The float32 reference is checked against the same bound, so the oracle itself is also held to it.
template <class Kernel>
void check_against_reference(const MatmulDims& d, bool with_bias, Kernel&& fast, const char* name, Rng& rng) {
  const size_t na = d.batch * d.m * d.k, nb = (d.b_broadcast ? 1 : d.batch) * d.k * d.n, nc = d.batch * d.m * d.n;
  const std::vector<float> a = random_floats(na, rng), b = random_floats(nb, rng), c0 = random_floats(nc, rng);
  const std::vector<float> bias = random_floats(d.n, rng);  // (n)
  const std::vector<double> bias64 = convert<double>(bias);
  const float* bias_f32 = with_bias ? bias.data() : nullptr;

  // Truth in float64, and sum |a||b| (+ |c0|, + |bias|) for the bound.
  std::vector<double> truth = convert<double>(c0), magnitude(nc);
  kernels::matmul_reference<double>(d, convert<double>(a).data(), convert<double>(b).data(), truth.data(),
                                    with_bias ? bias64.data() : nullptr);
  std::vector<double> abs_a(na), abs_b(nb);
  for (size_t i = 0; i < na; ++i) abs_a[i] = std::abs(a[i]);
  for (size_t i = 0; i < nb; ++i) abs_b[i] = std::abs(b[i]);
  MatmulDims dm = d;
  dm.accumulate = false;
  kernels::matmul_reference<double>(dm, abs_a.data(), abs_b.data(), magnitude.data());
  for (size_t i = 0; i < nc; ++i)
    magnitude[i] += (d.accumulate ? std::abs(c0[i]) : 0.0) + (with_bias ? std::abs(bias[i % d.n]) : 0.0);

  auto check = [&](const std::vector<float>& c, const char* which) {
    size_t bad = 0, worst = 0;
    double worst_ratio = 0;
    for (size_t i = 0; i < nc; ++i) {
      const double tol = (d.k + 2) * kEpsF32 * magnitude[i];
      const double ratio = std::abs(c[i] - truth[i]) / tol;
      if (!(ratio <= 1.0)) ++bad;  // NaN counts as bad
      if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = i;
    }
    EXPECT_EQ(bad, 0u) << which << " (" << describe(d, with_bias) << "): worst element " << worst << " = " << c[worst]
                       << ", expected " << truth[worst] << ", error " << worst_ratio << " x tolerance";
  };

  std::vector<float> reference = c0, result = c0;
  kernels::matmul_reference<float>(d, a.data(), b.data(), reference.data(), bias_f32);
  check(reference, "matmul_reference<float>");
  fast(d, a.data(), b.data(), result.data(), bias_f32);
  check(result, name);
}

struct KernelCase {
  bool trans_a, trans_b, b_broadcast, accumulate;
  int64_t batch;
};

void PrintTo(const KernelCase& p, std::ostream* out) {
  *out << "trans_a " << p.trans_a << ", trans_b " << p.trans_b << ", batch " << p.batch << ", b_broadcast "
       << p.b_broadcast << ", accumulate " << p.accumulate;
}

class FastMatmul : public ::testing::TestWithParam<KernelCase> {};

TEST_P(FastMatmul, MatchesReferenceOnOddSizes) {
  const KernelCase p = GetParam();
  Rng rng(17);
  int shape_index = 0;
  for (int64_t m : {1, 3, 17, 63, 130}) {
    for (int64_t n : {1, 3, 17, 63, 130}) {
      for (int64_t k : {1, 3, 17, 63, 130}) {
        MatmulDims d{p.batch, m, n, k, p.trans_a, p.trans_b, p.b_broadcast, p.accumulate};
        const bool with_bias = ++shape_index % 2 == 0;  // every other shape: all layouts, most sizes
        check_against_reference(d, with_bias, kernels::matmul_onednn, "matmul_onednn", rng);
        check_against_reference(d, with_bias, kernels::matmul_blas, "matmul_blas", rng);
        if (::testing::Test::HasFailure()) return;  // one shape's report is enough
      }
    }
  }
}

std::vector<KernelCase> kernel_cases() {
  std::vector<KernelCase> cases;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t batch : {1, 3})
        for (bool bb : {false, true})
          for (bool acc : {false, true}) cases.push_back({ta, tb, bb, acc, batch});
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<KernelCase>& info) {
  const KernelCase& p = info.param;
  return std::string(p.trans_a ? "At" : "A") + (p.trans_b ? "Bt" : "B") + "_batch" + std::to_string(p.batch) +
         (p.b_broadcast ? "_shared" : "") + (p.accumulate ? "_acc" : "");
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, FastMatmul, ::testing::ValuesIn(kernel_cases()), case_name);

// gemv_fast (the decoding step's kernel) is the m = 1, trans_b case of the reference: y = x W^T +
// bias, on odd n (rows: the 4-row blocks and the tail) and odd k (the vector body and its tail),
// under the same error bound as the matmul kernels.
TEST(GemvFast, MatchesReferenceOnOddSizes) {
  Rng rng(19);
  int shape_index = 0;
  for (int64_t n : {1, 3, 4, 17, 63, 130}) {
    for (int64_t k : {1, 3, 17, 63, 130, 384}) {
      MatmulDims d;
      d.n = n;
      d.k = k;
      d.trans_b = true;  // W is (n, k): a linear layer's weight
      const bool with_bias = ++shape_index % 2 == 0;
      check_against_reference(
          d, with_bias,
          [](const MatmulDims& dd, const float* x, const float* w, float* y, const float* bias) {
            kernels::gemv_fast(dd.n, dd.k, w, dd.k, x, bias, y);
          },
          "gemv_fast", rng);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// The threaded gemv behind a single-row linear layer: odd row counts split among the threads
// (n k >= 16384 forks; smaller runs on one thread), against the reference. Run at 3 threads too, so
// a split with a ragged last block is exercised whatever the machine's core count.
TEST(GemvThreaded, MatchesReferenceOnOddSizesAndThreadCounts) {
  Rng rng(29);
  const int threads_before = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    for (int64_t n : {1, 3, 17, 63, 130, 1537}) {
      for (int64_t k : {1, 17, 383}) {
        MatmulDims d;
        d.n = n;
        d.k = k;
        d.trans_b = true;
        check_against_reference(
            d, (n + k) % 2 == 0,
            [](const MatmulDims& dd, const float* x, const float* w, float* y, const float* bias) {
              kernels::gemv_threaded(dd.n, dd.k, w, x, bias, y);
            },
            "gemv_threaded", rng);
        if (::testing::Test::HasFailure()) break;
      }
    }
  }
  omp_set_num_threads(threads_before);
}

// A block of columns of a wider matrix (ldw > k, starting mid-row): the decoding step's partial
// output projections. Truth: the reference over a contiguous copy of the block, in float64.
TEST(GemvFast, ColumnBlockOfAWiderMatrixMatchesReference) {
  Rng rng(23);
  for (int64_t n : {1, 3, 17, 130}) {
    for (int64_t k : {1, 3, 17, 63}) {
      const int64_t first = 5, ldw = k + 11;  // columns first .. first + k - 1 of an (n, ldw) matrix
      const std::vector<float> wide = random_floats(n * ldw, rng), x = random_floats(k, rng);
      std::vector<double> block(n * k), abs_block(n * k), abs_x(k);  // (n, k)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < k; ++i) block[j * k + i] = wide[j * ldw + first + i], abs_block[j * k + i] = std::abs(block[j * k + i]);
      for (int64_t i = 0; i < k; ++i) abs_x[i] = std::abs(x[i]);
      MatmulDims d;
      d.n = n;
      d.k = k;
      d.trans_b = true;
      std::vector<double> truth(n), magnitude(n);
      kernels::matmul_reference<double>(d, convert<double>(x).data(), block.data(), truth.data());
      kernels::matmul_reference<double>(d, abs_x.data(), abs_block.data(), magnitude.data());
      std::vector<float> y(n);
      kernels::gemv_fast(n, k, wide.data() + first, ldw, x.data(), nullptr, y.data());
      for (int64_t j = 0; j < n; ++j)
        ASSERT_LE(std::abs(y[j] - truth[j]), (k + 2) * kEpsF32 * magnitude[j]) << "n " << n << ", k " << k << ", row " << j;
    }
  }
}

// --- The ops' fast path against the same ops on the reference kernel -------------------------------

struct OpRun {
  Tensor out;
  std::vector<Tensor> grads;
};

// Runs f on float32 copies of `inputs` (requiring grad), backward with `dout`, returns all results.
template <class F>
OpRun run_op(F&& f, const std::vector<Tensor>& inputs, const Tensor& dout) {
  std::vector<Tensor> in;
  for (const Tensor& t : inputs) in.push_back(t.clone().set_requires_grad());
  OpRun r;
  r.out = f(in);
  tape().backward(r.out, dout);
  for (const Tensor& t : in) r.grads.push_back(t.grad());
  return r;
}

// Same bound as above with every |entry| <= 1, so sum|a||b| (+ |bias|) <= k + 1 and each kernel is
// within (k + 1)^2 eps_f32 of the truth, the two within twice that, k being the largest inner
// dimension of any product in forward or backward.
template <class F>
void expect_fast_matches_reference(F&& f, const std::vector<Tensor>& inputs, const Shape& out_shape,
                                   int64_t max_inner, const std::string& what) {
  Rng rng(5);
  const Tensor dout = rand_uniform(out_shape, rng, -1.0, 1.0);
  const OpRun fast = run_op(f, inputs, dout);
  OpRun reference;
  {
    kernels::ReferenceKernelsGuard reference_kernels;
    reference = run_op(f, inputs, dout);
  }
  const double atol = 2 * (max_inner + 1) * (max_inner + 1) * kEpsF32;
  EXPECT_TRUE(testing::all_close(fast.out, reference.out, 0.0, atol)) << what << ": output";
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_TRUE(testing::all_close(fast.grads[i], reference.grads[i], 0.0, atol)) << what << ": grad " << i;
}

TEST(FastMatmulOps, MatmulAndLinearMatchReferenceKernels) {
  Rng rng(3);
  auto u = [&](const Shape& s) { return rand_uniform(s, rng, -1.0, 1.0); };
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // (3, 17, 63)-batched a and b; the backward products run over 17, 63 and 130.
      const Shape sa = ta ? Shape{3, 63, 17} : Shape{3, 17, 63};
      const Shape sb = tb ? Shape{3, 130, 63} : Shape{3, 63, 130};
      expect_fast_matches_reference(
          [&](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1], ta, tb); }, {u(sa), u(sb)},
          {3, 17, 130}, 130, "matmul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
    }
    // A shared matrix (a weight): b's gradient folds the batch into 2 * 17 = 34 rows.
    const Shape sb = ta ? Shape{130, 63} : Shape{63, 130};
    expect_fast_matches_reference(
        [&](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1], false, ta); }, {u({2, 17, 63}), u(sb)},
        {2, 17, 130}, 130, "matmul shared b, tb=" + std::to_string(ta));
  }
  // linear with and without bias: (2, 17, 63) -> 130 and (1, 3) -> 1.
  expect_fast_matches_reference([](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); },
                                {u({2, 17, 63}), u({130, 63}), u({130})}, {2, 17, 130}, 130, "linear with bias");
  expect_fast_matches_reference([](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1]); },
                                {u({1, 3}), u({1, 3})}, {1, 1}, 3, "linear (1, 3) -> 1");
}

TEST(FastMatmulOps, EmptyInnerDimensionGivesZerosOrTheBias) {
  // k = 0: every product is an empty sum. linear then returns the bias rows; matmul returns zeros.
  Tensor x = Tensor::zeros({2, 3, 0}).set_requires_grad();        // (B, T, 0)
  Tensor weight = Tensor::zeros({4, 0}).set_requires_grad();      // (4, 0)
  Tensor bias = Tensor::from_vector({1, 2, 3, 4}, {4}).set_requires_grad();
  const Tensor y = ops::linear(x, weight, bias);                  // (2, 3, 4)
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.at(i), 1.0 + i % 4);
  tape().backward(y, Tensor::full(y.shape(), 1.0));
  EXPECT_EQ(bias.grad().to_vector(), (std::vector<double>{6, 6, 6, 6}));
  EXPECT_EQ(weight.grad().shape(), (Shape{4, 0}));

  Tensor a = Tensor::zeros({2, 3, 0}).set_requires_grad();
  const Tensor c = ops::matmul(a, Tensor::zeros({0, 5}).set_requires_grad());  // (2, 3, 5)
  EXPECT_EQ(c.shape(), (Shape{2, 3, 5}));
  for (double v : c.to_vector()) EXPECT_EQ(v, 0.0);
  tape().backward(c, Tensor::full(c.shape(), 1.0));
  EXPECT_EQ(a.grad().shape(), (Shape{2, 3, 0}));
}

TEST(FastMatmulOps, ReferenceGuardSelectsTheReferenceKernel) {
  // The guard switches float32 ops to the reference kernel on this thread and restores the fast
  // kernel when it ends; float64 always takes the reference kernel.
  EXPECT_FALSE(kernels::reference_forced());
  {
    kernels::ReferenceKernelsGuard guard;
    EXPECT_TRUE(kernels::reference_forced());
    EXPECT_FALSE(kernels::use_fast<float>());
  }
  EXPECT_TRUE(kernels::use_fast<float>());
  EXPECT_FALSE(kernels::use_fast<double>());
}

}  // namespace
}  // namespace tf
