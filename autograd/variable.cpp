// The engine: Variable handles, gradient accumulation, backward().
#include "autograd/variable.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <unordered_set>
#include <utility>

#include "autograd/grad_in_place.h"
#include "core/ops.h"

namespace headlab::autograd {
namespace {

thread_local bool t_grad_enabled = true;
// The innermost live GradOnlyFor of this thread, or null.
thread_local const GradOnlyFor* t_grad_only = nullptr;
// The op whose backward is running on this thread, so that a gradient of the
// wrong shape names the op that produced it.
thread_local const char* t_backward_op = nullptr;
std::atomic<int64_t> g_live_nodes{0};

std::string describe(const Tensor& t) { return core::to_string(t.shape()) + " " + core::to_string(t.dtype()); }
std::string describe(const Node& n) { return core::to_string(n.shape()) + " " + core::to_string(n.dtype()); }

// A leaf's gradient: contiguous (optimizers read it raw) and not shared with
// any other tensor (an in-place update of one gradient, e.g. clipping, must
// never change another).
Tensor owned(const Tensor& g) { return g.is_contiguous() && g.storage().use_count() == 1 ? g : g.clone(); }

// Whether a node takes part in backpropagation: it requires a gradient and,
// if it is a leaf, no GradOnlyFor scope excludes it.
bool wants_grad(const Node& n) {
  if (!n.requires_grad) return false;
  const bool leaf = !n.backward && !n.freed;
  return !leaf || t_grad_only == nullptr || t_grad_only->allows(&n);
}

class BackwardOpScope {
 public:
  explicit BackwardOpScope(const char* op) : previous_(t_backward_op) { t_backward_op = op; }
  ~BackwardOpScope() { t_backward_op = previous_; }
  BackwardOpScope(const BackwardOpScope&) = delete;
  BackwardOpScope& operator=(const BackwardOpScope&) = delete;

