// Muon (Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural networks",
// https://kellerjordan.github.io/posts/muon/, the optimizer of the modded-nanogpt speedruns): the
// hidden weight matrices take momentum, orthogonalised by a Newton-Schulz iteration; every other
// parameter (embeddings, the output head, biases, norms, anything not 2-D) takes AdamW, in the same
// optimizer object. Which parameters are hidden matrices is ParamRef::hidden_matrix, set by the
// caller (train/run.cpp: a 2-D ParamKind::weight other than lm_head.weight).
//
// A hidden matrix W of shape (R, C) (PyTorch's (out, in)) with gradient G, per step:
//   B = mu B + (1 - mu) G                   momentum buffer, an average of gradients (0 before step 1)
//   U = nesterov ? (1 - mu) G + mu B : B    Nesterov's look-ahead, in the form of Jordan's code
//   O = NS5(U)                              ~ the orthogonal factor of U (Note [Newton-Schulz], muon.cpp)
//   eta = muon_lr * lr / adamw.lr           the schedule scales both rates by one factor
//   W = W (1 - eta wd)                      decoupled decay (decay params only), before the step, as AdamW
//   W = W - eta sqrt(max(1, R / C)) O
// The sqrt(max(1, R / C)) is Jordan's scaling (his Muon and modded-nanogpt): O's entries have RMS
// about 1 / sqrt(max(R, C)), and a tall matrix (R > C) gets the larger step its fan-out asks for.
// muon_lr 0.02 is the rate tuned for this scaling. The alternative, 0.2 sqrt(max(R, C)) (Liu et al.
// 2025, "Muon is Scalable for LLM Training"), matches AdamW's update RMS so that one
// rate serves both kinds of parameter; we keep Muon's own rate instead, as the recipe has a key for it.
//
//   Muon opt(params, {.lr = 0.02, .momentum = 0.95, .adamw = {.lr = 1e-3, .weight_decay = 0.1}});
#pragma once
#include <vector>

#include "optim/adam.h"

namespace tf::optim {

struct MuonOptions {
  double lr = 0.02;        // hidden matrices' rate at the schedule's peak, e.g. 0.02 (Jordan et al.)
  double momentum = 0.95;  // mu
  bool nesterov = true;
  AdamOptions adamw;       // every other parameter; adamw.lr is the rate the schedule sets (lr())
                           // and adamw.weight_decay decays the hidden matrices too
};

// Buffers of the fast Newton-Schulz kernel, sized for the largest matrix so that steps allocate
// nothing (with m = min(R, C), n = max(R, C)).
struct NewtonSchulzScratch {
  std::vector<float> x, y;      // (m, n): the iterate and the next one
  std::vector<float> gram;      // (m, m): A = X X^T
  std::vector<float> poly;      // (m, m): b A + c A^2
  void reserve(int64_t rows, int64_t cols);  // grows, never shrinks
};

constexpr int kNewtonSchulzSteps = 5;
// out (rows, cols) = NS5(g): 5 quintic Newton-Schulz iterations from g / (||g||_F + 1e-7). out may
// be g itself. The reference: plain loops in double (the test oracle; it allocates its temporaries).
template <class T>
void newton_schulz_reference(const T* g, T* out, int64_t rows, int64_t cols);
// The fast float32 path: the products through kernels::matmul_fast (oneDNN, as the linear layers).
void newton_schulz_fast(const float* g, float* out, int64_t rows, int64_t cols, NewtonSchulzScratch& scratch);

// One Muon update of a (rows, cols) matrix; weight_decay is 0 for exempt parameters.
struct MuonCoeffs {
  double lr, momentum, weight_decay;  // lr: this step's eta
  bool nesterov;
};
// The reference: momentum, U and O in double, stored back as T. The test oracle.
template <class T>
void muon_update_reference(T* param, const T* grad, T* momentum_buffer, int64_t rows, int64_t cols,
                           const MuonCoeffs& c);
// The fast float32 path; `update` holds rows * cols floats.
void muon_update_fast(float* param, const float* grad, float* momentum_buffer, int64_t rows, int64_t cols,
                      const MuonCoeffs& c, float* update, NewtonSchulzScratch& scratch);

class Muon : public Optimizer {
 public:
  explicit Muon(std::vector<ParamRef> params, const MuonOptions& options = {});
  const MuonOptions& options() const { return options_; }
  // eta: options.lr scaled by the factor the schedule applied to options.adamw.lr.
  double muon_lr() const { return options_.lr * (lr() / options_.adamw.lr); }

 protected:
  void update(const ParamRef& p, const Tensor& grad, ParamState& s) override;
  // The AdamW parameters in turn, then the hidden matrices spread over threads (Note [one matrix per thread]).
  void update_all(const std::vector<size_t>& due) override;
  // Hidden matrices keep momentum_buffer; the rest AdamW's exp_avg and exp_avg_sq.
  const std::vector<std::string>& slot_names(const ParamRef& p) const override;

 private:
  MuonOptions options_;
  std::vector<std::string> matrix_slots_ = {"momentum_buffer"};
  // One hidden matrix's update with the given buffers; fast float32 or the reference.
  void update_matrix(const ParamRef& p, const Tensor& grad, ParamState& s, std::vector<float>& update,
                     NewtonSchulzScratch& scratch);
  // Buffers of one thread: U then O, (R, C) of the largest hidden matrix; the Newton-Schulz scratch.
  struct Workspace {
    std::vector<float> update;
    NewtonSchulzScratch scratch;
  };
  void reserve_workspaces(size_t count);  // grows to `count` threads' buffers, never shrinks
  std::vector<Workspace> workspaces_;
  int64_t largest_numel_ = 0;
  std::vector<size_t> matrices_;  // this step's hidden matrices, largest first
};

}  // namespace tf::optim
