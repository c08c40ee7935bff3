// Muon: the Newton-Schulz kernels (reference and fast), the matrix update and the optimizer; see muon.h.
#include "optim/muon.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "framework/kernels/matmul.h"
#include "framework/kernels/mode.h"

namespace tf::optim {

// Note [Newton-Schulz]
// Muon replaces the update U = P S Q^T (its SVD) by an orthogonal matrix near P Q^T, computed without an SVD
// (Jordan et al. 2024, "Muon", section "Newton-Schulz"; Bernstein & Newhouse 2024, "Old Optimizer, New
// Norm", for why the orthogonal factor is the steepest descent direction under the spectral norm).
//   X_0 = U / (||U||_F + 1e-7)                  every singular value now in [0, 1], as ||U||_2 <= ||U||_F
//   X_{k+1} = a X_k + (b A + c A^2) X_k,  A = X_k X_k^T,  (a, b, c) = (3.4445, -4.7750, 2.0315)
// Since A^j X = P S^(2j+1) Q^T, each step maps every singular value s to phi(s) = a s + b s^3 + c s^5
// and leaves P and Q alone: after 5 steps O = P phi^5(S / ||U||_F) Q^T. The coefficients maximise the
// slope at 0 (a = 3.4445), so small singular values grow fast (1e-3 of the norm reaches 0.68 in five
// steps), at the price of not converging to 1: phi^5 lands in about [0.68, 1.21] for every s above
// 0.002, which Jordan et al. report trains as well as the exact P Q^T. When R > C we iterate on U^T, so that
// A is the small (min(R, C))^2 Gram matrix; O is transposed back. The products run through the same
// matmul kernel as the linear layers; everything else is elementwise.
constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;
constexpr double kNormEps = 1e-7;  // Jordan's: keeps a zero gradient from dividing by zero

// Below this many elements the OpenMP fork costs more than the loop.
constexpr int64_t kParallelMin = 1 << 15;

namespace {

// The Frobenius norm in double, summed in one fixed order so that the result does not depend on the
// number of threads (train.deterministic).
template <class T>
double frobenius_norm(const T* g, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  return std::sqrt(sum);
}

}  // namespace

void NewtonSchulzScratch::reserve(int64_t rows, int64_t cols) {
  const auto m = static_cast<size_t>(std::min(rows, cols)), n = static_cast<size_t>(std::max(rows, cols));
  if (x.size() < m * n) x.resize(m * n), y.resize(m * n);
  if (gram.size() < m * m) gram.resize(m * m), poly.resize(m * m);
}

template <class T>
void newton_schulz_reference(const T* g, T* out, int64_t rows, int64_t cols) {
  // Work on X (m, n) = g or g^T, with m = min(rows, cols); element (i, j) of X is g[at(i, j)].
  const bool tall = rows > cols;
  const int64_t m = tall ? cols : rows, n = tall ? rows : cols;
  auto at = [&](int64_t i, int64_t j) { return tall ? j * cols + i : i * cols + j; };
  std::vector<double> x(m * n), next(m * n), gram(m * m), poly(m * m);
  const double scale = 1 / (frobenius_norm(g, rows * cols) + kNormEps);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) x[i * n + j] = scale * static_cast<double>(g[at(i, j)]);
  for (int step = 0; step < kNewtonSchulzSteps; ++step) {
    for (int64_t i = 0; i < m; ++i)  // A = X X^T   (m, m)
      for (int64_t j = 0; j < m; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < n; ++k) sum += x[i * n + k] * x[j * n + k];
        gram[i * m + j] = sum;
      }
    for (int64_t i = 0; i < m; ++i)  // b A + c A^2   (m, m)
      for (int64_t j = 0; j < m; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < m; ++k) sum += gram[i * m + k] * gram[k * m + j];
        poly[i * m + j] = kB * gram[i * m + j] + kC * sum;
      }
    for (int64_t i = 0; i < m; ++i)  // a X + (b A + c A^2) X   (m, n)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < m; ++k) sum += poly[i * m + k] * x[k * n + j];
        next[i * n + j] = kA * x[i * n + j] + sum;
      }
    std::swap(x, next);
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) out[at(i, j)] = static_cast<T>(x[i * n + j]);
}
template void newton_schulz_reference<float>(const float*, float*, int64_t, int64_t);
template void newton_schulz_reference<double>(const double*, double*, int64_t, int64_t);

