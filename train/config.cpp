#include "train/config.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <limits>
#include <string>
#include <type_traits>

#include "train/errors.h"
#include "train/json_input.h"

namespace headlab::train {
namespace {

// Each size of the model at most 2^30: products of two stay far inside int64.
constexpr int64_t kMaxSize = int64_t{1} << 30;

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

void require_positive(const char* flag, int64_t value) {
  require(value > 0, "--" + std::string(flag) + " must be at least 1, got " + std::to_string(value));
}

void require_non_negative(const char* flag, int64_t value) {
  require(value >= 0, "--" + std::string(flag) + " must be 0 or more, got " + std::to_string(value));
}

}  // namespace

void TrainConfig::validate() const {
  // Strings go into config.json and checkpoints as JSON, which holds UTF-8 only.
  visit_fields(*this, [](const char* name, const auto& field, const char*) {
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, std::string>) {
      try {
        (void)nlohmann::json(field).dump();
      } catch (const nlohmann::json::exception&) {
        throw UsageError("--" + std::string(name) + " '" + brief_json(nlohmann::json(field)) +
                         "' is not valid UTF-8 text");
      }
    }
  });
  require(!task.empty() || !data.empty(), "--task must name a task (see `headlab tasks`)");
  require_non_negative("vocab", vocab);
  require_non_negative("seq-len", seq_len);
  require_positive("layers", layers);
  require_positive("heads", heads);
  require_positive("d-model", d_model);
  // Bounds first, so that no arithmetic below (or in a message) overflows.
  for (const auto& [flag, value] : {std::pair<const char*, int64_t>{"vocab", vocab}, {"seq-len", seq_len},
                                    {"layers", layers}, {"heads", heads}, {"d-model", d_model}, {"d-ff", d_ff}})
    require(value <= kMaxSize, "--" + std::string(flag) + " " + std::to_string(value) + " is beyond the " +
                                   std::to_string(kMaxSize) + " headlab supports (it trains toy models)");
  require(d_model % heads == 0, "--d-model " + std::to_string(d_model) + " is not divisible by --heads " +
                                    std::to_string(heads) + ": each head gets d_model / heads dimensions (try --d-model " +
                                    std::to_string((d_model / heads + 1) * heads) + ")");
  require_non_negative("d-ff", d_ff);
  require_positive("batch", batch);
  require_non_negative("steps", steps);
  require(std::isfinite(lr) && lr > 0, "--lr must be a positive number, got " + std::to_string(lr));
  require(std::isfinite(weight_decay), "--weight-decay must be a number");
  require_non_negative("warmup", warmup);
  require(std::isfinite(min_lr) && min_lr >= 0 && min_lr <= lr,
          "--min-lr must be between 0 and --lr (" + std::to_string(lr) + "), got " + std::to_string(min_lr));
  require(std::isfinite(clip) && clip >= 0, "--clip must be 0 (off) or positive, got " + std::to_string(clip));
  require(threads >= 0 && threads <= 1024, "--threads must be between 0 (all cores) and 1024, got " +
                                               std::to_string(threads));
  require_positive("eval-batch", eval_batch);
  require_positive("log-every", log_every);
  require_non_negative("analyze-every", analyze_every);
  require_non_negative("checkpoint-every", checkpoint_every);
  require(optimizer == "adamw" || optimizer == "adam" || optimizer == "sgd",
          "--optimizer must be adamw, adam or sgd, got '" + optimizer + "'");
  try {
    (void)optim::parse_schedule_kind(schedule);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--schedule: ") + e.what());
  }
  // Guards against absurd sizes that would only fail later, deep in an allocation.
  const double params = static_cast<double>(layers) * 12.0 * static_cast<double>(d_model) *
                        static_cast<double>(d_model);
  char about[32];
  std::snprintf(about, sizeof about, "%.3g", params);  // beyond int64 for the largest sizes
  require(params < 2e9, std::string("the model would have about ") + about +
                            " parameters; headlab trains toy models (reduce --layers or --d-model)");
}

layers::TransformerOptions TrainConfig::model_options(int64_t vocab_size, int64_t classes,
                                                      int64_t max_seq_len) const {
  layers::TransformerOptions o;
  o.vocab(vocab_size)
      .classes(classes)
      .max_seq_len(max_seq_len)
      .layers(layers)
      .heads(heads)
      .d_model(d_model)
      .d_ff(d_ff > 0 ? d_ff : 4 * d_model)
      .attn_only(attn_only)
      .layernorm(!no_layernorm)
      .causal(!bidirectional);
  return o;
}

optim::ScheduleOptions TrainConfig::schedule_options() const {
  optim::ScheduleOptions s;
  s.set_kind(optim::parse_schedule_kind(schedule))
      .set_base_lr(lr)
      .set_warmup_steps(warmup)
      .set_total_steps(std::max(steps, warmup))
      .set_min_lr(min_lr)
      .set_step_size(std::max<int64_t>(1, steps / 3))
      .set_gamma(0.1);
  return s;
}

nlohmann::json to_json(const TrainConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  TrainConfig::visit_fields(config, [&](const char* name, const auto& field, const char*) { j[name] = field; });
  return j;
}

void apply_json(TrainConfig& config, const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw UsageError(source + ": the config must be a JSON object of flag names to values");
  for (const auto& item : j.items()) {
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    bool known = false;
    TrainConfig::visit_fields(config, [&](const char* name, auto& field, const char*) {
      if (key != name) return;
      known = true;
      using T = std::decay_t<decltype(field)>;
      const bool fits = [&] {
        if constexpr (std::is_same_v<T, bool>) return value.is_boolean();
        else if constexpr (std::is_same_v<T, std::string>) return value.is_string();
        else if constexpr (std::is_floating_point_v<T>) return value.is_number();
        else if constexpr (std::is_unsigned_v<T>)
          return value.is_number_unsigned() && value.get<uint64_t>() <= std::numeric_limits<T>::max();
        else
          return value.is_number_integer() &&
                 (value.is_number_unsigned() ? value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                                             : value.get<int64_t>() >= std::numeric_limits<T>::min() &&
                                                   value.get<int64_t>() <= std::numeric_limits<T>::max());
      }();
      if (!fits)
        throw UsageError(source + ": \"" + key + "\" has the wrong type or is out of range (" + value.type_name() + "): " +
                         brief_json(value));
      field = value.get<T>();
    });
    if (!known) {
      std::string valid;
      TrainConfig::visit_fields(config, [&](const char* name, const auto&, const char*) {
        valid += (valid.empty() ? "" : ", ") + std::string(name);
      });
      throw UsageError(source + ": unknown key \"" + brief_text(key) + "\" (valid keys: " + valid + ")");
    }
  }
}

}  // namespace headlab::train
