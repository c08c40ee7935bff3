// Differential attention: lambda's op (forward and backward side by side) and the two-map
// composite; the math is Note [differential attention] in differential_attention.h.
#include "framework/ops/differential_attention.h"

#include <cmath>

#include "framework/autograd/tape.h"
#include "framework/ops/elementwise.h"

namespace tf::ops {

namespace {

template <class T>
T dot(const Tensor& a, const Tensor& b) {
  const T* x = a.data<T>();
  const T* y = b.data<T>();
  T sum = 0;
  for (int64_t i = 0; i < a.numel(); ++i) sum += x[i] * y[i];
  return sum;
}

struct DifferentialLambdaNode : Node {
  Tensor lambda_q1, lambda_k1, lambda_q2, lambda_k2;  // saved: each one's gradient is the other times g
  double exp1 = 0, exp2 = 0;                         // saved: exp(lambda_q1 . lambda_k1), exp(lambda_q2 . lambda_k2)
  const char* op_name() const override { return "differential_lambda"; }
  void backward() override {
    const Tensor dlambda = take_output_grad();  // shape ()
    const double g = dlambda.item();
    accumulate_grad(lambda_q1, scale(lambda_k1, g * exp1));
    accumulate_grad(lambda_k1, scale(lambda_q1, g * exp1));
    accumulate_grad(lambda_q2, scale(lambda_k2, -g * exp2));
    accumulate_grad(lambda_k2, scale(lambda_q2, -g * exp2));
  }
};

// The first map's keys and the shared values; the second map's keys swapped in for its call.
KvBuffers with_keys(const KvBuffers& cache, const Tensor& keys) {
  KvBuffers out = cache;
  out.keys = keys;
  return out;
}

}  // namespace

Tensor differential_lambda(const Tensor& lambda_q1, const Tensor& lambda_k1, const Tensor& lambda_q2,
                           const Tensor& lambda_k2, double lambda_init) {
  for (const Tensor* t : {&lambda_k1, &lambda_q2, &lambda_k2}) {
    TF_CHECK(t->shape() == lambda_q1.shape() && lambda_q1.rank() == 1,
             "differential_lambda: the four vectors must be (D) each, got ", lambda_q1.describe(), " and ",
             t->describe());
    check_same_dtype("differential_lambda", lambda_q1, *t);
  }
  Tensor out = Tensor::empty({}, lambda_q1.dtype());
  double exp1 = 0, exp2 = 0;
  dispatch(lambda_q1.dtype(), [&](auto zero) {
    using T = decltype(zero);
    exp1 = std::exp(static_cast<double>(dot<T>(lambda_q1, lambda_k1)));
    exp2 = std::exp(static_cast<double>(dot<T>(lambda_q2, lambda_k2)));
    *out.data<T>() = static_cast<T>(exp1 - exp2 + lambda_init);
  });
  if (needs_grad(lambda_q1, lambda_k1, lambda_q2, lambda_k2)) {
    auto node = std::make_unique<DifferentialLambdaNode>();
    node->lambda_q1 = lambda_q1;
    node->lambda_k1 = lambda_k1;
    node->lambda_q2 = lambda_q2;
    node->lambda_k2 = lambda_k2;
    node->exp1 = exp1;
    node->exp2 = exp2;
    record(std::move(node), {out});
  }
  return out;
}

Tensor differential_attention(const Tensor& q1, const Tensor& k1, const Tensor& q2, const Tensor& k2, const Tensor& v,
                              const Tensor& lambda, const AttentionOptions& options, Tensor* weights_out) {
  TF_CHECK(q1.shape() == q2.shape() && k1.shape() == k2.shape(),
           "differential_attention: the two maps' queries and keys must match in shape, got q1 ", q1.shape(), ", q2 ",
           q2.shape(), ", k1 ", k1.shape(), ", k2 ", k2.shape());
  TF_CHECK(lambda.numel() == 1 && lambda.rank() <= 1, "differential_attention: lambda must be a scalar, got ",
           lambda.describe());
  TF_CHECK(options.dropout == 0 && !options.relative_bias.defined(),
           "differential_attention: attention dropout and T5's bias table are not supported");
  Tensor w1, w2;
  const Tensor o1 = attention(q1, k1, v, options, weights_out ? &w1 : nullptr);  // A1 V, (B, H, T_q, Dv)
  const Tensor o2 = attention(q2, k2, v, options, weights_out ? &w2 : nullptr);  // A2 V
  if (weights_out) {
    NoGradGuard no_grad;
    *weights_out = sub(w1, scale(w2, lambda.item()));  // A1 - lambda A2
  }
  return sub(o1, mul(o2, lambda));
}

Tensor differential_attention_append(const Tensor& q1, const Tensor& k1, const Tensor& q2, const Tensor& k2,
                                     const Tensor& v, const Tensor& lambda, const KvBuffers& cache,
                                     const kernels::AttentionVariant& variant) {
  TF_CHECK(cache.second_keys.defined() && cache.second_keys.shape() == cache.keys.shape(),
           "differential_attention_append: the cache must hold two key buffers of one shape, got ",
           cache.keys.describe(), " and ", cache.second_keys.describe());
  TF_CHECK(lambda.numel() == 1, "differential_attention_append: lambda must be a scalar, got ", lambda.describe());
  // Both calls write the values' rows; the second writes the same numbers again.
  const Tensor o1 = attention_append(q1, k1, v, cache, variant);
  const Tensor o2 = attention_append(q2, k2, v, with_keys(cache, cache.second_keys), variant);
  return sub(o1, scale(o2, lambda.item()));
}

}  // namespace tf::ops
