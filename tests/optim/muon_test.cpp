// Muon against independent truth: the Newton-Schulz output against the SVD of its input (a one-sided
// Jacobi SVD in double, written here), a step against the formula evaluated through that SVD, the
// non-matrix parameters against the AdamW optimizer, and the fast kernels against the reference.
#include "optim/muon.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "framework/kernels/mode.h"
#include "framework/random.h"
#include "optim/factory.h"
#include "optim/grads.h"
#include "support/compare.h"

namespace tf::optim {
namespace {

using testing::same_bits;
using testing::set_grad;

// A row-major matrix of doubles: the test's own linear algebra.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;  // (rows, cols)
  double& operator()(int64_t i, int64_t j) { return v[i * cols + j]; }
  double operator()(int64_t i, int64_t j) const { return v[i * cols + j]; }
};

Matrix zeros(int64_t rows, int64_t cols) { return {rows, cols, std::vector<double>(rows * cols, 0.0)}; }

Matrix random_matrix(int64_t rows, int64_t cols, Rng& rng) {
  return {rows, cols, randn({rows, cols}, rng, 1.0, DType::f64).to_vector()};
}

Matrix transpose(const Matrix& a) {
  Matrix t = zeros(a.cols, a.rows);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < a.cols; ++j) t(j, i) = a(i, j);
  return t;
}

double frobenius(const Matrix& a) {
  double s = 0;
  for (double x : a.v) s += x * x;
  return std::sqrt(s);
}

// G = U diag(s) V^T with U (R, k), V (C, k), k = min(R, C).
struct Svd {
  Matrix u;
  std::vector<double> s;
  Matrix v;
};

// One-sided Jacobi (Hestenes 1958; Demmel & Veselic 1992): rotate pairs of columns of A = G until they
// are orthogonal, accumulating the rotations in V; then column j of A is s_j u_j.
Svd jacobi_svd(const Matrix& g) {
  if (g.rows < g.cols) {
    Svd t = jacobi_svd(transpose(g));
    return {t.v, t.s, t.u};
  }
  const int64_t n = g.cols;
  Matrix a = g, v = zeros(n, n);
  for (int64_t i = 0; i < n; ++i) v(i, i) = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double worst = 0;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        double alpha = 0, beta = 0, gamma = 0;
        for (int64_t i = 0; i < a.rows; ++i) {
          alpha += a(i, p) * a(i, p), beta += a(i, q) * a(i, q), gamma += a(i, p) * a(i, q);
        }
        if (gamma == 0) continue;
        worst = std::max(worst, std::abs(gamma) / std::sqrt(alpha * beta));
        const double zeta = (beta - alpha) / (2 * gamma);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::abs(zeta) + std::sqrt(1 + zeta * zeta));
        const double c = 1 / std::sqrt(1 + t * t), s = c * t;
        for (Matrix* m : {&a, &v})
          for (int64_t i = 0; i < m->rows; ++i) {
            const double x = (*m)(i, p), y = (*m)(i, q);
            (*m)(i, p) = c * x - s * y, (*m)(i, q) = s * x + c * y;
          }
      }
    if (worst < 1e-15) break;
  }
  Svd out{zeros(g.rows, n), std::vector<double>(n), v};
  for (int64_t j = 0; j < n; ++j) {
    double norm = 0;
    for (int64_t i = 0; i < g.rows; ++i) norm += a(i, j) * a(i, j);
    out.s[j] = std::sqrt(norm);
    for (int64_t i = 0; i < g.rows; ++i) out.u(i, j) = norm > 0 ? a(i, j) / out.s[j] : 0.0;
  }
  return out;
}

// U diag(f(s)) V^T.
template <class F>
Matrix with_singular_values(const Svd& d, F f) {
  Matrix out = zeros(d.u.rows, d.v.rows);
  for (size_t k = 0; k < d.s.size(); ++k) {
    const double sk = f(d.s[k]);
    for (int64_t i = 0; i < out.rows; ++i)
      for (int64_t j = 0; j < out.cols; ++j) out(i, j) += d.u(i, k) * sk * d.v(j, k);
  }
  return out;
}

