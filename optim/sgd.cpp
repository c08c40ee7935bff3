// SGD with momentum and Nesterov: the update kernels (reference and fast) and the optimizer; see sgd.h.
#include "optim/sgd.h"

#include "framework/kernels/mode.h"

namespace tf::optim {


template <class T>
void sgd_update_reference(T* param, const T* grad, T* momentum_buffer, int64_t n, const SgdCoeffs& c) {
  for (int64_t i = 0; i < n; ++i) {
    double d = static_cast<double>(grad[i]) + c.weight_decay * static_cast<double>(param[i]);
    if (momentum_buffer) {
      const double b = c.momentum * static_cast<double>(momentum_buffer[i]) + d;
      momentum_buffer[i] = static_cast<T>(b);
      d = c.nesterov ? d + c.momentum * b : b;
    }
    param[i] = static_cast<T>(static_cast<double>(param[i]) - c.lr * d);
  }
}
template void sgd_update_reference<float>(float*, const float*, float*, int64_t, const SgdCoeffs&);
template void sgd_update_reference<double>(double*, const double*, double*, int64_t, const SgdCoeffs&);

// Below this many elements the OpenMP fork costs more than the loop.
constexpr int64_t kParallelMin = 1 << 15;

void sgd_update_fast(float* param, const float* grad, float* momentum_buffer, int64_t n, const SgdCoeffs& c) {
  const float lr = static_cast<float>(c.lr), mu = static_cast<float>(c.momentum),
              wd = static_cast<float>(c.weight_decay);
  if (!momentum_buffer) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t i = 0; i < n; ++i) param[i] -= lr * (grad[i] + wd * param[i]);
    return;
  }
  const bool nesterov = c.nesterov;
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float d = grad[i] + wd * param[i];
    const float b = mu * momentum_buffer[i] + d;
    momentum_buffer[i] = b;
    param[i] -= lr * (nesterov ? d + mu * b : b);
  }
}

Sgd::Sgd(std::vector<ParamRef> params, const SgdOptions& options)
    : Optimizer(std::move(params), options.lr, "sgd",
                options.momentum > 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{}),
      options_(options) {
  TF_CHECK_INPUT(options.momentum >= 0 && options.momentum < 1, "sgd: momentum must be in [0, 1), got ",
                 options.momentum);
  TF_CHECK_INPUT(!options.nesterov || options.momentum > 0, "sgd: nesterov needs momentum > 0");
  TF_CHECK_INPUT(options.weight_decay >= 0, "sgd: weight_decay must be >= 0, got ", options.weight_decay);
}

void Sgd::update(const ParamRef& p, const Tensor& grad, ParamState& s) {
  const SgdCoeffs c{lr(), options_.momentum, p.decay ? options_.weight_decay : 0.0, options_.nesterov};
  const int64_t n = p.param.numel();
  dispatch(p.param.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* buffer = options_.momentum > 0 ? s.slots.at("momentum_buffer").template data<T>() : nullptr;
    if constexpr (std::is_same_v<T, float>) {
      if (kernels::use_fast<float>()) return sgd_update_fast(p.param.data<float>(), grad.data<float>(), buffer, n, c);
    }
    sgd_update_reference<T>(p.param.template data<T>(), grad.template data<T>(), buffer, n, c);
  });
}

}  // namespace tf::optim
