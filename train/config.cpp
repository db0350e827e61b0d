#include "train/config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/gemm.h"
#include "core/shortest.h"
#include "layers/init_scale.h"
#include "train/errors.h"
#include "train/nearest_name.h"
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

// The optimizer computes in float32: a setting below its smallest normal
// number underflows (an --eps of 0 divides 0 by 0 for a weight without a
// gradient yet), and one beyond its largest is infinite.
void require_float32(const char* flag, double value) {
  constexpr double lowest = std::numeric_limits<float>::min(), highest = std::numeric_limits<float>::max();
  require(value >= lowest && value <= highest,
          "--" + std::string(flag) + " " + core::shortest(value) + " is " +
              (value < lowest ? "below 1.18e-38, float32's smallest normal number"
                              : "beyond 3.4e38, float32's largest number") +
              ", and the optimizer computes in float32");
}

// Whether a JSON value can be assigned to a field of type T.
template <class T>
bool fits(const nlohmann::json& value) {
  if constexpr (std::is_same_v<T, bool> || is_negated_v<T>) return value.is_boolean();
  else if constexpr (std::is_same_v<T, std::string>) return value.is_string();
  else if constexpr (std::is_floating_point_v<T>) return value.is_number();
  else if constexpr (std::is_same_v<T, std::vector<double>>)
    return value.is_array() && std::all_of(value.begin(), value.end(), [](const auto& v) { return v.is_number(); });
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return value.is_array() && std::all_of(value.begin(), value.end(), [](const auto& v) { return v.is_string(); });
  else if constexpr (std::is_unsigned_v<T>)
    return value.is_number_unsigned() && value.get<uint64_t>() <= std::numeric_limits<T>::max();
  else
    return value.is_number_integer() &&
           (value.is_number_unsigned() ? value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                                       : value.get<int64_t>() >= std::numeric_limits<T>::min() &&
                                             value.get<int64_t>() <= std::numeric_limits<T>::max());
}

// What fits a field of type T, for the message refusing `value`: as the
// flags' messages say it.
template <class T>
std::string what_fits(const nlohmann::json& value) {
  if constexpr (std::is_same_v<T, bool> || is_negated_v<T>) return "true or false";
  else if constexpr (std::is_same_v<T, std::string>) return "a string (in double quotes)";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_same_v<T, std::vector<double>>) return "a list of numbers (such as [0.9, 0.98])";
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return "a list of names (such as [\"previous-token\"])";
  else if (value.is_number_integer())  // a whole number out of the field's range
    return "a whole number from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
           std::to_string(std::numeric_limits<T>::max());
  else
    return std::is_unsigned_v<T> ? "a whole number, 0 or more (such as 100)" : "a whole number (such as 100)";
}

}  // namespace

std::string default_gemm_backend() { return core::default_gemm_backend_name(); }
std::string default_gemm_precision() { return core::default_gemm_precision_name(); }

