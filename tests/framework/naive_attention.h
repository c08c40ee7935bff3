// Attention written from its definition in double, one (b, h, i) row at a time, for tests of the
// masks and score modifiers: softmax over the visible keys j of (q.k / sqrt(D) + bias(h, p, j)),
// times V, where p = i + T_k - T_q is query i's position. Rows with no visible key are 0. Scores in
// these tests are small, so no max is subtracted.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "framework/tensor.h"

namespace tf::testing {

template <class Visible, class Bias>
Tensor naive_attention_rows(const Tensor& q, const Tensor& k, const Tensor& v, Visible visible, Bias bias) {
  const int64_t B = q.dim(0), H = q.dim(1), Tq = q.dim(2), D = q.dim(3), G = k.dim(1), Tk = k.dim(2);
  const std::vector<double> Q = q.to_vector(), K = k.to_vector(), V = v.to_vector();
  std::vector<double> out(B * H * Tq * D, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t p = i + Tk - Tq, kv = b * G + h / (H / G), row = (b * H + h) * Tq + i;
        std::vector<double> w(Tk, 0.0);
        double total = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!visible(b, p, j)) continue;
          double s = 0;
          for (int64_t c = 0; c < D; ++c) s += Q[row * D + c] * K[(kv * Tk + j) * D + c];
          total += w[j] = std::exp(s / std::sqrt(static_cast<double>(D)) + bias(h, p, j));
        }
        for (int64_t j = 0; j < Tk && total > 0; ++j)
          for (int64_t c = 0; c < D; ++c) out[row * D + c] += w[j] / total * V[(kv * Tk + j) * D + c];
      }
  return Tensor::from_vector(out, {B, H, Tq, D}, DType::f64);
}

}  // namespace tf::testing
