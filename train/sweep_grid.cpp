#include "train/sweep_grid.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <type_traits>

#include "core/shortest.h"
#include "train/decimal.h"
#include "train/errors.h"
#include "train/json_input.h"
#include "train/run_builder.h"
#include "train/tasks.h"

namespace headlab::train {
namespace {

enum class Kind { none, whole, number, choice, boolean };

// The kind of a training flag's values, from its field's type.
Kind kind_of(const std::string& flag) {
  // The sweep's own per-run flags, and file names: a path may hold a comma.
  if (flag == "seed" || flag == "heads" || flag == "threads" || flag == "data" || flag == "eval-data" || flag == "init")
    return Kind::none;
  Kind kind = Kind::none;
  TrainConfig config;
  TrainConfig::visit_fields(config, [&](const char* name, auto& field, const char*) {
    if (flag != name) return;
    using T = std::decay_t<decltype(field)>;
    // A switch (--attn-only, and --no-layernorm, whose field is its negation:
    // config.json holds the switch's own value) takes true,false.
    if constexpr (std::is_same_v<T, bool> || is_negated_v<T>) kind = Kind::boolean;
    else if constexpr (std::is_same_v<T, std::vector<double>> || std::is_same_v<T, std::vector<std::string>>)
      kind = Kind::none;  // a list per run (--betas, --expect), not one a sweep varies
    else if constexpr (std::is_integral_v<T>) kind = Kind::whole;
    else if constexpr (std::is_floating_point_v<T>) kind = Kind::number;
    else if constexpr (std::is_same_v<T, std::string>) kind = Kind::choice;
  });
  return kind;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A name part of a run folder: letters, digits and . _ + - only.
bool folder_safe(const std::string& text) {
  if (text.empty() || text.size() > 64) return false;
  for (const char ch : text)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '+' || ch == '-')) return false;
  return true;
}

// Checks one value of `flag` as config.json would hold it; UsageError naming `where`.
void check_value(const std::string& flag, Kind kind, const nlohmann::json& value, const std::string& where) {
  const std::string shown = value.is_string() ? "'" + value.get<std::string>() + "'" : value.dump();
  bool ok = false;
  switch (kind) {
    case Kind::whole: ok = value.is_number_integer() || (flag == "batch" && value == "full"); break;
    case Kind::number: ok = value.is_number() && std::isfinite(value.get<double>()); break;
    case Kind::choice: ok = value.is_string() && folder_safe(value.get<std::string>()); break;
    case Kind::boolean: ok = value.is_boolean(); break;
    case Kind::none: break;
  }
  if (!ok) {
    const char* want = kind == Kind::whole    ? "a whole number"
                       : kind == Kind::number ? "a finite number"
                       : kind == Kind::boolean ? "true or false"
                                               : "a name of letters, digits, '.', '_' or '-'";
    throw UsageError(where + ": " + shown + " is not a value of --" + flag + " (want " + want + ")");
  }
  if (value.dump().size() > 64) throw UsageError(where + ": " + brief_json(value) + " is too long a value of --" + flag);
}

void add_value(GridAxis& axis, nlohmann::json value, const std::string& where) {
  for (const nlohmann::json& v : axis.values)
    // 1e-3 and 0.001 are one value; so are 2 and 2.0.
    if (v == value || (v.is_number() && value.is_number() && v.get<double>() == value.get<double>()))
      throw UsageError(where + ": " + setting_text(value) + " is listed twice");
  if (axis.values.size() >= kMaxGridValues)
    throw UsageError(where + ": more than " + std::to_string(kMaxGridValues) + " values");
  axis.values.push_back(std::move(value));
}

// A switch's value as the command line may write it: true/false, on/off, 1/0
// or yes/no, in any case; absent for anything else.
std::optional<bool> switch_value(std::string_view item) {
  std::string lower(item);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "true" || lower == "on" || lower == "1" || lower == "yes") return true;
  if (lower == "false" || lower == "off" || lower == "0" || lower == "no") return false;
  return std::nullopt;
}

// A task's own target accuracy (the one `headlab train` holds a too small
// model's run to), else the sweep's default.
double task_target(const std::string& task) {
  const std::optional<SuggestedModel> model = suggested_model(task);
  return model ? model->target_accuracy : kDefaultTargetAccuracy;
}

}  // namespace

bool is_grid_flag(const std::string& flag) { return kind_of(flag) != Kind::none; }

