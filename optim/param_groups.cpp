#include "optim/param_groups.h"

#include <cctype>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include "core/shortest.h"

namespace headlab::optim {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_norm_component(std::string_view component) {
  const std::string c = lower(component);
  return c.starts_with("ln") || c.find("norm") != std::string::npos;
}

}  // namespace

NamedParameters name_by_index(const std::vector<autograd::Variable>& params) {
  NamedParameters named;
  named.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) named.emplace_back(std::to_string(i), params[i]);
  return named;
}

bool is_no_decay_parameter(const std::string& name, const autograd::Variable& param) {
  if (param.defined() && param.dim() < 2) return true;
  if (name == "bias" || name.ends_with(".bias")) return true;
  // Every dotted component but the last names a module (blocks.0.ln1.weight).
  std::string_view rest(name);
  for (std::size_t dot = rest.find('.'); dot != std::string_view::npos; dot = rest.find('.')) {
    if (is_norm_component(rest.substr(0, dot))) return true;
    rest.remove_prefix(dot + 1);
  }
  return false;
}

std::vector<ParamGroup> make_param_groups(const NamedParameters& named_params, double weight_decay,
                                          bool no_decay_for_bias_and_norm) {
  if (!std::isfinite(weight_decay) || weight_decay < 0.0) {
    throw std::invalid_argument("optim::make_param_groups: weight_decay must be finite and >= 0, got " +
                                core::shortest(weight_decay));
  }
  ParamGroup decay{.params = {}, .weight_decay = weight_decay, .lr_scale = 1.0};
  ParamGroup no_decay{.params = {}, .weight_decay = 0.0, .lr_scale = 1.0};
  for (const auto& [name, param] : named_params) {
    const bool exempt = no_decay_for_bias_and_norm && is_no_decay_parameter(name, param);
    (exempt ? no_decay : decay).params.emplace_back(name, param);
  }
  std::vector<ParamGroup> groups;
  if (!decay.params.empty()) groups.push_back(std::move(decay));
  if (!no_decay.params.empty()) groups.push_back(std::move(no_decay));
  return groups;
}

}  // namespace headlab::optim