void TrainConfig::validate() const {
  // Strings go into config.json and checkpoints as JSON, which holds UTF-8 only.
  visit_fields(*this, [](const char* name, const auto& field, const char*) {
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, std::string>) {
      try {
        (void)nlohmann::json(field).dump();
      } catch (const nlohmann::json::exception&) {
        throw UsageError("--" + std::string(name) + " " + brief_json(nlohmann::json(field)) +
                         " is not valid UTF-8 text: config.json and the checkpoints record it as JSON, which holds "
                         "UTF-8 only; give it a name in UTF-8 (rename it, or link to it under one)");
      }
    }
  });
  require(!task.empty() || !data.empty(), "--task must name a task (see `headlab tasks`)");
  require_non_negative("vocab", model.vocab);
  require_non_negative("seq-len", model.max_seq_len);
  require_non_negative("classes", model.classes);
  require_non_negative("d-ff", model.d_ff);
  // Bounds first: a size beyond them is the problem to name, before whether
  // it divides (--d-model 9223372036854775807 is not "try --heads 7"), and
  // before any arithmetic below (or in a message) can overflow.
  for (const auto& [flag, value] :
       {std::pair<const char*, int64_t>{"vocab", model.vocab}, {"seq-len", model.max_seq_len},
        {"classes", model.classes}, {"layers", model.layers}, {"heads", model.heads}, {"d-model", model.d_model},
        {"d-ff", model.d_ff}})
    require(value <= kMaxSize, "--" + std::string(flag) + " " + std::to_string(value) + " is beyond the " +
                                   std::to_string(kMaxSize) + " headlab supports (it trains toy models)");
  // The task fixes vocab and seq-len left at 0 once it is built; the rest of
  // the model can be checked now.
  layers::ModelSpec known = model;
  if (known.vocab == 0) known.vocab = 1;
  if (known.max_seq_len == 0) known.max_seq_len = 1;
  validate_model(known);
  require_non_negative("batch", batch);
  require_non_negative("train-size", train_size);
  require(std::isfinite(train_fraction) && train_fraction >= 0 && train_fraction < 1,
          "--train-fraction must be in (0, 1), or 0 for off, got " + core::shortest(train_fraction));
  require(train_size == 0 || train_fraction == 0,
          "give --train-size or --train-fraction, not both (--train-size " + std::to_string(train_size) +
              ", --train-fraction " + core::shortest(train_fraction) + ")");
  require(data.empty() || (train_size == 0 && train_fraction == 0),
          "--data is already a fixed training set: it takes no --train-size or --train-fraction (give a held-out "
          "file with --eval-data)");
  require(std::isfinite(eval_fraction) && eval_fraction >= 0 && eval_fraction < 1,
          "--eval-fraction must be in (0, 1), or 0 for off, got " + core::shortest(eval_fraction));
  require(eval_fraction == 0 || (!data.empty() && eval_data.empty()),
          "--eval-fraction holds part of a --data file out; " +
              std::string(data.empty() ? "give --data FILE (a task's held-out batch is already apart from training)"
                                       : "with --eval-data there is nothing to hold out: give one of them"));
  if (betas.size() != 2) {
    // "got 1" would read as the value 1: the count, then the numbers given.
    std::string given;
    for (const double b : betas) given += (given.empty() ? "" : ",") + core::shortest(b);
    throw UsageError("--betas takes two numbers B1,B2 (such as 0.9,0.98), got " + std::to_string(betas.size()) +
                     (betas.size() == 1 ? " number" : " numbers") + (given.empty() ? "" : ": " + given));
  }
  for (const double b : betas)
    require(std::isfinite(b) && b >= 0 && b < 1, "--betas: each must be in [0, 1), got " + core::shortest(b));
  require(std::isfinite(eps) && eps > 0, "--eps must be a positive number, got " + core::shortest(eps));
  require_float32("eps", eps);
  // Above kMaxEps the eps in Adam's denominator outweighs sqrt(v) for any
  // gradient smaller than it, and the update becomes lr * m / eps: SGD with a
  // learning rate of lr / eps (1e30 never moves at all).
  require(eps <= kMaxEps, "--eps " + core::shortest(eps) + " is above " + core::shortest(kMaxEps) +
                              ": an eps that large outweighs the gradients' scale and Adam's update shrinks to "
                              "lr * m / eps; typical values are 1e-8 to 1e-6 (or use --optimizer sgd)");
  require(optimizer != "sgd" || (betas == TrainConfig{}.betas && eps == TrainConfig{}.eps),
          "--betas and --eps are Adam's and AdamW's: --optimizer sgd has neither");
  if (const std::string error = layers::init_rule_error(init_std); !error.empty()) throw UsageError(error);
  require(init.empty() || init_std == layers::kDefaultInitStd,
          "--init-std " + init_std + " scales the seed's weights, but --init starts from a checkpoint's: give one of "
          "them");
  require(loss_dtype == "f32" || loss_dtype == "f64", "--loss-dtype must be f32 or f64, got '" + loss_dtype + "'");
  require(split_seed >= -1, "--split-seed must be a seed (0 or more), or -1 for --seed, got " +
                                std::to_string(split_seed));
  require(split_seed == -1 || train_size > 0 || train_fraction > 0 || eval_fraction > 0,
          "--split-seed " + std::to_string(split_seed) +
              " seeds the draw of a finite training set: give --train-size, --train-fraction or --eval-fraction too");
  require_non_negative("micro-batches", micro_batches);
  require_non_negative("steps", steps);
  require(std::isfinite(lr) && lr > 0, "--lr must be a positive number, got " + core::shortest(lr));
  require_float32("lr", lr);
  require(std::isfinite(weight_decay), "--weight-decay must be a number (negative for the optimizer's default), got " +
                                           core::shortest(weight_decay));
  // Each step takes lr * weight-decay * w off every weight w (AdamW and SGD
  // exactly; Adam through the gradient): at 1 or more that removes the whole
  // weight or more, and the weights are zeroed, flip sign or grow.
  require(weight_decay * lr < 1, "--weight-decay " + core::shortest(weight_decay) + " is too large for --lr " +
                                     core::shortest(lr) + ": lr x weight-decay must be below 1 (--weight-decay below " +
                                     core::shortest(1 / lr) + " here), or each step removes the whole weight or more; "
                                     "typical values are 0 to 1");
  require_non_negative("warmup", warmup);
  require(std::isfinite(min_lr) && min_lr >= 0 && min_lr <= lr,
          "--min-lr must be between 0 and --lr (" + core::shortest(lr) + "), got " + core::shortest(min_lr));
  require(std::isfinite(clip) && clip >= 0, "--clip must be 0 (off) or positive, got " + core::shortest(clip));
  // A --clip above every gradient's norm is no clipping; one that underflows clips every gradient to 0.
  if (clip > 0 && clip < 1) require_float32("clip", clip);
  require(threads >= 0 && threads <= 1024, "--threads must be between 0 (picked from the model's size) and 1024, got " +
                                               std::to_string(threads));
  require(gemm == "onednn" || gemm == "openblas",
          "--gemm must be onednn or openblas, got '" + gemm + "' (HEADLAB_GEMM, if set, is the default)");
  require(precision == "f32" || precision == "bf16",
          "--precision must be f32 or bf16, got '" + precision + "' (HEADLAB_PRECISION, if set, is the default)");
  require_positive("eval-batch", eval_batch);
  require_non_negative("log-every", log_every);
  require_non_negative("analyze-every", analyze_every);
  require_non_negative("checkpoint-every", checkpoint_every);
  require_non_negative("snapshot-every", snapshot_every);
  require_non_negative("keep-snapshots", keep_snapshots);
  require_non_negative("schedule-steps", schedule_steps);
  require(optimizer == "adamw" || optimizer == "adam" || optimizer == "sgd",
          "--optimizer must be adamw, adam or sgd, got '" + optimizer + "'");
  // The flag's own message, not the library's (which names its function).
  const std::vector<std::string> schedules = optim::schedule_kind_names();
  if (std::find(schedules.begin(), schedules.end(), schedule) == schedules.end()) {
    std::string valid;
    for (std::size_t i = 0; i < schedules.size(); ++i)
      valid += (i == 0 ? "" : i + 1 == schedules.size() ? " or " : ", ") + schedules[i];
    const std::string near = nearest_name(schedule, schedules);
    throw UsageError("--schedule must be " + valid + ", got '" + schedule + "'" +
                     (near.empty() ? "" : " (did you mean " + near + "?)"));
  }
  // A cosine or linear decay runs from the end of the warmup to its horizon:
  // a warmup that reaches the horizon leaves no decay, and the learning rate
  // would drop from its peak straight to --min-lr where the warmup ends.
  if (schedule == "cosine" || schedule == "linear") {
    const int64_t horizon = schedule_steps > 0 ? schedule_steps : steps;
    require(warmup == 0 || warmup < horizon,
            "--warmup " + std::to_string(warmup) + " leaves no room for the " + schedule +
                " decay, which ends at step " + std::to_string(horizon) +
                (schedule_steps > 0 ? " (--schedule-steps)" : " (--steps)") + ": give a --warmup below " +
                std::to_string(horizon) +
                (schedule_steps > 0 ? ", or a later --schedule-steps" : ", or more --steps"));
  }
  // Guards against absurd sizes that would only fail later, deep in an allocation.
  const double params = static_cast<double>(model.layers) * 12.0 * static_cast<double>(model.d_model) *
                        static_cast<double>(model.d_model);
  char about[32];
  std::snprintf(about, sizeof about, "%.3g", params);  // beyond int64 for the largest sizes
  require(params < 2e9, std::string("the model would have about ") + about +
                            " parameters; headlab trains toy models (reduce --layers or --d-model)");
}