GridAxis parse_grid_axis(const std::string& flag, const std::string& text) {
  const Kind kind = kind_of(flag);
  if (kind == Kind::none) throw UsageError("--" + flag + " takes no list in a sweep");
  const std::string where = "--" + flag + " '" + text + "'";
  const auto whole = [&](std::string_view part) -> int64_t {
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (std::string why = non_decimal_integer(part); !why.empty()) throw UsageError(where + ": " + why);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size())
      throw UsageError(where + ": '" + std::string(part) + "' is not a whole number (write numbers and ranges, like 1,2 or 1-4)");
    return value;
  };
  GridAxis axis{flag, {}};
  if (trim(text).empty()) throw UsageError(where + ": the list is empty");
  std::string_view rest = text;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    if (item.empty()) throw UsageError(where + ": an empty item (a comma at an end, or two in a row)");
    if (kind == Kind::whole && !(flag == "batch" && item == "full")) {
      // "2-4" is a range; "-1" a negative number (the flag's own check refuses it if it must).
      const std::size_t dash = item.find('-', 1);
      const int64_t lo = whole(item.substr(0, dash));
      const int64_t hi = dash == std::string_view::npos ? lo : whole(item.substr(dash + 1));
      if (hi < lo) throw UsageError(where + ": the range " + std::string(item) + " runs backwards");
      if (static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) >= kMaxGridValues)
        throw UsageError(where + ": more than " + std::to_string(kMaxGridValues) + " values");
      for (int64_t v = lo; v <= hi; ++v) add_value(axis, v, where);
    } else if (kind == Kind::boolean) {
      const std::optional<bool> value = switch_value(item);
      if (!value)
        throw UsageError(where + ": '" + std::string(item) + "' is not on or off (write true,false, on,off or 1,0; " +
                         "--" + flag + " alone is on)");
      add_value(axis, *value, where);
    } else if (kind == Kind::number) {
      const std::string part(item);
      char* end = nullptr;
      const double value = std::strtod(part.c_str(), &end);
      if (end != part.c_str() + part.size() || !std::isfinite(value))
        throw UsageError(where + ": '" + part + "' is not a finite number (write a list like 1e-3,3e-3,1e-2)");
      add_value(axis, value, where);
    } else {
      nlohmann::json value = std::string(item);
      check_value(flag, kind, value, where);
      add_value(axis, std::move(value), where);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return axis;
}

std::vector<SweepCell> SweepPlan::cells() const {
  std::vector<SweepCell> out(1);
  for (const GridAxis& axis : axes) {
    std::vector<SweepCell> next;
    for (const SweepCell& c : out)
      for (const nlohmann::json& v : axis.values) {
        SweepCell cell = c;
        cell.settings[axis.flag] = v;
        next.push_back(std::move(cell));
      }
    out = std::move(next);
  }
  std::vector<SweepCell> with_heads;
  for (const SweepCell& c : out)
    for (const int64_t h : heads) {
      SweepCell cell = c;
      cell.heads = h;
      with_heads.push_back(std::move(cell));
    }
  return with_heads;
}

std::vector<SweepRun> SweepPlan::runs() const {
  std::vector<SweepRun> plan;
  for (const SweepCell& cell : cells())
    for (const int64_t s : seeds) {
      SweepRun run;
      run.settings = cell.settings;
      run.heads = cell.heads;
      run.seed = s;
      run.dir = run_dir_name(cell, s);
      plan.push_back(std::move(run));
    }
  return plan;
}

void SweepPlan::check_size(const std::string& where) const {
  std::size_t runs = seeds.size();
  std::vector<std::size_t> sizes{heads.size()};
  for (const GridAxis& a : axes) sizes.push_back(a.values.size());
  for (const std::size_t n : sizes) {
    if (n == 0 || runs > kMaxSweepRuns / n)
      throw UsageError(where + ": the plan has " + (n == 0 ? "no" : "more than " + std::to_string(kMaxSweepRuns)) +
                       " runs (a sweep takes at most " + std::to_string(kMaxSweepRuns) + ")");
    runs *= n;
  }
}

std::vector<std::string> SweepPlan::varied() const {
  std::vector<std::string> out;
  for (const GridAxis& axis : axes) out.push_back(axis.flag);
  if (heads.size() > 1) out.emplace_back("heads");
  return out;
}

double default_target_accuracy(const TrainConfig& base, const std::vector<GridAxis>& axes) {
  if (!base.data.empty()) return kDefaultTargetAccuracy;  // the runs train on a file, not on a task
  std::vector<std::string> tasks = {base.task};
  for (const GridAxis& axis : axes)
    if (axis.flag == "task") {
      tasks.clear();
      for (const nlohmann::json& v : axis.values) tasks.push_back(v.get<std::string>());
    }
  const double target = task_target(tasks.front());
  for (const std::string& task : tasks)
    if (task_target(task) != target) return kDefaultTargetAccuracy;  // no one target fits every task
  return target;
}

std::string task_targets_text() {
  std::string out;
  for (const TaskInfo& task : task_catalog())
    if (const std::optional<SuggestedModel> model = suggested_model(task.name))
      out += (out.empty() ? "" : ", ") + task.name + " " + core::shortest(model->target_accuracy);
  return out;
}

