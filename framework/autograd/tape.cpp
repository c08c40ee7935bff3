// The tape's reverse walk and the gradient accumulation rule; see tape.h.
#include "framework/autograd/tape.h"

#include <cmath>
#include <utility>

#include "framework/autograd/private_grads.h"
#include "framework/autograd/profile.h"

namespace tf {

namespace {
thread_local bool g_grad_enabled = true;
thread_local bool g_anomaly = false;
thread_local std::string g_layer_path;
// In anomaly mode, the node whose backward is running and its position on the tape.
thread_local const Node* g_backward_node = nullptr;
thread_local size_t g_backward_position = 0;

// Index of the first non-finite element of a float tensor, or -1.
int64_t first_non_finite(const Tensor& t) {
  if (t.dtype() == DType::i32) return -1;
  return dispatch(t.dtype(), [&](auto zero) -> int64_t {
    const auto* p = t.data<decltype(zero)>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i)
      if (!std::isfinite(p[i])) return i;
    return -1;
  });
}

// " in layer 'blocks.0.attn'", or nothing outside every layer.
std::string in_layer(const std::string& path) { return path.empty() ? std::string() : concat(" in layer '", path, "'"); }

// In anomaly mode, the gradient a backward function passes for `t` must be finite.
void check_backward_gradient(const Shape& input_shape, const Tensor& grad) {
  if (!g_anomaly || g_backward_node == nullptr) return;
  const int64_t bad = first_non_finite(grad);
  TF_CHECK(bad < 0, "anomaly: the backward of op '", g_backward_node->op_name(), "'", in_layer(g_backward_node->layer),
           " (op ", g_backward_position, " of the forward pass) produced ", grad.at(bad), " at element ", bad,
           " of the gradient for its input ", input_shape);
}

// The gradient rule on one slot, the checks done: assign a copy on first contribution, sum afterwards.
void add_to_slot(GradSlot& slot, const Tensor& grad) {
  if (!slot.grad) {
    slot.grad = grad.clone().impl_ptr();
    return;
  }
  dispatch(grad.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* g = Tensor(slot.grad).data<T>();
    const T* d = grad.data<T>();
    for (int64_t i = 0, n = grad.numel(); i < n; ++i) g[i] += d[i];
  });
}

// The same for a gradient nobody else holds (a backward function's freshly computed result): on
// first contribution its storage becomes the gradient, without a copy.
void adopt_into_slot(GradSlot& slot, Tensor&& grad) {
  const bool sole_owner = grad.impl_ptr().use_count() == 1 && grad.impl().storage.use_count() == 1 &&
                          grad.impl().offset == 0 && !grad.requires_grad();
  if (slot.grad || !sole_owner) return add_to_slot(slot, grad);
  slot.grad = grad.impl_ptr();
}

void check_gradient_for(const Shape& shape, DType dtype, const Tensor& grad) {
  TF_CHECK(grad.defined() && grad.shape() == shape && grad.dtype() == dtype, "accumulate_grad: gradient ",
           grad.describe(), " for a tensor of shape ", shape, " ", dtype_name(dtype));
}
}  // namespace

GradRef::GradRef(const Tensor& t) {
  if (!t.defined()) return;
  shape_ = t.shape();
  dtype_ = t.dtype();
  if (t.requires_grad()) slot_ = t.impl().grad_slot;
}

void set_anomaly_detection(bool on) { g_anomaly = on; }
bool anomaly_detection() { return g_anomaly; }

LayerScope::LayerScope(const char* name, int64_t index) : previous_length_(std::string::npos) {
  if (!g_anomaly) return;
  previous_length_ = g_layer_path.size();
  if (!g_layer_path.empty()) g_layer_path += '.';
  g_layer_path += name;
  if (index >= 0) g_layer_path += concat('.', index);
}
LayerScope::~LayerScope() {
  if (previous_length_ != std::string::npos) g_layer_path.resize(previous_length_);
}
const std::string& layer_path() { return g_layer_path; }

namespace {
Tape*& current_tape() {
  thread_local Tape main_tape;
  thread_local Tape* current = &main_tape;
  return current;
}
// ReplayScope's tapes, one per nesting depth, kept for the thread's life.
thread_local std::vector<std::unique_ptr<Tape>> g_replay_tapes;
thread_local size_t g_replay_depth = 0;
}  // namespace

Tape& tape() { return *current_tape(); }

ReplayScope::ReplayScope() : previous_tape_(current_tape()), previous_grad_enabled_(g_grad_enabled) {
  if (g_replay_tapes.size() <= g_replay_depth) g_replay_tapes.push_back(std::make_unique<Tape>());
  current_tape() = g_replay_tapes[g_replay_depth++].get();
  g_grad_enabled = true;
}

ReplayScope::~ReplayScope() {
  current_tape()->clear();  // after an exception: what was recorded can never run
  current_tape() = previous_tape_;
  --g_replay_depth;
  g_grad_enabled = previous_grad_enabled_;
}

void ReplayScope::backward(const Tensor& root, const Tensor& root_grad) {
  const Node* outer = g_backward_node;
  const size_t outer_position = g_backward_position;
  if (root.requires_grad()) current_tape()->backward(root, root_grad);
  g_backward_node = outer;  // anomaly mode names the replaying node again
  g_backward_position = outer_position;
}

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

