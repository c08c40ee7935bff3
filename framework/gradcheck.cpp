// Finite-difference gradient checks; see gradcheck.h.
#include "framework/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "framework/autograd/tape.h"

namespace tf {

bool GradcheckReport::passed() const {
  return std::all_of(tensors.begin(), tensors.end(), [](const auto& t) { return t.passed(); });
}

double GradcheckReport::max_rel_error() const {
  double m = 0;
  for (const auto& t : tensors) m = std::max(m, t.max_rel_error);
  return m;
}

double GradcheckReport::max_abs_error() const {
  double m = 0;
  for (const auto& t : tensors) m = std::max(m, t.max_abs_error);
  return m;
}

std::string GradcheckReport::to_string() const {
  std::ostringstream out;
  out << std::scientific << std::setprecision(2);
  for (const auto& t : tensors) {
    out << "  " << t.name << " " << t.shape << ": max abs err " << t.max_abs_error << ", max rel err "
        << t.max_rel_error << ", failures " << t.failures << (t.shifted ? ", moved off kinks " : "")
        << (t.shifted ? std::to_string(t.shifted) : "");
    if (t.worst_index >= 0)
      out << "; worst at " << index_in(t.shape, t.worst_index) << ": backward " << std::setprecision(6)
          << t.worst_analytic << ", finite differences " << t.worst_numeric << std::setprecision(2);
    out << "\n";
  }
  return out.str();
}

std::string index_in(const Shape& shape, int64_t i) {
  std::vector<int64_t> at(shape.rank());
  for (int d = shape.rank() - 1; d >= 0; --d) {
    at[d] = shape[d] > 0 ? i % shape[d] : 0;
    i = shape[d] > 0 ? i / shape[d] : 0;
  }
  std::string s = "[";
  for (size_t d = 0; d < at.size(); ++d) s += (d ? ", " : "") + std::to_string(at[d]);
  return s + "]";
}

std::string gradcheck_rule(const GradcheckOptions& o) {
  std::ostringstream s;
  s << "Each input's gradient from the tape (backward) is compared, element by element, with central\n"
    << "finite differences in float64: (L(x + eps) - L(x - eps)) / (2 eps), eps = " << o.eps << ", where\n"
    << "L = sum(w * f(inputs)) with fixed random weights w, so every output element counts. An element\n"
    << "passes when |backward - numeric| <= " << o.rtol << " max(|backward|, |numeric|), or, for gradients\n"
    << "near 0, <= " << o.atol << " max(1, |L|). Points where the function has a kink (ReLU at 0) are moved\n"
    << "by " << o.kink_shift << " first. Columns: the largest absolute and relative error over the elements,\n"
    << "and where the relative error is largest, the two values compared there.\n";
  return s.str();
}

namespace {

// L = sum(w * f(inputs)), evaluated without recording.
double projected_loss(const GradcheckFn& f, const std::vector<Tensor>& inputs, const Tensor& weights) {
  NoGradGuard no_grad;
  const Tensor out = f(inputs);
  TF_CHECK(out.shape() == weights.shape(), "gradcheck: the function's output shape changed");
  const double* o = out.data<double>();
  const double* w = weights.data<double>();
  double sum = 0;
  for (int64_t i = 0, n = out.numel(); i < n; ++i) sum += w[i] * o[i];
  return sum;
}

}  // namespace

GradcheckReport gradcheck(const GradcheckFn& f, std::vector<Tensor> inputs, std::vector<std::string> names,
                          const GradcheckOptions& opt) {
  for (size_t i = names.size(); i < inputs.size(); ++i) names.push_back("input " + std::to_string(i));
  for (const Tensor& t : inputs)
    TF_CHECK(t.dtype() == DType::f64, "gradcheck: inputs must be float64, got ", t.describe());

  Tensor weights;
  {
    NoGradGuard no_grad;
    Rng rng(opt.seed);
    weights = rand_uniform(f(inputs).shape(), rng, 0.5, 1.5, DType::f64);
  }
  auto loss = [&] { return projected_loss(f, inputs, weights); };

  GradcheckReport report;
  std::vector<int64_t> shifted(inputs.size(), 0);
  // Move elements that sit on a kink: one-sided differences disagree there.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    double* x = inputs[i].data<double>();
    for (int64_t j = 0; j < inputs[i].numel(); ++j) {
      const double x0 = x[j], l0 = loss();
      x[j] = x0 + opt.eps;
      const double right = (loss() - l0) / opt.eps;
      x[j] = x0 - opt.eps;
      const double left = (l0 - loss()) / opt.eps;
      x[j] = x0;
      if (std::abs(right - left) > 1e-3 * (std::abs(right) + std::abs(left)) + 1e-4) {
        x[j] = x0 + opt.kink_shift;
        ++shifted[i];
      }
    }
  }

  // Analytic gradients from the tape.
  for (Tensor& t : inputs) t.zero_grad();
  const double l0 = loss();
  {
    const Tensor out = f(inputs);
    TF_CHECK(out.requires_grad(), "gradcheck: the output does not depend on any checked input");
    tape().backward(out, weights);
  }
  const double floor = opt.atol * std::max(1.0, std::abs(l0));

  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    TensorGradCheck check{names[i], inputs[i].shape()};
    check.shifted = shifted[i];
    const Tensor grad = inputs[i].grad();
    double* x = inputs[i].data<double>();
    for (int64_t j = 0; j < inputs[i].numel(); ++j) {
      const double x0 = x[j];
      x[j] = x0 + opt.eps;
      const double up = loss();
      x[j] = x0 - opt.eps;
      const double down = loss();
      x[j] = x0;
      const double numeric = (up - down) / (2 * opt.eps);
      const double analytic = grad.defined() ? grad.data<double>()[j] : 0.0;
      const double abs_err = std::abs(analytic - numeric);
      // Relative to the larger magnitude, but never to less than floor / rtol: then rel_err <= rtol
      // holds exactly when the error is within rtol relative or within the absolute floor.
      const double rel_err = abs_err / std::max({std::abs(analytic), std::abs(numeric), floor / opt.rtol});
      check.max_abs_error = std::max(check.max_abs_error, abs_err);
      if (check.worst_index < 0 || !(rel_err <= check.max_rel_error))  // NaN counts as worst
        check.worst_index = j, check.worst_analytic = analytic, check.worst_numeric = numeric;
      check.max_rel_error = std::max(check.max_rel_error, rel_err);
      if (!(rel_err <= opt.rtol)) ++check.failures;  // NaN fails too
    }
    report.tensors.push_back(check);
  }
  for (Tensor& t : inputs) t.zero_grad();
  return report;
}

Tensor gradcheck_input(Rng& rng, const Shape& shape, const std::string& name, double std) {
  return randn(shape, rng, std, DType::f64).set_requires_grad().set_name(name);
}

GradcheckReport run_op_case(const OpCase& c) {
  Rng rng(c.options.seed);
  std::vector<Tensor> inputs = c.make_inputs(rng);
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i)
    names.push_back(inputs[i].name().empty() ? "input " + std::to_string(i) : inputs[i].name());
  return gradcheck(c.forward, inputs, names, c.options);
}

}  // namespace tf
