#include "layers/init_scale.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "core/ops.h"
#include "layers/init.h"

namespace headlab::layers {
namespace {

// The number `rule` spells, or NaN if it spells none.
double number_of(const std::string& rule) {
  if (rule.empty()) return std::nan("");
  char* end = nullptr;
  const double v = std::strtod(rule.c_str(), &end);
  return end == rule.c_str() + rule.size() ? v : std::nan("");
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string init_rule_error(const std::string& rule) {
  if (rule == "fan-in" || rule == "nanda") return {};
  const double v = number_of(rule);
  if (!(std::isfinite(v) && v > 0))
    return "--init-std must be a positive standard deviation (such as 0.02, the default), fan-in or nanda, got '" +
           rule + "'";
  if (v > kMaxInitStd)
    return "--init-std " + rule + " is above " + std::to_string(static_cast<int>(kMaxInitStd)) +
           ": weights that large saturate every softmax and overflow float32; typical values are 0.02 (the default) "
           "to 1, or fan-in or nanda";
  if (v < std::numeric_limits<float>::min())
    return "--init-std " + rule + " is below 1.18e-38, float32's smallest normal number: the weights would underflow";
  return {};
}

double init_std_for(const std::string& rule, const std::string& name, const core::Shape& shape,
                    const ModelSpec& spec) {
  if (const std::string error = init_rule_error(rule); !error.empty()) throw std::invalid_argument(error);
  if (shape.size() != 2) throw std::invalid_argument("init_std_for: " + name + " is not a matrix");
  // A Linear weight is [out, in] and an embedding [n, d]: both read axis 1.
  if (rule == "fan-in") return 1.0 / std::sqrt(static_cast<double>(shape[1]));
  if (rule == "nanda")
    return 1.0 / std::sqrt(static_cast<double>(name == "head.weight" ? spec.vocab : spec.d_model));
  return number_of(rule);
}

void apply_init_scale(Module& model, const std::string& rule, const ModelSpec& spec) {
  if (rule == kDefaultInitStd) return;  // bit for bit the weights drawn
  for (auto& [name, p] : model.named_parameters()) {
    if (p.dim() != 2 || !ends_with(name, ".weight")) continue;
    core::Tensor& w = p.mutable_value();
    w.copy_(core::mul(w, init_std_for(rule, name, w.shape(), spec) / kInitStddev));
  }
}

}  // namespace headlab::layers
