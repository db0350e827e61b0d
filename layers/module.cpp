#include "layers/module.h"

#include <stdexcept>

namespace headlab::layers {

void Module::check_new_name(const std::string& name, const char* what) const {
  if (name.empty() || name.find('.') != std::string::npos) {
    throw std::invalid_argument(std::string("Module::") + what + ": name '" + name +
                                "' must be non-empty and contain no '.' (dots join nested names)");
  }
  for (const auto& [existing, p] : params_) {
    if (existing == name) {
      throw std::invalid_argument(std::string("Module::") + what + ": name '" + name +
                                  "' is already a parameter of this module");
    }
  }
  for (const auto& [existing, m] : children_) {
    if (existing == name) {
      throw std::invalid_argument(std::string("Module::") + what + ": name '" + name +
                                  "' is already a submodule of this module");
    }
  }
}

Variable Module::register_parameter(const std::string& name, Tensor value) {
  check_new_name(name, "register_parameter");
  if (!value.defined()) {
    throw std::invalid_argument("Module::register_parameter: parameter '" + name + "' has an undefined tensor");
  }
  Variable param(std::move(value), /*requires_grad=*/true);
  params_.emplace_back(name, param);
  return param;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module");
  if (!module) {
    throw std::invalid_argument("Module::register_module: submodule '" + name + "' is null");
  }
  module->train(training_);
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out) const {
  for (const auto& [name, p] : params_) out.emplace_back(prefix + name, p);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Variable>> out;
  collect("", out);
  return out;
}

// named_parameters' order without building the names: a training step asks
// for its parameters every step.
void Module::collect_values(std::vector<Variable>& out) const {
  for (const auto& [name, p] : params_) out.push_back(p);
  for (const auto& [name, child] : children_) child->collect_values(out);
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  collect_values(out);
  return out;
}

Variable Module::parameter(const std::string& name) const {
  for (auto& [n, p] : named_parameters()) {
    if (n == name) return p;
  }
  std::string known;
  for (auto& [n, p] : named_parameters()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("Module::parameter: no parameter named '" + name + "' (parameters: " +
                              (known.empty() ? std::string("none") : known) + ")");
}

const Variable& Module::own_parameter(const std::string& name) const {
  for (const auto& [n, p] : params_) {
    if (n == name) return p;
  }
  throw std::invalid_argument("Module: this module has no parameter named '" + name + "'");
}

Variable* Module::find_slot(const std::string& name) {
  const auto dot = name.find('.');
  if (dot == std::string::npos) {
    for (auto& [n, p] : params_) {
      if (n == name) return &p;
    }
    return nullptr;
  }
  const std::string head = name.substr(0, dot);
  for (auto& [child_name, child] : children_) {
    if (child_name == head) return child->find_slot(name.substr(dot + 1));
  }
  return nullptr;
}

void Module::replace_parameter(const std::string& name, const Variable& value) {
  Variable* slot = find_slot(name);
  if (slot == nullptr) throw std::invalid_argument("Module::replace_parameter: no parameter named '" + name + "'");
  if (!value.defined() || value.shape() != slot->shape() || value.dtype() != slot->dtype()) {
    throw std::invalid_argument(
        "Module::replace_parameter: parameter '" + name + "' is " + core::to_string(slot->dtype()) + " " +
        core::to_string(slot->shape()) + ", got " +
        (value.defined() ? core::to_string(value.dtype()) + " " + core::to_string(value.shape()) : "undefined"));
  }
  *slot = value;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, p] : named_parameters()) n += p.numel();
  return n;
}

void Module::zero_grad() {
  for (auto& [name, p] : named_parameters()) p.zero_grad();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

}  // namespace headlab::layers
