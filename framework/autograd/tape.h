// The autograd tape: a Wengert list of nodes recorded during the forward pass, replayed in reverse.
//
// What a node holds: the op's name, its inputs and outputs (Tensor handles), the tensors its
// backward needs ("saved tensors", as named members of the node's struct) and its typed
// attributes (also named members). Each op defines its node struct next to its forward function,
// in the same file, with the same argument names (see framework/ops/).
//
// Who owns what: the tape owns its nodes; a node owns handles on its saved tensors, which keeps
// their storage alive until the node has run its backward, and gradient slots (GradRef) of its
// outputs and of the inputs it needs no values of. backward() runs each node once, newest first,
// then destroys it, releasing its saved tensors at once; when the walk ends the tape is empty.
// Gradients of intermediate (non-leaf) tensors are released as soon as the node that produced
// them has run.
//
// Note [gradient slots]: a tensor's gradient lives in a GradSlot that its TensorImpl shares with
// every GradRef taken of it. A node that only hands a gradient on (the input of an add, of
// split_heads, of a reshape; its own outputs) holds the slot, not the tensor, so an activation
// whose values no backward needs (the fused QKV projection, the residual branches) is freed as
// soon as the forward pass drops it, instead of living until backward. A gradient can still
// reach it: whoever adds to the slot holds it.
//
// The gradient rule: backward functions call accumulate_grad(input, d_input). The first
// contribution to a tensor's gradient is assigned, later ones are summed, so a tensor used twice
// receives the sum. Leaf tensors (parameters) keep their gradient across backward calls and keep
// accumulating (+=) until the optimizer zeroes it.
//
// Recording happens only when grad mode is on (see NoGradGuard) and some input requires grad.
//
//   Tensor w = Tensor::full({3}, 2.0).set_requires_grad();
//   Tensor loss = ops::sum(ops::mul(w, w));   // records two nodes
//   backward(loss);                           // w.grad() == 2 w; the tape is empty again
#pragma once
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "framework/object_pool.h"
#include "framework/tensor.h"

namespace tf {

// A tensor's gradient slot without its values (Note [gradient slots]): what a node keeps of a
// tensor it must hand a gradient to but whose values its backward does not read: the slot and the
// tensor's shape and dtype. Without a slot when the tensor did not require grad when the node was
// recorded; accumulating into it then does nothing.
class GradRef {
 public:
  GradRef() = default;
  explicit GradRef(const Tensor& t);
  bool requires_grad() const { return slot_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int axis) const { return shape_[axis]; }
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  bool has_grad() const { return slot_ && slot_->grad; }
  Tensor grad() const { return slot_ ? Tensor(slot_->grad) : Tensor(); }
  // The gradient, taken out of the slot (see Node::take_output_grad).
  Tensor take_grad() { return slot_ ? Tensor(std::move(slot_->grad)) : Tensor(); }
  GradSlot* slot() const { return slot_.get(); }

 private:
  std::shared_ptr<GradSlot> slot_;
  Shape shape_;
  DType dtype_ = DType::f32;
};

struct Node {
  virtual ~Node() = default;
  // Nodes come from the object pool (framework/object_pool.h): an op records one per call, so a
  // warm step would otherwise ask malloc for one per op. Sized delete: the virtual destructor
  // passes the size of the node's own type.
  static void* operator new(size_t bytes);
  static void* operator new(size_t bytes, std::align_val_t alignment);
  static void operator delete(void* p, size_t bytes);
  static void operator delete(void* p, size_t bytes, std::align_val_t alignment);
  virtual const char* op_name() const = 0;
  // Reads the gradients of `outputs` and calls accumulate_grad on each input that needs one.
  virtual void backward() = 0;
  // Slots only: a backward that reads an output's values saves it. Pooled, as the node is.
  std::pmr::vector<GradRef> outputs{object_pool::allocator<GradRef>()};
  std::string layer;             // the layer path when recorded, kept only in anomaly mode (see LayerScope)
  // The gradient of outputs[i], taken from it: backward is its last reader (the tape releases an
  // intermediate gradient right after the node has run), so an input may adopt it without a copy
  // (see accumulate_grad). Call once per output, instead of outputs[i].grad().
  Tensor take_output_grad(size_t i = 0) { return outputs[i].take_grad(); }
};

class Tape {
 public:
  // Marks `outputs` as produced by `node` and appends the node, which keeps their gradient slots.
  void record(std::unique_ptr<Node> node, std::span<const Tensor> outputs);
  void backward(const Tensor& loss);
  void backward(const Tensor& root, const Tensor& root_grad);  // for non-scalar roots
  void clear();
  size_t size() const { return nodes_.size(); }
  uint64_t generation() const { return generation_; }
  // Called during backward after each node has run and been destroyed, so a caller can act on the
  // gradients no later node can touch (train/grad_sync.h launches all-reduces). nullptr removes it.
  using NodeDoneHook = void (*)(void* context);
  void set_node_done_hook(NodeDoneHook hook, void* context) {
    node_done_ = hook;
    node_done_context_ = context;
  }

