#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "core/shortest.h"

namespace headlab::optim {

namespace {

constexpr std::pair<ScheduleKind, const char*> kNames[] = {
    {ScheduleKind::constant, "constant"},
    {ScheduleKind::cosine, "cosine"},
    {ScheduleKind::linear, "linear"},
    {ScheduleKind::step, "step"},
};

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("optim::Schedule: " + what); }

}  // namespace

std::string to_string(ScheduleKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::vector<std::string> schedule_kind_names() {
  std::vector<std::string> names;
  for (const auto& [kind, name] : kNames) names.emplace_back(name);
  return names;
}

ScheduleKind parse_schedule_kind(std::string_view name) {
  std::string valid;
  for (const auto& [kind, known] : kNames) {
    if (name == known) return kind;
    valid += valid.empty() ? known : std::string(", ") + known;
  }
  throw std::invalid_argument("optim::parse_schedule_kind: unknown schedule '" + std::string(name) +
                              "' (valid: " + valid + ")");
}

Schedule::Schedule(const ScheduleOptions& options) : options_(options) {
  const ScheduleOptions& o = options_;
  if (!std::isfinite(o.base_lr) || o.base_lr < 0.0)
    bad("base_lr must be finite and >= 0, got " + core::shortest(o.base_lr));
  if (!(o.min_lr >= 0.0 && o.min_lr <= o.base_lr)) {
    bad("min_lr must lie in [0, base_lr = " + core::shortest(o.base_lr) + "], got " + core::shortest(o.min_lr));
  }
  if (o.warmup_steps < 0) bad("warmup_steps must be >= 0, got " + std::to_string(o.warmup_steps));
  const bool decays_to_end = o.kind == ScheduleKind::cosine || o.kind == ScheduleKind::linear;
  if (decays_to_end && o.total_steps < o.warmup_steps) {
    bad(to_string(o.kind) + " needs total_steps >= warmup_steps, got total_steps " + std::to_string(o.total_steps) +
        " and warmup_steps " + std::to_string(o.warmup_steps));
  }
  if (o.kind == ScheduleKind::step) {
    if (o.step_size <= 0) bad("step needs step_size > 0, got " + std::to_string(o.step_size));
    if (!(o.gamma > 0.0 && o.gamma <= 1.0)) bad("step needs gamma in (0, 1], got " + core::shortest(o.gamma));
  }
}

double Schedule::lr_at(int64_t step) const {
  const ScheduleOptions& o = options_;
  if (step < 0) bad("lr_at: step must be >= 0, got " + std::to_string(step));
  if (step < o.warmup_steps) {
    return o.base_lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  }
  const int64_t after = step - o.warmup_steps;
  const int64_t span = o.total_steps - o.warmup_steps;
  const double progress = span <= 0 ? 1.0 : std::min(1.0, static_cast<double>(after) / static_cast<double>(span));
  switch (o.kind) {
    case ScheduleKind::constant:
      return o.base_lr;
    case ScheduleKind::cosine:
      return o.min_lr + (o.base_lr - o.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    case ScheduleKind::linear:
      return o.base_lr + (o.min_lr - o.base_lr) * progress;
    case ScheduleKind::step:
      return std::max(o.min_lr, o.base_lr * std::pow(o.gamma, static_cast<double>(after / o.step_size)));
  }
  return o.base_lr;
}

}  // namespace headlab::optim