std::vector<std::string> TrainConfig::inert_settings() const {
  std::vector<std::string> out;
  if (keep_snapshots > 0 && snapshot_every == 0)
    out.push_back("--keep-snapshots " + std::to_string(keep_snapshots) +
                  " does nothing without --snapshot-every N: no snapshot is taken");
  if (snapshot_every > steps)
    out.push_back("--snapshot-every " + std::to_string(snapshot_every) + " takes no snapshot in a run of --steps " +
                  std::to_string(steps) + ": the first would be at step " + std::to_string(snapshot_every));
  // An attention-only model has no MLP, whose width and activation these are.
  if (model.attn_only && model.d_ff != 0)
    out.push_back("--d-ff " + std::to_string(model.d_ff) + " does nothing with --attn-only: the model has no MLP");
  if (model.attn_only && model.activation != layers::ModelSpec{}.activation)
    out.push_back("--activation " + model.activation + " does nothing with --attn-only: the model has no MLP");
  // A decaying schedule's warmup beyond its horizon is refused (validate).
  if (warmup > steps && steps > 0)
    out.push_back("--warmup " + std::to_string(warmup) + " outlasts the run's --steps " + std::to_string(steps) +
                  ": the learning rate rises only to " +
                  core::shortest(optim::Schedule(schedule_options()).lr_at(steps - 1)) + ", short of --lr " +
                  core::shortest(lr));
  return out;
}

