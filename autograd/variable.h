// autograd::Variable: a cheap handle to a node of the computation graph.
//
// Copying a Variable copies a pointer; every copy sees the same value and
// gradient. A node holds its value, its gradient, whether it requires one,
// its inputs and a backward closure. The closure receives the inputs and the
// output gradient as arguments and captures only what it saved (tensors,
// shapes, scalars), never its own node, so the graph has no reference cycles.
//
// A value no one will read again is released as soon as that is certain:
// an op names the inputs its backward never reads (add's, say: its backward
// only passes the gradient on), and once the only holders of an op result
// are such consumers, its value goes (its shape and dtype stay, for the
// gradient's checks). The residual stream's branch outputs -- attention's
// and the MLP's, which only an add reads -- no longer wait for the backward.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace headlab::autograd {

using core::DType;
using core::Shape;
using core::Tensor;

class Variable;

// Given the op's inputs and the gradient of its output, adds each input's
// gradient with inputs[i].accumulate_grad(...) (only where requires_grad()).
// The output gradient may be shared with other gradients: read it, never
// write it in place.
using BackwardFn = std::function<void(std::vector<Variable>& inputs, const Tensor& grad_output)>;

struct Node {
  Tensor value;  // undefined once released (below)
  Tensor grad;   // undefined until a gradient arrives
  bool requires_grad = false;
  std::vector<Variable> inputs;  // empty for leaves
  BackwardFn backward;           // empty for leaves
  const char* op = "leaf";
  bool freed = false;  // graph released by a backward without retain_graph
  // The released value's shape and dtype (see the file comment).
  Shape released_shape;
  DType released_dtype = DType::f32;
  // Recorded consumers whose backward never reads this value (op results
  // only: a leaf, e.g. a parameter, may be shared between threads), and
  // which of this node's own inputs it holds so (bit i: inputs[i]).
  int32_t blind_uses = 0;
  uint32_t blind_inputs = 0;

  // Every live value is defined (from_op and Variable refuse an undefined
  // one), so an undefined value is a released one.
  bool released() const { return !value.defined(); }
  const Shape& shape() const { return released() ? released_shape : value.shape(); }
  DType dtype() const { return released() ? released_dtype : value.dtype(); }

  // Empties inputs (into *keep, if given), first ending the blind uses
  // this node made of them.
  void drop_inputs(std::vector<Variable>* keep);

  Node();  // counts live nodes (see live_node_count)
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();  // iterative, so that a long chain does not overflow the stack
};

class Variable {
 public:
  Variable() = default;  // undefined
  explicit Variable(Tensor value, bool requires_grad = false);
  Variable(const Variable&) = default;
  Variable(Variable&&) noexcept = default;
  // Dropping a handle (here and in the destructor) may release the value of
  // a node that only blind consumers hold now.
  Variable& operator=(const Variable& other);
  Variable& operator=(Variable&& other) noexcept;
  ~Variable();

  // The result of an op. Records the graph only when grad mode is on and some
  // input requires a gradient; otherwise a plain constant. Bit i of `blind`:
  // the backward never reads inputs[i].value() (shape() and dtype() it may).
  static Variable from_op(Tensor value, std::vector<Variable> inputs, BackwardFn backward, const char* op,
                          uint32_t blind = 0);
  static constexpr uint32_t kBlindAll = ~uint32_t{0};

  bool defined() const { return node_ != nullptr; }
  const Tensor& value() const;
  // The value may be written in place (optimizers do, under no-grad).
  Tensor& mutable_value() const;
  const Tensor& grad() const;  // undefined if no gradient arrived
  bool has_grad() const { return node_ && node_->grad.defined(); }
  void set_grad(Tensor grad) const;
  // Adds g to the gradient; throws naming the op if shape or dtype differ.
  void accumulate_grad(const Tensor& g) const;
  void zero_grad() const;  // drops the gradient

  // False for a leaf outside the leaves of a live GradOnlyFor on this thread.
  bool requires_grad() const;
  void set_requires_grad(bool enabled) const;  // leaves only
  bool is_leaf() const { return node_ && !node_->backward && !node_->freed; }
  const char* op() const { return node_ ? node_->op : "undefined"; }

  // Backpropagates from this variable: with no argument it must hold one
  // element (gradient 1). Unless retain_graph, the graph is freed afterwards.
  void backward(bool retain_graph = false) const;
  void backward(const Tensor& grad_output, bool retain_graph = false) const;

  Variable detach() const;  // same value, no history, no gradient

  const Shape& shape() const;
  DType dtype() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t axis) const;
  int64_t numel() const { return core::numel_of(shape()); }

  const Node* node() const { return node_.get(); }

 private:
  friend struct Node;  // ~Node unlinks chains iteratively
  explicit Variable(std::shared_ptr<Node> node) : node_(std::move(node)) {}
  void release_if_only_blind_uses() const;
  std::shared_ptr<Node> node_;
};

// While alive, ops on this thread record a graph if and only if `enabled`;
// the mode before it comes back when it goes. Enabling lets code called from
// inside a NoGradGuard (a Python hook in a forward pass) take gradients.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

// While alive, no op records a graph on this thread.
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

bool grad_enabled();

// While alive, on this thread, the only leaves that require a gradient are
// `leaves` (those of them that require one): every other leaf -- a model's
// parameters, say -- counts as a constant. Ops then record only what leads to
// `leaves`, and a backward run inside the scope computes and accumulates
// gradients only for them. That is dL/d(some inputs) without touching any
// other leaf's gradient, e.g. head-gate importance on a model that is being
// trained or probed by other threads (analysis/importance.h). Scopes nest;
// the innermost one counts.
class GradOnlyFor {
 public:
  explicit GradOnlyFor(std::vector<Variable> leaves);
  ~GradOnlyFor();
  GradOnlyFor(const GradOnlyFor&) = delete;
  GradOnlyFor& operator=(const GradOnlyFor&) = delete;

  bool allows(const Node* leaf) const;

 private:
  std::vector<Variable> leaves_;
  const GradOnlyFor* previous_;
};

// Nodes alive in this process (all threads): lets tests prove that a graph
// is released after backward.
int64_t live_node_count();

}  // namespace headlab::autograd