 private:
  const char* previous_;
};

}  // namespace

// --- Node ---

Node::Node() { g_live_nodes.fetch_add(1, std::memory_order_relaxed); }

// The blind uses end first, so that a surviving input counts only its live
// consumers when the handles go.
void Node::drop_inputs(std::vector<Variable>* keep) {
  for (std::size_t i = 0; i < inputs.size() && i < 32 && blind_inputs != 0; ++i)
    if ((blind_inputs >> i & 1u) && inputs[i].node_) --inputs[i].node_->blind_uses;
  blind_inputs = 0;
  if (keep != nullptr)
    for (Variable& in : inputs) keep->push_back(std::move(in));
  inputs.clear();
}

Node::~Node() {
  g_live_nodes.fetch_sub(1, std::memory_order_relaxed);
  // Default destruction would recurse once per node of a chain. Instead, move
  // the inputs of every node we are the last owner of into a worklist before
  // it dies, so each dies with no inputs left.
  std::vector<Variable> pending;
  drop_inputs(&pending);
  while (!pending.empty()) {
    Variable v = std::move(pending.back());
    pending.pop_back();
    if (v.node_ && v.node_.use_count() == 1) v.node_->drop_inputs(&pending);
  }
}

int64_t live_node_count() { return g_live_nodes.load(std::memory_order_relaxed); }

// --- grad mode ---

GradModeGuard::GradModeGuard(bool enabled) : previous_(t_grad_enabled) { t_grad_enabled = enabled; }
GradModeGuard::~GradModeGuard() { t_grad_enabled = previous_; }
bool grad_enabled() { return t_grad_enabled; }

GradOnlyFor::GradOnlyFor(std::vector<Variable> leaves) : leaves_(std::move(leaves)), previous_(t_grad_only) {
  t_grad_only = this;
}
GradOnlyFor::~GradOnlyFor() { t_grad_only = previous_; }

bool GradOnlyFor::allows(const Node* leaf) const {
  return std::any_of(leaves_.begin(), leaves_.end(), [leaf](const Variable& v) { return v.node() == leaf; });
}

// --- Variable ---

Variable::Variable(Tensor value, bool requires_grad) : node_(std::make_shared<Node>()) {
  if (!value.defined()) throw std::invalid_argument("Variable: the value tensor is undefined");
  node_->value = std::move(value);
  node_->requires_grad = requires_grad;
}

Variable& Variable::operator=(const Variable& other) {
  if (node_ != other.node_) {
    const Variable dropped = std::move(*this);  // checked as it goes
    node_ = other.node_;
  }
  return *this;
}

Variable& Variable::operator=(Variable&& other) noexcept {
  if (this != &other) {
    const Variable dropped = std::move(*this);
    node_ = std::move(other.node_);
  }
  return *this;
}

Variable::~Variable() {
  if (node_ && node_->blind_uses > 0) release_if_only_blind_uses();
}

// Called as this handle goes: if every other holder is a blind consumer, no
// one can read the value again (a new reader needs a handle).
void Variable::release_if_only_blind_uses() const {
  Node& n = *node_;
  if (n.released() || !n.backward || node_.use_count() - 1 != n.blind_uses) return;
  n.released_shape = n.value.shape();
  n.released_dtype = n.value.dtype();
  n.value = Tensor();
}

Variable Variable::from_op(Tensor value, std::vector<Variable> inputs, BackwardFn backward, const char* op,
                           uint32_t blind) {
  if (!value.defined()) throw std::invalid_argument(std::string("Variable::from_op: op '") + op + "' gave no value");
  auto node = std::make_shared<Node>();
  node->value = std::move(value);
  node->op = op;
  const bool record =
      grad_enabled() && std::any_of(inputs.begin(), inputs.end(), [](const Variable& v) { return v.requires_grad(); });
  if (record) {
    node->requires_grad = true;
    node->inputs = std::move(inputs);
    node->backward = std::move(backward);
    for (std::size_t i = 0; i < node->inputs.size() && i < 32; ++i) {
      Node* in = node->inputs[i].node_.get();
      if ((blind >> i & 1u) && in != nullptr && in->backward) {
        node->blind_inputs |= 1u << i;
        ++in->blind_uses;
      }
    }
  }
  return Variable(std::move(node));
}

bool Variable::requires_grad() const { return node_ && wants_grad(*node_); }

namespace {

// Unreachable through a handle: a released value has no holder that reads it.
void check_not_released(const Node& n, const char* who) {
  if (n.released())
    throw std::logic_error(std::string(who) + ": the value of '" + n.op +
                           "' was released (only consumers that never read it held it)");
}

}  // namespace

const Tensor& Variable::value() const {
  if (!node_) throw std::invalid_argument("Variable::value: the variable is undefined");
  check_not_released(*node_, "Variable::value");
  return node_->value;
}

Tensor& Variable::mutable_value() const {
  if (!node_) throw std::invalid_argument("Variable::mutable_value: the variable is undefined");
  check_not_released(*node_, "Variable::mutable_value");
  return node_->value;
}

const Shape& Variable::shape() const {
  if (!node_) throw std::invalid_argument("Variable::shape: the variable is undefined");
  return node_->shape();
}

DType Variable::dtype() const {
  if (!node_) throw std::invalid_argument("Variable::dtype: the variable is undefined");
  return node_->dtype();
}

int64_t Variable::size(int64_t axis) const {
  if (!node_) throw std::invalid_argument("Variable::size: the variable is undefined");
  if (!node_->released()) return node_->value.size(axis);
  const Shape& s = node_->released_shape;  // as Tensor::size reads its shape
  const auto rank = static_cast<int64_t>(s.size());
  if (axis < -rank || axis >= rank)
    throw std::invalid_argument("size: axis " + std::to_string(axis) + " is out of range for shape " +
                                core::to_string(s) + " (valid: " + std::to_string(-rank) + " to " +
                                std::to_string(rank - 1) + ")");
  return s[static_cast<std::size_t>(axis < 0 ? axis + rank : axis)];
}

const Tensor& Variable::grad() const {
  if (!node_) throw std::invalid_argument("Variable::grad: the variable is undefined");
  return node_->grad;
}

void Variable::set_grad(Tensor grad) const {
  if (!node_) throw std::invalid_argument("Variable::set_grad: the variable is undefined");
  if (grad.defined() && (grad.shape() != node_->shape() || grad.dtype() != node_->dtype()))
    throw std::invalid_argument(std::string("Variable::set_grad on '") + node_->op + "': gradient " + describe(grad) +
                                " does not match the value " + describe(*node_));
  node_->grad = std::move(grad);
}

void Variable::accumulate_grad(const Tensor& g) const {
  if (!node_) throw std::invalid_argument("Variable::accumulate_grad: the variable is undefined");
  Node& n = *node_;
  if (!g.defined() || g.shape() != n.shape() || g.dtype() != n.dtype()) {
    const std::string who = t_backward_op ? std::string("backward of '") + t_backward_op + "'"
                                          : std::string("Variable::accumulate_grad");
    throw std::invalid_argument(who + " gave a gradient " + (g.defined() ? describe(g) : std::string("(undefined)")) +
                                " for '" + n.op + "' whose value is " + describe(n) +
                                "; a gradient must have its variable's shape and dtype");
  }
  if (n.grad.defined())
    n.grad = core::add(n.grad, g);  // out of place: g or the old gradient may be shared
  else
    n.grad = n.backward ? g : owned(g);  // an intermediate's gradient is only read, once
}

Tensor grad_to_add_into(const Variable& v) {
  const Node* n = v.node();
  if (n == nullptr || !n->backward || n->freed) return Tensor();
  const Tensor& g = n->grad;
  // use_count 1: the node alone holds the storage (no view, no copy elsewhere).
  if (!g.defined() || !g.is_contiguous() || g.storage().use_count() != 1) return Tensor();
  return g;
}

void Variable::zero_grad() const {
  if (node_) node_->grad = Tensor();
}

void Variable::set_requires_grad(bool enabled) const {
  if (!node_) throw std::invalid_argument("Variable::set_requires_grad: the variable is undefined");
  if (node_->backward)
    throw std::invalid_argument(std::string("Variable::set_requires_grad: '") + node_->op +
                                "' is the result of an op; only leaves can change requires_grad (use detach())");
  node_->requires_grad = enabled;
}

Variable Variable::detach() const { return Variable(value(), false); }

void Variable::backward(bool retain_graph) const {
  const Tensor& v = value();
  if (v.numel() != 1)
    throw std::invalid_argument("backward: the output '" + std::string(op()) + "' has shape " +
                                core::to_string(v.shape()) + " (" + std::to_string(v.numel()) +
                                " elements); backward() without a gradient needs a single element, so pass a "
                                "gradient of shape " +
                                core::to_string(v.shape()) + " instead");
  backward(Tensor::ones(v.shape(), v.dtype()), retain_graph);
}

namespace {

std::string freed_message(const char* op) {
  return std::string("backward: the graph through '") + op +
         "' was already freed by an earlier backward(); pass retain_graph = true to the first backward "
         "to backpropagate through it again";
}

}  // namespace

void Variable::backward(const Tensor& grad_output, bool retain_graph) const {
  if (!node_) throw std::invalid_argument("backward: the variable is undefined");
  if (!requires_grad())
    throw std::runtime_error("backward: '" + std::string(node_->op) +
                             "' does not require a gradient (no input requires one, or it was computed under "
                             "NoGradGuard)");
  if (node_->freed) throw std::runtime_error(freed_message(node_->op));
  if (!grad_output.defined() || grad_output.shape() != node_->shape() || grad_output.dtype() != node_->dtype())
    throw std::invalid_argument("backward: the output gradient " +
                                (grad_output.defined() ? describe(grad_output) : std::string("(undefined)")) +
                                " does not match the output '" + node_->op + "' " + describe(*node_));

  // Every node that requires a gradient and is reachable from here, inputs
  // before the ops that consume them: an iterative depth-first post-order.
  std::vector<std::shared_ptr<Node>> order;
  {
    std::unordered_set<const Node*> seen{node_.get()};
    struct Frame {
      std::shared_ptr<Node> node;
      std::size_t next = 0;
    };
    std::vector<Frame> stack;
    stack.push_back({node_, 0});
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next < top.node->inputs.size()) {
        const std::shared_ptr<Node>& child = top.node->inputs[top.next++].node_;
        if (!child || !wants_grad(*child) || seen.count(child.get())) continue;
        if (child->freed) throw std::runtime_error(freed_message(child->op));
        seen.insert(child.get());
        stack.push_back({child, 0});  // invalidates `top`, not used again
      } else {
        order.push_back(std::move(top.node));
        stack.pop_back();
      }
    }
  }
  try {
    accumulate_grad(grad_output);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node& n = **it;
      if (!n.backward) continue;  // a leaf keeps its gradient
      // An intermediate gradient is used once, then dropped.
      const Tensor g = std::move(n.grad);
      n.grad = Tensor();
      if (g.defined()) {
        BackwardOpScope scope(n.op);
        n.backward(n.inputs, g);
      }
      if (!retain_graph) {  // release saved tensors as soon as possible
        n.drop_inputs(nullptr);
        n.backward = nullptr;
        n.freed = true;
      }
    }
  } catch (...) {
    for (auto& n : order)
      if (n->backward) n->grad = Tensor();
    throw;
  }
}

}  // namespace headlab::autograd