std::string model_flag(const std::string& field) {
  // The flag whose field is the spec's field of that name.
  TrainConfig c;
  const void* target = nullptr;
  layers::ModelSpec::visit_fields(c.model, [&](const char* name, const auto& f) {
    if (field == name) target = &f;
  });
  std::string flag = field;
  TrainConfig::visit_fields(c, [&](const char* name, const auto& f, const char*) {
    const void* at = nullptr;
    if constexpr (is_negated_v<std::decay_t<decltype(f)>>) at = &f.field;
    else at = &f;
    if (at == target) flag = name;
  });
  return "--" + flag;
}

void validate_model(const layers::ModelSpec& spec) {
  try {
    spec.validate(model_flag);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

void take_model(TrainConfig& config, const layers::ModelSpec& model, const std::vector<std::string>& given,
                const std::string& source) {
  TrainConfig from = config;
  from.model = model.resolved();
  const auto* begin = reinterpret_cast<const char*>(&config.model);
  const auto is_model_field = [&](const void* field) {
    const auto* at = static_cast<const char*>(field);
    return at >= begin && at < begin + sizeof(config.model);
  };
  // The flag's value as the user wrote it (a Negated flag is true when its
  // field is false).
  const auto flag_value = [](const auto& field) -> nlohmann::json {
    if constexpr (is_negated_v<std::decay_t<decltype(field)>>) return !field.field;
    else return field;
  };
  TrainConfig::visit_fields(config, [&](const char* name, const auto& mine, const char*) {
    if (std::find(given.begin(), given.end(), name) == given.end()) return;
    if constexpr (is_negated_v<std::decay_t<decltype(mine)>>) {
      if (!is_model_field(&mine.field)) return;
    } else {
      if (!is_model_field(&mine)) return;
    }
    const nlohmann::json value = flag_value(mine);
    if (value == 0) return;  // the default, whatever the checkpoint's is
    TrainConfig::visit_fields(from, [&](const char* other, const auto& theirs, const char*) {
      if (std::string(other) != name) return;
      const nlohmann::json wanted = flag_value(theirs);
      if (wanted != value)
        throw UsageError("--" + std::string(name) + " " + value.dump() + " conflicts with the model of --init " +
                         source + ", which has --" + name + " " + wanted.dump() +
                         " (--init takes the whole model from the checkpoint: leave out --" + name + ")");
    });
  });
  // An attention-only model has no MLP: its width and activation, which the
  // checkpoint's spec holds resolved (d_ff 4 d_model), stay as the user gave
  // them (checked above), else unset, so that the run does not warn of a
  // --d-ff nobody gave.
  if (from.model.attn_only) {
    from.model.d_ff = config.model.d_ff;
    from.model.activation = config.model.activation;
  }
  config.model = from.model;
}

optim::ScheduleOptions TrainConfig::schedule_options() const {
  const int64_t horizon = schedule_steps > 0 ? schedule_steps : steps;
  optim::ScheduleOptions s;
  s.set_kind(optim::parse_schedule_kind(schedule))
      .set_base_lr(lr)
      .set_warmup_steps(warmup)
      .set_total_steps(std::max(horizon, warmup))
      .set_min_lr(min_lr)
      .set_step_size(std::max<int64_t>(1, horizon / 3))
      .set_gamma(0.1);
  return s;
}

nlohmann::json to_json(const TrainConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  TrainConfig::visit_fields(config, [&](const char* name, const auto& field, const char*) {
    if constexpr (is_negated_v<std::decay_t<decltype(field)>>) j[name] = !field.field;
    else j[name] = field;
  });
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
      if constexpr (std::is_same_v<T, int64_t>)
        if (key == "batch" && value == "full") {  // as on the command line
          field = 0;
          return;
        }
      if (!fits<T>(value))
        throw UsageError(source + ": \"" + key + "\" takes " + what_fits<T>(value) +
                         (key == "batch" ? " or \"full\"" : "") + ", got " + brief_json(value));
      if constexpr (is_negated_v<T>) field.field = !value.get<bool>();
      else field = value.get<T>();
    });
    if (!known) {
      std::string valid;
      std::vector<std::string> names;
      TrainConfig::visit_fields(config, [&](const char* name, const auto&, const char*) {
        valid += (valid.empty() ? "" : ", ") + std::string(name);
        names.emplace_back(name);
      });
      const std::string near = nearest_name(key, names);
      throw UsageError(source + ": unknown key \"" + brief_text(key) + "\"" +
                       (near.empty() ? "" : " (did you mean \"" + near + "\"?)") + " (valid keys: " + valid + ")");
    }
  }
}

TrainConfig stored_config(const nlohmann::json& j, const std::string& source) {
  TrainConfig config;
  config.precision = "f32";  // before the keys: a stored "precision" wins
  apply_json(config, j, source);
  return config;
}

}  // namespace headlab::train