void newton_schulz_fast(const float* g, float* out, int64_t rows, int64_t cols, NewtonSchulzScratch& scratch) {
  if (rows == 0 || cols == 0) return;
  scratch.reserve(rows, cols);
  const bool tall = rows > cols;
  const int64_t m = tall ? cols : rows, n = tall ? rows : cols;
  float* x = scratch.x.data();        // (m, n)
  float* next = scratch.y.data();     // (m, n)
  float* gram = scratch.gram.data();  // (m, m)
  float* poly = scratch.poly.data();  // (m, m)
  const float scale = static_cast<float>(1 / (frobenius_norm(g, rows * cols) + kNormEps));
#pragma omp parallel for schedule(static) if (m * n >= kParallelMin)
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) x[i * n + j] = scale * g[tall ? j * cols + i : i * cols + j];

  const float a = static_cast<float>(kA), b = static_cast<float>(kB), c = static_cast<float>(kC);
  for (int step = 0; step < kNewtonSchulzSteps; ++step) {
    kernels::matmul_fast({.m = m, .n = m, .k = n, .trans_b = true}, x, x, gram);  // A = X X^T
    kernels::matmul_fast({.m = m, .n = m, .k = m}, gram, gram, poly);             // A^2
#pragma omp parallel for simd schedule(static) if (m * m >= kParallelMin)
    for (int64_t i = 0; i < m * m; ++i) poly[i] = b * gram[i] + c * poly[i];
#pragma omp parallel for simd schedule(static) if (m * n >= kParallelMin)
    for (int64_t i = 0; i < m * n; ++i) next[i] = a * x[i];
    kernels::matmul_fast({.m = m, .n = n, .k = m, .accumulate = true}, poly, x, next);  // += (bA + cA^2) X
    std::swap(x, next);
  }
#pragma omp parallel for schedule(static) if (m * n >= kParallelMin)
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) out[tall ? j * cols + i : i * cols + j] = x[i * n + j];
}

namespace {

// sqrt(max(1, R / C)): Jordan's scaling of O (muon.h).
double shape_scale(int64_t rows, int64_t cols) {
  return std::sqrt(std::max(1.0, static_cast<double>(rows) / static_cast<double>(cols)));
}

}  // namespace

template <class T>
void muon_update_reference(T* param, const T* grad, T* momentum_buffer, int64_t rows, int64_t cols,
                           const MuonCoeffs& c) {
  const int64_t n = rows * cols;
  std::vector<double> update(n);  // U, then O
  for (int64_t i = 0; i < n; ++i) {
    const double g = grad[i];
    const double b = c.momentum * static_cast<double>(momentum_buffer[i]) + (1 - c.momentum) * g;
    momentum_buffer[i] = static_cast<T>(b);
    update[i] = c.nesterov ? (1 - c.momentum) * g + c.momentum * b : b;
  }
  newton_schulz_reference<double>(update.data(), update.data(), rows, cols);
  const double step = c.lr * shape_scale(rows, cols), decay = 1 - c.lr * c.weight_decay;
  for (int64_t i = 0; i < n; ++i) param[i] = static_cast<T>(static_cast<double>(param[i]) * decay - step * update[i]);
}
template void muon_update_reference<float>(float*, const float*, float*, int64_t, int64_t, const MuonCoeffs&);
template void muon_update_reference<double>(double*, const double*, double*, int64_t, int64_t, const MuonCoeffs&);

void muon_update_fast(float* param, const float* grad, float* momentum_buffer, int64_t rows, int64_t cols,
                      const MuonCoeffs& c, float* update, NewtonSchulzScratch& scratch) {
  const int64_t n = rows * cols;
  const float mu = static_cast<float>(c.momentum), one_minus_mu = static_cast<float>(1 - c.momentum);
  const bool nesterov = c.nesterov;
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float b = mu * momentum_buffer[i] + one_minus_mu * grad[i];
    momentum_buffer[i] = b;
    update[i] = nesterov ? one_minus_mu * grad[i] + mu * b : b;
  }
  newton_schulz_fast(update, update, rows, cols, scratch);
  const float step = static_cast<float>(c.lr * shape_scale(rows, cols));
  const float decay = static_cast<float>(1 - c.lr * c.weight_decay);
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) param[i] = param[i] * decay - step * update[i];
}