 private:
  void run_backward();  // the reverse walk itself, newest node first

  std::vector<std::unique_ptr<Node>> nodes_;
  uint64_t generation_ = 1;  // bumped on every clear, so stale tensors are recognised
  NodeDoneHook node_done_ = nullptr;
  void* node_done_context_ = nullptr;
};

Tape& tape();  // this thread's tape: the one ops record onto (a ReplayScope's, while one lives)

// Recomputation (Note [recomputed blocks] in layers/block.cpp): a node's backward may run part of
// the forward pass again, with grad on, onto a tape of its own, and run that tape's backward from
// the result with the gradient the node received. The replayed ops add to the gradient slots of
// the tensors they read (the node's saved input, the parameters) as the originals would have.
//
//   ReplayScope replay;                       // tape() is now an empty tape; grad mode is on
//   const Tensor y = f(x);                    // recorded there
//   replay.backward(y, take_output_grad());   // adds to x's and the parameters' gradients
//
// Scopes nest (a replayed forward may replay in turn); each depth keeps its tape, so a warm step
// allocates nothing here.
class ReplayScope {
 public:
  ReplayScope();
  ~ReplayScope();
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;
  void backward(const Tensor& root, const Tensor& root_grad);

 private:
  Tape* previous_tape_;
  bool previous_grad_enabled_;
};

// Grad mode: while a NoGradGuard lives, ops record nothing and outputs do not require grad.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Anomaly detection: while on, every recorded op's outputs are checked, and the first non-finite
// value throws an Error naming the op, the layer it ran in and its position on the tape (the
// trainer adds the step). During backward, every gradient an op's backward passes to
// accumulate_grad is checked too, naming the op and layer whose backward produced it.
// Costs one pass over each output and gradient; off by default.
void set_anomaly_detection(bool on);
bool anomaly_detection();

// The layer path ("blocks.2.attn"): layers name the sublayers they run, with the same names as
// their parameters, so an anomaly says where in the model it appeared. Scopes nest:
//
//   LayerScope block("blocks", 2);   // "blocks.2"
//   { LayerScope a("attn"); ... }    // ops recorded here are in "blocks.2.attn"
//
// Outside anomaly mode a LayerScope does nothing but test a flag.
class LayerScope {
 public:
  explicit LayerScope(const char* name, int64_t index = -1);
  ~LayerScope();
  LayerScope(const LayerScope&) = delete;
  LayerScope& operator=(const LayerScope&) = delete;

 private:
  size_t previous_length_;
};
const std::string& layer_path();  // this thread's current path; empty outside every scope

// True when an op over these inputs must be recorded.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
template <class... Ts>
bool needs_grad(const Ts&... inputs) {
  return needs_grad({&inputs...});
}

// Records `node` producing `outputs` if grad is needed (the op computed that with needs_grad).
// The list form, record(std::move(node), {out}), builds no vector.
template <class NodeT>
void record(std::unique_ptr<NodeT> node, std::initializer_list<Tensor> outputs) {
  tape().record(std::move(node), std::span<const Tensor>(outputs.begin(), outputs.size()));
}
template <class NodeT>
void record(std::unique_ptr<NodeT> node, std::span<const Tensor> outputs) {
  tape().record(std::move(node), outputs);
}

// The gradient rule (see the top of this file): assign on first contribution, sum afterwards.
// Does nothing when `t` does not require grad.
void accumulate_grad(const Tensor& t, const Tensor& grad);
// The same for a temporary: when it is the sole owner of its whole storage (a gradient a backward
// function has just computed), its storage becomes the gradient without a copy.
void accumulate_grad(const Tensor& t, Tensor&& grad);
// The same into a gradient slot.
void accumulate_grad(const GradRef& t, const Tensor& grad);
void accumulate_grad(const GradRef& t, Tensor&& grad);

// backward on this thread's tape.
inline void backward(const Tensor& loss) { tape().backward(loss); }

}  // namespace tf