TrainConfig cell_config(const TrainConfig& base, const SweepCell& cell) {
  TrainConfig config = base;
  apply_json(config, cell.settings, cell.name());
  config.model.heads = cell.heads;
  return config;
}

nlohmann::ordered_json grid_json(const std::vector<GridAxis>& axes) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const GridAxis& axis : axes) out[axis.flag] = axis.values;
  return out;
}

std::vector<int64_t> checked_int_list(const nlohmann::json& values, const std::string& what, int64_t min_value,
                                      int64_t max_value, std::size_t max_items) {
  if (!values.is_array() || values.empty()) throw UsageError(what + " must be a non-empty list of whole numbers");
  if (values.size() > max_items)
    throw UsageError(what + " lists " + std::to_string(values.size()) + " values, more than " +
                     std::to_string(max_items));
  std::vector<int64_t> out;
  for (const nlohmann::json& v : values) {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max_value)))
      throw UsageError(what + ": " + brief_json(v) + " is not a whole number from " + std::to_string(min_value) +
                       " to " + std::to_string(max_value));
    const int64_t x = v.get<int64_t>();
    if (x < min_value || x > max_value)
      throw UsageError(what + ": " + std::to_string(x) + " is not from " + std::to_string(min_value) + " to " +
                       std::to_string(max_value));
    for (const int64_t seen : out)
      if (seen == x) throw UsageError(what + ": " + std::to_string(x) + " is listed twice");
    out.push_back(x);
  }
  return out;
}

SweepPlan plan_from_json(const nlohmann::json& saved, const std::string& source) {
  if (!saved.is_object()) throw UsageError(source + ": not a sweep's plan (a JSON object)");
  const auto need = [&](const char* key) -> const nlohmann::json& {
    const auto it = saved.find(key);
    if (it == saved.end()) throw UsageError(source + ": not a sweep's plan (no \"" + std::string(key) + "\")");
    return *it;
  };
  SweepPlan plan;
  plan.seeds = checked_int_list(need("seeds"), source + ": \"seeds\"", 0, INT64_MAX, kMaxSweepRuns);
  plan.heads = checked_int_list(need("heads"), source + ": \"heads\"", 1, kMaxSweepHeads, kMaxGridValues);
  const nlohmann::json& target = need("target_accuracy");
  if (!target.is_number() || !(target.get<double>() > 0 && target.get<double>() <= 1))
    throw UsageError(source + ": \"target_accuracy\" " + brief_json(target) + " is not a fraction in (0, 1]");
  plan.target_accuracy = target.get<double>();
  if (const auto grid = saved.find("grid"); grid != saved.end()) {
    if (!grid->is_object()) throw UsageError(source + ": \"grid\" must be an object of flag names to lists");
    for (const auto& item : grid->items()) {
      const std::string where = source + ": \"grid\" \"" + item.key() + "\"";
      const Kind kind = kind_of(item.key());
      if (kind == Kind::none) throw UsageError(where + ": not a flag a sweep varies");
      if (!item.value().is_array() || item.value().size() < 2)
        throw UsageError(where + ": must be a list of two or more values");
      GridAxis axis{item.key(), {}};
      for (const nlohmann::json& v : item.value()) {
        check_value(item.key(), kind, v, where);
        add_value(axis, v, where);
      }
      plan.axes.push_back(std::move(axis));
    }
    // In the order of the training flags, as the command line's (a JSON object's keys come sorted).
    std::vector<GridAxis> ordered;
    TrainConfig config;
    TrainConfig::visit_fields(config, [&](const char* name, auto&, const char*) {
      for (GridAxis& a : plan.axes)
        if (a.flag == name) ordered.push_back(std::move(a));
    });
    plan.axes = std::move(ordered);
  }
  plan.check_size(source);
  return plan;
}

std::vector<std::string> run_departures(TrainConfig planned, const TrainConfig& run) {
  derive_run_settings(planned, 1);  // a sweep's runs are one process each
  planned.threads = run.threads;
  return differing_keys(to_json(planned), to_json(run));
}

std::vector<std::string> differing_keys(const nlohmann::json& a, const nlohmann::json& b) {
  const auto shown = [](const nlohmann::json& j, const std::string& key) {
    const auto it = j.find(key);
    return it == j.end() ? std::string("none") : brief_json(*it);
  };
  std::vector<std::string> out;
  for (const auto& item : a.items())
    if (!b.contains(item.key()) || b.at(item.key()) != item.value())
      out.push_back(item.key() + " " + shown(a, item.key()) + " vs " + shown(b, item.key()));
  for (const auto& item : b.items())
    if (!a.contains(item.key())) out.push_back(item.key() + " none vs " + shown(b, item.key()));
  return out;
}

}  // namespace headlab::train
