// layers::Module: a tree of named parameters and named submodules.
//
// A module registers its parameters and children in the order it builds
// them; named_parameters() walks that tree depth first and joins the names
// with dots ("blocks.0.attn.q.weight"). Those names are the checkpoint names,
// so the order and spelling are part of the model's contract.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace headlab::layers {

using autograd::Variable;
using core::DType;
using core::Shape;
using core::Tensor;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Parameters are shared handles: a copied module would silently share its
  // weights with the original, so modules are moved, never copied.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

  // Adds a parameter (a leaf that requires a gradient) holding `value`.
  // Throws std::invalid_argument for an empty name, a name with a dot, or a
  // name already used by a parameter or a submodule of this module.
  Variable register_parameter(const std::string& name, Tensor value);

  // Adds a submodule; its parameters appear under "name.". Same name rules.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // Every parameter of the tree, depth first in registration order.
  std::vector<std::pair<std::string, Variable>> named_parameters() const;
  std::vector<Variable> parameters() const;
  // The parameter with this dotted name; throws std::invalid_argument naming it.
  Variable parameter(const std::string& name) const;
  // The direct children, in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }

  // Rebinds the parameter with this dotted name to another variable of the
  // same shape and dtype, so the module computes with `value` from now on
  // (functional evaluation, e.g. a gradcheck over the parameters). Throws
  // std::invalid_argument for an unknown name or a shape/dtype mismatch. An
  // optimizer built before holds the old variables.
  void replace_parameter(const std::string& name, const Variable& value);

  // Total number of scalar parameters.
  int64_t num_parameters() const;
  // Drops the gradient of every parameter.
  void zero_grad();

  // Training mode of this module and every descendant.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

 protected:
  // This module's own parameter `name` (not a descendant's); throws if absent.
  // Layers read their parameters through it, so replace_parameter reaches them.
  const Variable& own_parameter(const std::string& name) const;

 private:
  Variable* find_slot(const std::string& name);  // null if absent
  void check_new_name(const std::string& name, const char* what) const;
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out) const;
  void collect_values(std::vector<Variable>& out) const;

  std::vector<std::pair<std::string, Variable>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace headlab::layers