// What five quintic steps do to one singular value x of the normalised matrix (Note [Newton-Schulz]).
double quintic5(double x) {
  for (int k = 0; k < 5; ++k) x = 3.4445 * x - 4.7750 * x * x * x + 2.0315 * x * x * x * x * x;
  return x;
}

// NS5(G) through the SVD: U quintic5(S / (||G||_F + 1e-7)) V^T.
Matrix newton_schulz_by_svd(const Matrix& g) {
  const double norm = frobenius(g) + 1e-7;
  return with_singular_values(jacobi_svd(g), [&](double s) { return quintic5(s / norm); });
}

double max_abs_diff(const Matrix& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.v.size(); ++i) worst = std::max(worst, std::abs(a.v[i] - b[i]));
  return worst;
}

const std::vector<std::pair<int64_t, int64_t>> kOddShapes = {{1, 1}, {3, 5}, {17, 3}, {63, 17}};

TEST(JacobiSvd, ReconstructsWithOrthonormalFactors) {  // the oracle itself
  Rng rng(3);
  for (const auto& [r, c] : kOddShapes) {
    const Matrix g = random_matrix(r, c, rng);
    const Svd d = jacobi_svd(g);
    EXPECT_LT(max_abs_diff(with_singular_values(d, [](double s) { return s; }), g.v), 1e-12) << r << "x" << c;
    for (const Matrix* f : {&d.u, &d.v}) {
      const Matrix t = transpose(*f);
      for (int64_t i = 0; i < t.rows; ++i)
        for (int64_t j = 0; j < t.rows; ++j) {
          double dot = 0;
          for (int64_t k = 0; k < t.cols; ++k) dot += t(i, k) * t(j, k);
          EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-12);
        }
    }
  }
}

TEST(NewtonSchulz, KeepsTheSingularVectorsAndMapsSingularValuesIntoTheBand) {
  Rng rng(7);
  for (const auto& [r, c] : kOddShapes) {
    const Matrix g = random_matrix(r, c, rng);
    const Matrix expected = newton_schulz_by_svd(g);
    std::vector<double> ref(r * c);
    newton_schulz_reference<double>(g.v.data(), ref.data(), r, c);
    EXPECT_LT(max_abs_diff(expected, ref), 1e-10) << r << "x" << c;

    const std::vector<float> g32(g.v.begin(), g.v.end());
    std::vector<float> fast32(r * c);
    NewtonSchulzScratch scratch;
    newton_schulz_fast(g32.data(), fast32.data(), r, c, scratch);
    const std::vector<double> fast(fast32.begin(), fast32.end());
    EXPECT_LT(max_abs_diff(expected, fast), 2e-5) << r << "x" << c;

    // Not U V^T: the singular values of the result lie in the iteration's band, far from 0.
    const Svd out = jacobi_svd({r, c, ref});
    for (double s : out.s) {
      EXPECT_GE(s, 0.6) << r << "x" << c;
      EXPECT_LE(s, 1.25) << r << "x" << c;
    }
  }
}

TEST(NewtonSchulz, OutputMayOverwriteItsInputAndZeroStaysZero) {
  Rng rng(8);
  const Matrix g = random_matrix(5, 4, rng);
  std::vector<double> inout = g.v, out(20);
  newton_schulz_reference<double>(g.v.data(), out.data(), 5, 4);
  newton_schulz_reference<double>(inout.data(), inout.data(), 5, 4);
  EXPECT_EQ(inout, out);
  std::vector<float> zero(20, 0.0f), z_out(20, 1.0f);
  NewtonSchulzScratch scratch;
  newton_schulz_fast(zero.data(), z_out.data(), 5, 4, scratch);
  EXPECT_EQ(z_out, zero);  // the 1e-7 in the norm: no 0 / 0
}