void* Node::operator new(size_t bytes) { return object_pool::resource()->allocate(bytes); }
void* Node::operator new(size_t bytes, std::align_val_t alignment) {
  return object_pool::resource()->allocate(bytes, static_cast<size_t>(alignment));
}
void Node::operator delete(void* p, size_t bytes) { object_pool::resource()->deallocate(p, bytes); }
void Node::operator delete(void* p, size_t bytes, std::align_val_t alignment) {
  object_pool::resource()->deallocate(p, bytes, static_cast<size_t>(alignment));
}

void Tape::record(std::unique_ptr<Node> node, std::span<const Tensor> outputs) {
  if (g_anomaly) {
    for (size_t o = 0; o < outputs.size(); ++o) {
      const int64_t bad = first_non_finite(outputs[o]);
      TF_CHECK(bad < 0, "anomaly: op '", node->op_name(), "'", in_layer(g_layer_path), " (op ", nodes_.size() + 1,
               " of the forward pass) produced ", outputs[o].at(bad), " at element ", bad, " of its output ", o, " ",
               outputs[o].shape());
    }
    node->layer = g_layer_path;
  }
  if (profile::enabled()) profile::record_forward(node->op_name());
  node->outputs.reserve(outputs.size());
  for (const Tensor& out : outputs) {
    TensorImpl& impl = out.impl();
    impl.requires_grad = true;
    impl.is_leaf = false;
    impl.tape_generation = generation_;
    impl.grad_slot = object_pool::make_shared<GradSlot>();
    node->outputs.emplace_back(out);
  }
  nodes_.push_back(std::move(node));
}

void Tape::backward(const Tensor& loss) {
  TF_CHECK(loss.numel() == 1, "backward: the loss must have one element, got shape ", loss.shape(),
           "; pass a gradient for non-scalar roots");
  backward(loss, Tensor::full(loss.shape(), 1.0, loss.dtype()));
}

void Tape::backward(const Tensor& root, const Tensor& root_grad) {
  TF_CHECK(root.requires_grad() && !root.impl().is_leaf,
           "backward: ", root.describe(), " was not produced by a recorded op (was it computed under "
           "NoGradGuard, or from tensors that do not require grad?)");
  TF_CHECK(root.impl().tape_generation == generation_ && !nodes_.empty(),
           "backward: the tape that recorded ", root.describe(),
           " has been cleared; backward may run only once per forward pass");
  check_same_shape("backward", root, root_grad);
  NoGradGuard no_grad;  // backward functions may use ops freely: nothing they do is recorded
  accumulate_grad(root, root_grad);
  try {
    run_backward();
  } catch (...) {
    g_backward_node = nullptr;
    clear();  // an anomaly stopped the walk: what is left can never run
    throw;
  }
  clear();
}

void Tape::run_backward() {
  // Newest first; each node is destroyed right after it runs, releasing its saved tensors.
  while (!nodes_.empty()) {
    std::unique_ptr<Node> node = std::move(nodes_.back());
    nodes_.pop_back();
    if (g_anomaly) {
      g_backward_node = node.get();
      g_backward_position = nodes_.size() + 1;
    }
    bool reached = false;
    for (const GradRef& out : node->outputs) reached = reached || out.has_grad();
    if (reached && profile::enabled()) {
      const int64_t start = profile::now_ns();
      node->backward();
      profile::add(node->op_name(), profile::Phase::backward, 1e-9 * static_cast<double>(profile::now_ns() - start));
    } else if (reached) {
      node->backward();
    }
    for (GradRef& out : node->outputs) out.take_grad();  // intermediate: no longer needed
    if (node_done_) {
      node.reset();  // its handles on inputs and their gradient slots go first
      node_done_(node_done_context_);
    }
  }
  g_backward_node = nullptr;
}

void Tape::clear() {
  nodes_.clear();
  ++generation_;
}

void accumulate_grad(const Tensor& t, Tensor&& grad) {
  if (!t.defined() || !t.requires_grad()) return;
  check_same_shape("accumulate_grad", t, grad);
  check_backward_gradient(t.shape(), grad);
  adopt_into_slot(PrivateGradients::target(*t.impl().grad_slot), std::move(grad));
}

void accumulate_grad(const Tensor& t, const Tensor& grad) {
  if (!t.defined() || !t.requires_grad()) return;
  check_same_shape("accumulate_grad", t, grad);
  check_backward_gradient(t.shape(), grad);
  add_to_slot(PrivateGradients::target(*t.impl().grad_slot), grad);
}

void accumulate_grad(const GradRef& t, Tensor&& grad) {
  if (!t.requires_grad()) return;
  check_gradient_for(t.shape(), t.dtype(), grad);
  check_backward_gradient(t.shape(), grad);
  adopt_into_slot(PrivateGradients::target(*t.slot()), std::move(grad));
}

void accumulate_grad(const GradRef& t, const Tensor& grad) {
  if (!t.requires_grad()) return;
  check_gradient_for(t.shape(), t.dtype(), grad);
  check_backward_gradient(t.shape(), grad);
  add_to_slot(PrivateGradients::target(*t.slot()), grad);
}

}  // namespace tf
