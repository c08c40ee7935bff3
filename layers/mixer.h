// Sequence mixers: the sublayer of a block through which positions see each other. A recipe picks
// one per layer (`model.mixer`, a list repeated over the layers, e.g. [attention, linear]).
//
//   attention  softmax attention, softmax(q k^T / sqrt(D) + mask) v (Vaswani et al. 2017), with
//              every position scheme and mask variant (framework/ops/attention.h)
//   linear     linear attention, phi(q) phi(k)^T v with phi = elu + 1 (Katharopoulos et al. 2020):
//              O(T D^2) and a constant decode state (framework/ops/linear_attention.h)
//   differential  two softmax maps subtracted, (A1 - lambda A2) V (Ye et al. 2024): each pair of
//              heads becomes one head of twice the value size (framework/ops/differential_attention.h)
//   mamba      a selective state-space block (Gu & Dao 2023): a causal convolution and an
//              input-dependent linear recurrence, O(T) and a constant decode state (layers/mamba.h)
//
// The first three are multi-head layers with the same projections (layers/attention.h): only the op
// between the projections differs (differential attention adds its lambda vectors and a per-head
// norm). A Mamba layer has projections of its own (layers/mamba.h) and no heads.
#pragma once

namespace tf::layers {

enum class MixerKind { attention, linear, differential, mamba };
inline constexpr MixerKind kMixerKinds[] = {MixerKind::attention, MixerKind::linear, MixerKind::differential,
                                            MixerKind::mamba};

inline const char* mixer_name(MixerKind kind) {
  switch (kind) {
    case MixerKind::attention: return "attention";
    case MixerKind::linear: return "linear";
    case MixerKind::differential: return "differential";
    case MixerKind::mamba: return "mamba";
  }
  return "?";
}

}  // namespace tf::layers
