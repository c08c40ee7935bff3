// The tape's reverse walk and the gradient accumulation rule; see tape.h.
#include "framework/autograd/tape.h"

#include <cmath>
#include <utility>

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
void check_backward_gradient(const Tensor& t, const Tensor& grad) {
  if (!g_anomaly || g_backward_node == nullptr) return;
  const int64_t bad = first_non_finite(grad);
  TF_CHECK(bad < 0, "anomaly: the backward of op '", g_backward_node->op_name(), "'", in_layer(g_backward_node->layer),
           " (op ", g_backward_position, " of the forward pass) produced ", grad.at(bad), " at element ", bad,
           " of the gradient for its input ", t.shape());
}
}  // namespace

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

Tape& tape() {
  thread_local Tape t;
  return t;
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

void Tape::record(std::unique_ptr<Node> node) {
  if (g_anomaly) {
    for (size_t o = 0; o < node->outputs.size(); ++o) {
      const int64_t bad = first_non_finite(node->outputs[o]);
      TF_CHECK(bad < 0, "anomaly: op '", node->op_name(), "'", in_layer(g_layer_path), " (op ", nodes_.size() + 1,
               " of the forward pass) produced ", node->outputs[o].at(bad), " at element ", bad, " of its output ", o,
               " ", node->outputs[o].shape());
    }
    node->layer = g_layer_path;
  }
  if (profile::enabled()) profile::record_forward(node->op_name());
  for (Tensor& out : node->outputs) {
    TensorImpl& impl = out.impl();
    impl.requires_grad = true;
    impl.is_leaf = false;
    impl.tape_generation = generation_;
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
    for (const Tensor& out : node->outputs) reached = reached || out.impl().grad != nullptr;
    if (reached && profile::enabled()) {
      const int64_t start = profile::now_ns();
      node->backward();
      profile::add(node->op_name(), profile::Phase::backward, 1e-9 * static_cast<double>(profile::now_ns() - start));
    } else if (reached) {
      node->backward();
    }
    for (Tensor& out : node->outputs) out.impl().grad.reset();  // intermediate: no longer needed
  }
  g_backward_node = nullptr;
}

void Tape::clear() {
  nodes_.clear();
  ++generation_;
}

void accumulate_grad(const Tensor& t, Tensor&& grad) {
  const bool sole_owner = grad.defined() && grad.impl_ptr().use_count() == 1 &&
                          grad.impl().storage.use_count() == 1 && grad.impl().offset == 0 && !grad.requires_grad();
  if (!sole_owner || !t.defined() || !t.requires_grad() || t.impl().grad) return accumulate_grad(t, std::as_const(grad));
  check_backward_gradient(t, grad);
  check_same_shape("accumulate_grad", t, grad);
  TF_CHECK(grad.dtype() == t.dtype(), "accumulate_grad: gradient ", grad.describe(), " for ", t.describe());
  t.impl().grad = grad.impl_ptr();
}

void accumulate_grad(const Tensor& t, const Tensor& grad) {
  if (!t.defined() || !t.requires_grad()) return;
  check_same_shape("accumulate_grad", t, grad);
  check_backward_gradient(t, grad);
  TensorImpl& impl = t.impl();
  if (!impl.grad) {
    impl.grad = grad.clone().impl_ptr();
    return;
  }
  dispatch(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* g = Tensor(impl.grad).data<T>();
    const T* d = grad.data<T>();
    for (int64_t i = 0, n = grad.numel(); i < n; ++i) g[i] += d[i];
  });
}

}  // namespace tf
