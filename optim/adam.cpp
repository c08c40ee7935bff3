// Adam and AdamW: the update kernels (reference and fast) and the optimizers; see adam.h.
#include "optim/adam.h"

#include <cmath>

#include "framework/kernels/mode.h"

namespace tf::optim {

template <class T>
void adam_update_reference(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t n, const AdamCoeffs& c) {
  const double step_size = c.lr / (1 - std::pow(c.beta1, static_cast<double>(c.step)));
  const double bias_correction2_sqrt = std::sqrt(1 - std::pow(c.beta2, static_cast<double>(c.step)));
  for (int64_t i = 0; i < n; ++i) {
    double p = param[i], g = grad[i];
    if (c.decoupled) p *= 1 - c.lr * c.weight_decay;
    else g += c.weight_decay * p;
    const double m = c.beta1 * static_cast<double>(exp_avg[i]) + (1 - c.beta1) * g;
    const double v = c.beta2 * static_cast<double>(exp_avg_sq[i]) + (1 - c.beta2) * g * g;
    exp_avg[i] = static_cast<T>(m);
    exp_avg_sq[i] = static_cast<T>(v);
    param[i] = static_cast<T>(p - step_size * m / (std::sqrt(v) / bias_correction2_sqrt + c.eps));
  }
}
template void adam_update_reference<float>(float*, const float*, float*, float*, int64_t, const AdamCoeffs&);
template void adam_update_reference<double>(double*, const double*, double*, double*, int64_t, const AdamCoeffs&);

// Below this many elements the OpenMP fork costs more than the loop.
constexpr int64_t kParallelMin = 1 << 15;

void adam_update_fast(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                      const AdamCoeffs& c) {
  // Scalars are formed in double and rounded once, as PyTorch forms them in Python floats.
  const float step_size = static_cast<float>(c.lr / (1 - std::pow(c.beta1, static_cast<double>(c.step))));
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(c.beta2, static_cast<double>(c.step))));
  const float beta1 = static_cast<float>(c.beta1), beta2 = static_cast<float>(c.beta2);
  const float one_minus_beta1 = static_cast<float>(1 - c.beta1), one_minus_beta2 = static_cast<float>(1 - c.beta2);
  const float eps = static_cast<float>(c.eps);
  // AdamW multiplies p by (1 - lr wd); Adam adds wd p to g. One of the two is the identity.
  const float decay_factor = static_cast<float>(c.decoupled ? 1 - c.lr * c.weight_decay : 1.0);
  const float l2 = static_cast<float>(c.decoupled ? 0.0 : c.weight_decay);
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float p = param[i] * decay_factor;
    const float g = grad[i] + l2 * param[i];
    const float m = beta1 * exp_avg[i] + one_minus_beta1 * g;
    const float v = beta2 * exp_avg_sq[i] + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p - step_size * m / (std::sqrt(v) / bias_correction2_sqrt + eps);
  }
}

Adam::Adam(std::vector<ParamRef> params, const AdamOptions& options) : Adam(std::move(params), options, false, "adam") {}

Adam::Adam(std::vector<ParamRef> params, const AdamOptions& options, bool decoupled, const char* kind)
    : Optimizer(std::move(params), options.lr, kind, {"exp_avg", "exp_avg_sq"}), options_(options),
      decoupled_(decoupled) {
  check_adam_options(options, kind);
}

void check_adam_options(const AdamOptions& options, const char* kind) {
  TF_CHECK_INPUT(options.beta1 >= 0 && options.beta1 < 1, kind, ": beta1 must be in [0, 1), got ", options.beta1);
  TF_CHECK_INPUT(options.beta2 >= 0 && options.beta2 < 1, kind, ": beta2 must be in [0, 1), got ", options.beta2);
  TF_CHECK_INPUT(options.eps >= 0, kind, ": eps must be >= 0, got ", options.eps);
  TF_CHECK_INPUT(options.weight_decay >= 0, kind, ": weight_decay must be >= 0, got ", options.weight_decay);
}

void adam_update(const ParamRef& p, const Tensor& grad, ParamState& s, const AdamCoeffs& c) {
  const int64_t n = p.param.numel();
  dispatch(p.param.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* exp_avg = s.slots.at("exp_avg").template data<T>();
    T* exp_avg_sq = s.slots.at("exp_avg_sq").template data<T>();
    if constexpr (std::is_same_v<T, float>) {
      if (kernels::use_fast<float>())
        return adam_update_fast(p.param.data<float>(), grad.data<float>(), exp_avg, exp_avg_sq, n, c);
    }
    adam_update_reference<T>(p.param.template data<T>(), grad.template data<T>(), exp_avg, exp_avg_sq, n, c);
  });
}

void Adam::update(const ParamRef& p, const Tensor& grad, ParamState& s) {
  adam_update(p, grad, s, {lr(), options_.beta1, options_.beta2, options_.eps,
                           p.decay ? options_.weight_decay : 0.0, decoupled_, s.step});
}

}  // namespace tf::optim