TEST(NewtonSchulz, FastKernelMatchesReferenceOnOddSizes) {
  Rng rng(11);
  NewtonSchulzScratch scratch;  // shared across sizes, as the optimizer shares it across parameters
  for (const auto& [r, c] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {1, 7}, {7, 1}, {3, 5}, {17, 3}, {63, 17}, {130, 257}, {257, 130}}) {  // 33410 > OpenMP threshold
    const Tensor g = randn({r, c}, rng);
    Tensor fast = Tensor::zeros({r, c}), ref = Tensor::zeros({r, c});
    newton_schulz_fast(g.data<float>(), fast.data<float>(), r, c, scratch);
    newton_schulz_reference<float>(g.data<float>(), ref.data<float>(), r, c);
    // Entries are O(1 / sqrt(max(r, c))); float products over up to 257 terms, five times.
    EXPECT_TRUE(tf::testing::all_close(fast, ref, 1e-4, 2e-5)) << r << "x" << c;
  }
}

TEST(Muon, FastUpdateMatchesReferenceOnOddSizes) {
  Rng rng(12);
  NewtonSchulzScratch scratch;
  for (const auto& [r, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 5}, {17, 3}, {257, 130}}) {
    const Tensor p0 = randn({r, c}, rng);
    Tensor p_fast = p0.clone(), p_ref = p0.clone(), b_fast = Tensor::zeros({r, c}), b_ref = Tensor::zeros({r, c});
    std::vector<float> update(r * c);
    for (int t = 0; t < 3; ++t) {
      const Tensor g = randn({r, c}, rng);
      const MuonCoeffs coeffs{0.02, 0.95, 0.1, t != 1};
      muon_update_fast(p_fast.data<float>(), g.data<float>(), b_fast.data<float>(), r, c, coeffs, update.data(),
                       scratch);
      muon_update_reference<float>(p_ref.data<float>(), g.data<float>(), b_ref.data<float>(), r, c, coeffs);
    }
    EXPECT_TRUE(tf::testing::all_close(p_fast, p_ref, 1e-5, 2e-6)) << r << "x" << c;
    EXPECT_TRUE(tf::testing::all_close(b_fast, b_ref, 1e-5, 1e-7)) << r << "x" << c;
  }
}

// A named (rows, cols) parameter.
ParamRef matrix_param(const std::string& name, const Matrix& m, DType dtype, bool hidden_matrix = true) {
  Tensor t = Tensor::from_vector(m.v, {m.rows, m.cols}, dtype);
  t.set_requires_grad().set_name(name);
  return {name, t, true, hidden_matrix};
}

class MuonByDtype : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(MuonByDtype, TwoStepsEqualTheFormulaThroughTheSvd) {
  const auto [dtype, nesterov] = GetParam();
  // A tall (3, 2) matrix: Newton-Schulz runs on its transpose, and sqrt(max(1, R / C)) = sqrt(1.5).
  const Matrix w0{3, 2, {0.5, -1.0, 2.0, 0.25, -0.75, 1.5}};
  const Matrix g1{3, 2, {0.1, 0.4, -0.3, 0.2, 0.05, -0.6}}, g2{3, 2, {-0.2, 0.1, 0.3, 0.5, -0.4, 0.05}};
  const double mu = 0.9, muon_lr = 0.05, adam_lr = 1e-3, wd = 0.1;
  ParamRef w = matrix_param("blocks.0.mlp.fc.weight", w0, dtype);
  Muon opt({w}, {.lr = muon_lr, .momentum = mu, .nesterov = nesterov, .adamw = {.lr = adam_lr, .weight_decay = wd}});

