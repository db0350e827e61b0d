// Optimizer state for checkpoints: tensors "optimizer.<param>.<slot>" and
// metadata "optimizer.kind", "optimizer.format", "optimizer.step",
// "optimizer.lr" and "optimizer.<param>.step".
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string_view>

#include "core/shortest.h"
#include "optim/optimizer.h"

namespace headlab::optim {

namespace {

constexpr const char* kPrefix = "optimizer.";
constexpr const char* kFormat = "1";

std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// "optimizer." + the parts joined by dots. (Built by appending: GCC 12 warns
// falsely about chains of std::string operator+ at -O3.)
std::string key(std::initializer_list<std::string_view> parts) {
  std::string out = kPrefix;
  bool first = true;
  for (const std::string_view part : parts) {
    if (!first) out += '.';
    out += part;
    first = false;
  }
  return out;
}

template <class T>
bool parse_number(const std::string& text, T& out) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

}  // namespace

OptimizerState Optimizer::export_state() const {
  OptimizerState state;
  state.metadata.emplace(key({"kind"}), kind_);
  state.metadata.emplace(key({"format"}), kFormat);
  state.metadata.emplace(key({"step"}), std::to_string(step_count_));
  state.metadata.emplace(key({"lr"}), exact(lr_));
  const std::vector<std::string> slots = slot_names();
  for (const ParamState& p : params_) {
    state.metadata.emplace(key({p.name, "step"}), std::to_string(p.steps));
    for (std::size_t k = 0; k < p.slots.size(); ++k) {
      // A copy: later steps must not change a state already exported.
      state.tensors.emplace_back(key({p.name, slots[k]}), p.slots[k].clone());
    }
  }
  return state;
}

namespace {

// The metadata value under `name`; throws naming the key if it is missing.
const std::string& lookup(const core::Metadata& metadata, const std::string& name, const std::string& where) {
  const auto it = metadata.find(name);
  if (it == metadata.end()) {
    throw std::invalid_argument(where + "metadata key '" + name +
                                "' is missing; is this an optimizer state written by export_state()?");
  }
  return it->second;
}

// The optimizer's own tensors of a checkpoint, by name.
std::map<std::string, const core::Tensor*> optimizer_tensors(const core::NamedTensors& tensors,
                                                             const std::string& where) {
  std::map<std::string, const core::Tensor*> found;
  for (const auto& [name, tensor] : tensors) {
    if (!name.starts_with(kPrefix)) continue;
    if (!found.emplace(name, &tensor).second) {
      throw std::invalid_argument(where + "tensor '" + name + "' appears twice");
    }
  }
  return found;
}

}  // namespace

void Optimizer::import_state(const core::NamedTensors& tensors, const core::Metadata& metadata) {
  // The state comes from a file: its problems are told as the file's ("the
  // adamw state: tensor ... is missing"), not as this function's.
  const std::string where = "the " + kind_ + " state: ";
  auto meta = [&](const std::string& name) -> const std::string& { return lookup(metadata, name, where); };

  // The header: kind, format, step count and learning rate.
  const std::string kind_key = key({"kind"});
  const std::string format_key = key({"format"});
  const std::string step_key = key({"step"});
  const std::string lr_key = key({"lr"});
  if (meta(kind_key) != kind_) {
    throw std::invalid_argument(where + "the state was written by optimizer '" + meta(kind_key) +
                                "' but this optimizer is '" + kind_ + "'");
  }
  if (meta(format_key) != kFormat) {
    throw std::invalid_argument(where + "unknown state format '" + meta(format_key) + "' (expected " + kFormat + ")");
  }
  int64_t step_count = 0;
  if (!parse_number(meta(step_key), step_count) || step_count < 0) {
    throw std::invalid_argument(where + "'" + step_key + "' is '" + meta(step_key) + "', not a step count");
  }
  double lr = 0.0;
  if (!parse_number(meta(lr_key), lr) || !std::isfinite(lr) || lr < 0.0) {
    throw std::invalid_argument(where + "'" + lr_key + "' is '" + meta(lr_key) + "', not a learning rate");
  }

  // Each parameter's step count and slots, checked before anything changes.
  std::map<std::string, const core::Tensor*> unmatched = optimizer_tensors(tensors, where);
  const std::vector<std::string> slots = slot_names();
  std::vector<ParamState> loaded;
  loaded.reserve(params_.size());
  for (const ParamState& p : params_) {
    const std::string steps_key = key({p.name, "step"});
    const std::string& steps_text = meta(steps_key);
    ParamState next{.name = p.name, .param = p.param, .steps = 0, .slots = {}};
    if (!parse_number(steps_text, next.steps) || next.steps < 0 || next.steps > step_count) {
      throw std::invalid_argument(where + "'" + steps_key + "' is '" + steps_text +
                                  "', not a step count between 0 and " + std::to_string(step_count));
    }
    const core::Tensor& value = p.param.value();
    for (const std::string& slot : slots) {
      const std::string name = key({p.name, slot});
      const auto it = unmatched.find(name);
      if (next.steps == 0) {
        if (it != unmatched.end()) {
          throw std::invalid_argument(where + "tensor '" + name + "' is given but parameter '" + p.name +
                                      "' has taken no step");
        }
        continue;
      }
      if (it == unmatched.end()) {
        throw std::invalid_argument(where + "tensor '" + name + "' is missing (parameter '" + p.name + "' has taken " +
                                    steps_text + " steps, so " + kind_ + " needs its " + slot + ")");
      }
      const core::Tensor& t = *it->second;
      if (t.shape() != value.shape() || t.dtype() != value.dtype()) {
        throw std::invalid_argument(where + "tensor '" + name + "' is " + core::to_string(t.dtype()) + " " +
                                    core::to_string(t.shape()) + " but parameter '" + p.name + "' is " +
                                    core::to_string(value.dtype()) + " " + core::to_string(value.shape()));
      }
      next.slots.push_back(t.clone());
      if (slot_is_non_negative(slot)) {
        // A running mean of squares: a negative one is a damaged file (and
        // would turn the update's square root into NaN).
        const std::vector<double> values = next.slots.back().to_vector();
        const auto bad = std::find_if(values.begin(), values.end(), [](double v) { return v < 0; });
        if (bad != values.end())
          throw std::invalid_argument(where + "tensor '" + name + "' holds " + core::shortest(*bad) + " at element " +
                                      std::to_string(bad - values.begin()) + ", but " + slot +
                                      " is a mean of squares, never negative: the file is damaged");
      }
      unmatched.erase(it);
    }
    loaded.push_back(std::move(next));
  }

  // Nothing may be left over: state of other parameters means another model.
  if (!unmatched.empty()) {
    throw std::invalid_argument(where + "tensor '" + unmatched.begin()->first +
                                "' matches no parameter and state slot of this optimizer; the state was written "
                                "for other parameters or another optimizer configuration");
  }
  const std::string_view prefix = kPrefix;
  const std::string_view suffix = ".step";
  for (const auto& entry : metadata) {
    const std::string& name = entry.first;
    if (!name.starts_with(prefix) || !name.ends_with(suffix) || name == step_key) continue;
    const std::string param = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    const bool known =
        std::any_of(params_.begin(), params_.end(), [&](const ParamState& p) { return p.name == param; });
    if (!known) {
      throw std::invalid_argument(where + "the state has parameter '" + param +
                                  "' which this optimizer does not have; it was written for other parameters");
    }
  }

  params_ = std::move(loaded);
  step_count_ = step_count;
  lr_ = lr;
}

}  // namespace headlab::optim
