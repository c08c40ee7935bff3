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
//
// Note [mixer support]: what each mixer supports is declared once, in its row of kMixerTable; the
// configuration check (score options on score-less layers, the attention layer's options on layers
// without heads), sequence parallelism and the exports read the row.
#pragma once
#include "framework/kind_table.h"

namespace tf::layers {

enum class MixerKind { attention, linear, differential, mamba };

struct MixerRow {
  MixerKind kind;
  const char* name;
  bool heads;         // a multi-head layer (layers/attention.h): Note [attention layer options] acts on it
  bool forms_scores;  // softmax scores exist: ALiBi, T5, RoPE, windows and attention dropout act on it
  bool ring;          // sequence parallelism runs it round the ring (train.sequence_parallel)
  bool exports;       // llama.cpp's llama / gpt2 and the Hugging Face classes express it
};
inline constexpr MixerRow kMixerTable[] = {
    {MixerKind::attention, "attention", true, true, true, true},
    {MixerKind::linear, "linear", true, false, false, false},
    {MixerKind::differential, "differential", true, true, false, false},
    {MixerKind::mamba, "mamba", false, false, false, false},
};

inline constexpr const MixerRow& mixer_row(MixerKind kind) { return row_of(kMixerTable, kind); }
inline const char* mixer_name(MixerKind kind) { return mixer_row(kind).name; }
inline constexpr auto kMixerKinds = kinds_of(kMixerTable);  // the recipe's choices, in the table's order

}  // namespace tf::layers