  Matrix buffer = zeros(3, 2), expected = w0;
  const double factors[] = {1.0, 0.5};  // the schedule halves lr at step 2: eta halves too
  const Matrix* grads[] = {&g1, &g2};
  for (int t = 0; t < 2; ++t) {
    const Matrix& g = *grads[t];
    Matrix u = zeros(3, 2);
    for (size_t i = 0; i < u.v.size(); ++i) {
      buffer.v[i] = mu * buffer.v[i] + (1 - mu) * g.v[i];
      u.v[i] = nesterov ? (1 - mu) * g.v[i] + mu * buffer.v[i] : buffer.v[i];
    }
    const Matrix o = newton_schulz_by_svd(u);
    const double eta = muon_lr * factors[t];
    for (size_t i = 0; i < expected.v.size(); ++i)
      expected.v[i] = expected.v[i] * (1 - eta * wd) - eta * std::sqrt(1.5) * o.v[i];

    set_grad(w, g.v);
    opt.set_lr(adam_lr * factors[t]);
    EXPECT_DOUBLE_EQ(opt.muon_lr(), eta);
    opt.step();
    const double tol = dtype == DType::f64 ? 1e-12 : 2e-6;
    EXPECT_LT(max_abs_diff(expected, w.param.to_vector()), tol) << "step " << t + 1;
    const OptimizerState state = opt.state();  // by value: a reference into it would dangle
    const ParamState& s = state.params.at(w.name);
    ASSERT_EQ(s.slots.size(), 1u);
    EXPECT_LT(max_abs_diff(buffer, s.slots.at("momentum_buffer").to_vector()), tol * 1e-2);
  }
}

TEST(Muon, TheStepDoesNotDependOnTheGradientsScale) {
  // U / ||U||_F: a thousand times the gradient moves W the same (to the 1e-7 in the norm).
  Rng rng(13);
  const Matrix w0 = random_matrix(5, 3, rng), g = random_matrix(5, 3, rng);
  Matrix big = g;
  for (double& x : big.v) x *= 1000;
  ParamRef a = matrix_param("a", w0, DType::f64), b = matrix_param("b", w0, DType::f64);
  Muon opt({a, b});
  set_grad(a, g.v);
  set_grad(b, big.v);
  opt.step();
  EXPECT_LT(max_abs_diff({5, 3, a.param.to_vector()}, b.param.to_vector()), 1e-8);
  EXPECT_GT(max_abs_diff(w0, a.param.to_vector()), 1e-3);  // it moved
}

// The parameters Muon does not orthogonalise take exactly AdamW's update: the same bits, step for
// step, with weight decay on one and not the other, and an lr that changes.
TEST_P(MuonByDtype, OtherParametersTakeAdamWsUpdateBitForBit) {
  const DType dtype = std::get<0>(GetParam());
  Rng rng(21);
  auto make = [&](std::vector<ParamRef>& out, uint64_t seed) {
    Rng init(seed);
    for (const auto& [name, shape, decay, hidden] : std::vector<std::tuple<std::string, Shape, bool, bool>>{
             {"blocks.0.attn.qkv.weight", {12, 4}, true, true},
             {"blocks.0.attn.qkv.bias", {12}, false, false},
             {"token_embedding.weight", {9, 4}, false, false},
             {"lm_head.weight", {9, 4}, true, false}}) {
      Tensor t = randn(shape, init, 1.0, dtype);
      t.set_requires_grad().set_name(name);
      out.push_back({name, t, decay, hidden});
    }
  };
  std::vector<ParamRef> mixed, alone;
  make(mixed, 5);
  make(alone, 5);
  alone.erase(alone.begin());  // AdamW gets the non-matrix parameters only
  const AdamOptions adamw{.lr = 1e-2, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.3};
  Muon muon(mixed, {.adamw = adamw});
  AdamW reference(alone, adamw);
  for (int t = 0; t < 4; ++t) {
    for (size_t i = 0; i < mixed.size(); ++i) {
      const Tensor g = randn(mixed[i].param.shape(), rng, 1.0, dtype);
      set_grad(mixed[i], g.to_vector());
      if (i > 0) set_grad(alone[i - 1], g.to_vector());
    }
    const double lr = 1e-2 * (t + 1) / 4;
    muon.set_lr(lr);
    reference.set_lr(lr);
    muon.step();
    reference.step();
    for (size_t i = 1; i < mixed.size(); ++i)
      EXPECT_TRUE(same_bits(mixed[i].param, alone[i - 1].param)) << mixed[i].name << " step " << t + 1;
  }
  const OptimizerState a = muon.state(), b = reference.state();
  for (const ParamRef& p : alone)
    for (const char* slot : {"exp_avg", "exp_avg_sq"})
      EXPECT_TRUE(same_bits(a.params.at(p.name).slots.at(slot), b.params.at(p.name).slots.at(slot))) << p.name;
  EXPECT_EQ(a.params.at("blocks.0.attn.qkv.weight").slots.count("momentum_buffer"), 1u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MuonByDtype,
                         ::testing::Combine(::testing::Values(DType::f64, DType::f32), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "Nesterov" : "Plain");
                         });

