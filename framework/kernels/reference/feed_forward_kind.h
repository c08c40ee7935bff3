// Note [feed-forward kinds]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The feed-forward sublayer's form (model.feed_forward), one row each: its name, whether fc makes a
// gate and a value, y = act(gate) * value (Dauphin et al. 2017; Shazeer 2020, "GLU Variants Improve
// Transformer"), or one hidden vector, y = act(h), and the activation with its derivative. GELU's
// row names no function: its form is model.gelu's (tanh or erf), fused into proj (ops::gelu_linear).
// The layer (layers/feed_forward.cpp), the ops (ops::glu for gated kinds, ops::feed_forward_activation
// for the others), the gradient check, the recipe's choices, the memory plan and the exports read
// this table, so a new kind is a value of the enum and a row here.
#pragma once
#include <cmath>

#include "framework/kind_table.h"

namespace tf::kernels {

enum class FeedForwardKind { gelu, swiglu, relu2 };

struct FeedForwardKindRow {
  FeedForwardKind kind;
  const char* name;
  bool gated;                      // fc makes [gate | value], each of width d_ff
  double (*activation)(double);    // act(x); null for GELU (model.gelu decides it)
  double (*derivative)(double);    // act'(x)
};

// SiLU (Swish with beta = 1; Ramachandran et al. 2017): x sigmoid(x); with s = sigmoid(x) its
// derivative is s (1 + x (1 - s)). exp(-x) = inf for x very negative: 1 / inf = 0, as it should.
inline double silu(double x) { return x / (1 + std::exp(-x)); }
inline double silu_derivative(double x) {
  const double s = 1 / (1 + std::exp(-x));
  return s * (1 + x * (1 - s));
}

// Squared ReLU (So et al. 2021, "Primer", section 4; the modded-nanogpt speedruns): max(x, 0)^2,
// derivative 2 max(x, 0).
inline double relu2(double x) { return x > 0 ? x * x : 0; }
inline double relu2_derivative(double x) { return x > 0 ? 2 * x : 0; }

inline constexpr FeedForwardKindRow kFeedForwardKindTable[] = {
    {FeedForwardKind::gelu, "gelu", false, nullptr, nullptr},
    {FeedForwardKind::swiglu, "swiglu", true, silu, silu_derivative},
    {FeedForwardKind::relu2, "relu2", false, relu2, relu2_derivative},
};

inline constexpr const FeedForwardKindRow& feed_forward_row(FeedForwardKind kind) {
  return row_of(kFeedForwardKindTable, kind);
}
inline const char* feed_forward_kind_name(FeedForwardKind kind) { return feed_forward_row(kind).name; }
inline bool gated(FeedForwardKind kind) { return feed_forward_row(kind).gated; }

inline constexpr auto kFeedForwardKinds = kinds_of(kFeedForwardKindTable);  // the recipe's choices, in order

}  // namespace tf::kernels