Muon::Muon(std::vector<ParamRef> params, const MuonOptions& options)
    : Optimizer(std::move(params), options.adamw.lr, "muon", {"exp_avg", "exp_avg_sq"}), options_(options) {
  TF_CHECK_INPUT(options.lr >= 0 && std::isfinite(options.lr), "muon: lr must be finite and >= 0, got ", options.lr);
  TF_CHECK_INPUT(options.momentum >= 0 && options.momentum < 1, "muon: momentum must be in [0, 1), got ",
                 options.momentum);
  // muon_lr() scales by lr() / adamw.lr: the schedule's factor.
  TF_CHECK_INPUT(options.adamw.lr > 0, "muon: the AdamW rate (optim.lr) must be > 0, got ", options.adamw.lr);
  check_adam_options(options.adamw, "muon");
  for (const ParamRef& p : this->params()) {
    if (!p.hidden_matrix) continue;
    TF_CHECK(p.param.rank() == 2, "muon: '", p.name, "' ", p.param.describe(),
             " is marked a hidden matrix but is not 2-D");
    largest_numel_ = std::max(largest_numel_, p.param.numel());
  }
  matrices_.reserve(this->params().size());
  reserve_workspaces(static_cast<size_t>(std::max(1, omp_get_max_threads())));  // no warm step allocates
}

void Muon::reserve_workspaces(size_t count) {
  if (workspaces_.size() >= count) return;
  workspaces_.resize(count);
  for (Workspace& w : workspaces_) {
    w.update.resize(static_cast<size_t>(largest_numel_));
    for (const ParamRef& p : params())
      if (p.hidden_matrix) w.scratch.reserve(p.param.dim(0), p.param.dim(1));
  }
}

const std::vector<std::string>& Muon::slot_names(const ParamRef& p) const {
  return p.hidden_matrix ? matrix_slots_ : Optimizer::slot_names(p);
}

// Note [one matrix per thread]
// A small model's hidden matrices are small (d_model 128: 128 x 128 to 128 x 400), and each Newton-Schulz
// step is three products of them. Split over two threads, such a product spends much of its time forking,
// joining and (oneDNN) splitting k; the demo's Muon step took 19 ms against AdamW's 2.3 ms (EPYC, 2 cores).
// The matrices are independent, so each thread instead orthogonalises whole matrices, one at a time, with
// single-threaded products (kernels::matmul_fast inside a parallel region; onednn.cpp, Note [matmuls on a
// thread of their own]), largest first so that the threads end together. Every matrix is then computed by
// the same code whatever thread takes it, so train.deterministic still gives the same bits at any thread
// count. With fewer than two matrices per thread, the products keep their own threads instead.
void Muon::update_all(const std::vector<size_t>& due) {
  matrices_.clear();
  for (size_t i : due) {
    if (params()[i].hidden_matrix)
      matrices_.push_back(i);
    else
      update_one(i);
  }
  const auto numel = [&](size_t i) { return params()[i].param.numel(); };
  std::stable_sort(matrices_.begin(), matrices_.end(), [&](size_t a, size_t b) { return numel(a) > numel(b); });
  const int threads = omp_get_max_threads();
  if (threads < 2 || matrices_.size() < 2 * static_cast<size_t>(threads)) {
    for (size_t i : matrices_) update_one(i);
    return;
  }
  reserve_workspaces(static_cast<size_t>(threads));
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t k = 0; k < matrices_.size(); ++k) {
    const size_t i = matrices_[k];
    Workspace& w = workspaces_[static_cast<size_t>(omp_get_thread_num())];
    update_matrix(params()[i], params()[i].param.grad(), state_of(i), w.update, w.scratch);
  }
}

void Muon::update(const ParamRef& p, const Tensor& grad, ParamState& s) {
  if (p.hidden_matrix) return update_matrix(p, grad, s, workspaces_[0].update, workspaces_[0].scratch);
  const AdamOptions& o = options_.adamw;
  const double weight_decay = p.decay ? o.weight_decay : 0.0;
  adam_update(p, grad, s, {lr(), o.beta1, o.beta2, o.eps, weight_decay, /*decoupled=*/true, s.step});
}

void Muon::update_matrix(const ParamRef& p, const Tensor& grad, ParamState& s, std::vector<float>& update,
                         NewtonSchulzScratch& scratch) {
  const double weight_decay = p.decay ? options_.adamw.weight_decay : 0.0;
  const MuonCoeffs c{muon_lr(), options_.momentum, weight_decay, options_.nesterov};
  const int64_t rows = p.param.dim(0), cols = p.param.dim(1);
  dispatch(p.param.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* buffer = s.slots.at("momentum_buffer").template data<T>();
    if constexpr (std::is_same_v<T, float>) {
      if (kernels::use_fast<float>())
        return muon_update_fast(p.param.data<float>(), grad.data<float>(), buffer, rows, cols, c, update.data(),
                                scratch);
    }
    muon_update_reference<T>(p.param.template data<T>(), grad.template data<T>(), buffer, rows, cols, c);
  });
}

}  // namespace tf::optim