// Note [one matrix per thread]: with at least two matrices per thread, each thread orthogonalises whole
// matrices. Every matrix must still get its own update (against the double reference, step by step, on
// odd sizes), the AdamW parameter AdamW's, and train.deterministic the same bits at 1 and 2 threads.
TEST(Muon, MatricesSpreadOverThreadsEachTakeTheirOwnUpdate) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{3, 5}, {17, 3}, {1, 7}, {64, 17}, {33, 65}, {5, 5}};
  const MuonCoeffs coeffs{0.02, 0.95, 0.1, true};  // Muon's defaults, decay on every matrix
  auto run = [&](int threads, bool deterministic) {
    Rng init(31), grads(32);
    std::vector<ParamRef> params;
    for (size_t i = 0; i < shapes.size(); ++i) {
      Tensor t = randn({shapes[i].first, shapes[i].second}, init);
      t.set_requires_grad().set_name("m" + std::to_string(i));
      params.push_back({t.name(), t, true, true});
    }
    Tensor bias = randn({7}, init);
    bias.set_requires_grad().set_name("bias");
    params.push_back({"bias", bias, false, false});
    Muon opt(params, {.lr = coeffs.lr, .momentum = coeffs.momentum, .adamw = {.lr = 1e-3, .weight_decay = 0.1}});
    // The reference's own copies of the matrices and momentum buffers, in float as the parameters.
    std::vector<Tensor> expected, buffers;
    for (size_t i = 0; i < shapes.size(); ++i)
      expected.push_back(params[i].param.clone()), buffers.push_back(Tensor::zeros(params[i].param.shape()));
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    const kernels::DeterministicScope scope(deterministic);
    for (int t = 0; t < 3; ++t) {
      for (size_t i = 0; i < params.size(); ++i) {
        const Tensor g = randn(params[i].param.shape(), grads);
        set_grad(params[i], g.to_vector());
        if (i < shapes.size())
          muon_update_reference<float>(expected[i].data<float>(), g.data<float>(), buffers[i].data<float>(),
                                       shapes[i].first, shapes[i].second, coeffs);
      }
      opt.step();
      for (size_t i = 0; i < shapes.size(); ++i)
        EXPECT_TRUE(tf::testing::all_close(params[i].param, expected[i], 1e-5, 2e-6))
            << params[i].name << " step " << t + 1 << " at " << threads << " threads";
    }
    omp_set_num_threads(saved);
    std::vector<Tensor> out;
    for (const ParamRef& p : params) out.push_back(p.param.clone());
    return out;
  };
  run(2, false);
  run(3, false);  // more threads than the machine may have cores: still each matrix once
  const std::vector<Tensor> one = run(1, true), two = run(2, true);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(same_bits(one[i], two[i])) << "parameter " << i;
}

TEST(Muon, WeightDecayIsDecoupledAndOnlyOnDecayParams) {
  // A zero gradient gives U = 0 and O = 0 (the 1e-7 in the norm), so only the decay acts:
  // p_t = p0 (1 - eta wd)^t on a decay matrix, and an exempt one stays put.
  Rng rng(4);
  const Matrix m = random_matrix(4, 3, rng);
  ParamRef decayed = matrix_param("a.weight", m, DType::f64), exempt = matrix_param("b.weight", m, DType::f64);
  exempt.decay = false;
  Muon opt({decayed, exempt}, {.lr = 0.1, .adamw = {.lr = 1e-3, .weight_decay = 0.5}});
  for (int t = 1; t <= 3; ++t) {
    set_grad(decayed, std::vector<double>(12, 0.0));
    set_grad(exempt, std::vector<double>(12, 0.0));
    opt.step();
    for (int64_t i = 0; i < 12; ++i) {
      EXPECT_NEAR(decayed.param.at(i), m.v[i] * std::pow(0.95, t), 1e-14);
      EXPECT_EQ(exempt.param.at(i), m.v[i]);
    }
  }
}

TEST(Muon, KeepsOneSlotForMatricesAndRefusesAnAdamStateForThem) {
  Rng rng(6);
  ParamRef w = matrix_param("w.weight", random_matrix(3, 4, rng), DType::f32);
  ParamRef b = testing::param("w.bias", {1.0, 2.0, 3.0}, DType::f32, false);
  Muon opt({w, b});
  set_grad(w, std::vector<double>(12, 0.5));
  set_grad(b, {0.1, 0.2, 0.3});
  opt.step();
  const OptimizerState s = opt.state();
  EXPECT_EQ(s.kind, "muon");
  EXPECT_EQ(s.params.at("w.weight").slots.size(), 1u);
  EXPECT_EQ(s.params.at("w.bias").slots.size(), 2u);
  EXPECT_LE(2, state_slots({.name = "muon"}));  // the memory plan's count covers both

  OptimizerState adam_like = s;
  adam_like.params.at("w.weight").slots = s.params.at("w.bias").slots;
  EXPECT_THROW(opt.load_state(adam_like), InputError);
  opt.load_state(s);  // its own state loads
}

TEST(Muon, RejectsBadOptionsAndMisshapenMatrices) {
  Rng rng(9);
  const auto w = [&] { return matrix_param("w", random_matrix(2, 2, rng), DType::f64); };
  EXPECT_THROW(Muon({w()}, {.momentum = 1.0, .adamw = {}}), InputError);
  EXPECT_THROW(Muon({w()}, {.lr = -1, .adamw = {}}), InputError);
  EXPECT_THROW(Muon({w()}, {.adamw = {.lr = 0}}), InputError);
  EXPECT_THROW(Muon({w()}, {.adamw = {.beta2 = 1.0}}), InputError);
  ParamRef vector = testing::param("v", {1.0, 2.0});
  vector.hidden_matrix = true;
  EXPECT_THROW(Muon({vector}), Error);
}

TEST(Muon, TheTableBuildsItFromTheRecipesKeys) {
  OptimConfig c;
  c.name = "muon";
  c.lr = 2e-3;
  c.muon_lr = 0.03;
  c.muon_momentum = 0.8;
  c.muon_nesterov = false;
  c.weight_decay = 0.05;
  const auto opt = make_optimizer({}, c);
  const auto* muon = dynamic_cast<const Muon*>(opt.get());
  ASSERT_NE(muon, nullptr);
  EXPECT_EQ(muon->options().lr, 0.03);
  EXPECT_EQ(muon->options().momentum, 0.8);
  EXPECT_FALSE(muon->options().nesterov);
  EXPECT_EQ(muon->options().adamw.lr, 2e-3);
  EXPECT_EQ(muon->options().adamw.weight_decay, 0.05);
  EXPECT_EQ(muon->muon_lr(), 0.03);
}

}  // namespace
}  // namespace tf::optim
