// Learning-rate schedules: a value object mapping a step to a learning rate.
//
// Steps count from 0: lr_at(s) is the rate for the update that follows s
// completed steps. With warmup_steps W > 0 the rate rises linearly,
// lr_at(s) = base_lr * (s + 1) / W for s < W, so the first update is not
// wasted at 0 and step W - 1 reaches base_lr. After the warmup, with
// progress p = (s - W) / (total_steps - W) clamped to [0, 1]:
//
//   constant  base_lr
//   cosine    min_lr + (base_lr - min_lr) * (1 + cos(pi * p)) / 2
//   linear    base_lr + (min_lr - base_lr) * p
//   step      max(min_lr, base_lr * gamma ^ floor((s - W) / step_size))
//
// so cosine and linear reach the floor min_lr at total_steps and stay there.
// A training loop calls opt.set_lr(schedule.lr_at(opt.step_count())) before
// each opt.step().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headlab::optim {

enum class ScheduleKind { constant, cosine, linear, step };

std::string to_string(ScheduleKind kind);
// "constant", "cosine", "linear" or "step"; anything else throws
// std::invalid_argument naming the valid names.
ScheduleKind parse_schedule_kind(std::string_view name);
// Every name parse_schedule_kind accepts, in order.
std::vector<std::string> schedule_kind_names();

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::constant;
  double base_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // cosine and linear: where the decay ends
  double min_lr = 0.0;      // the floor of every decay
  int64_t step_size = 1;    // step: decay every step_size steps ...
  double gamma = 0.1;       // ... by this factor

  // clang-format off
  ScheduleOptions& set_kind(ScheduleKind v) { kind = v; return *this; }
  ScheduleOptions& set_base_lr(double v) { base_lr = v; return *this; }
  ScheduleOptions& set_warmup_steps(int64_t v) { warmup_steps = v; return *this; }
  ScheduleOptions& set_total_steps(int64_t v) { total_steps = v; return *this; }
  ScheduleOptions& set_min_lr(double v) { min_lr = v; return *this; }
  ScheduleOptions& set_step_size(int64_t v) { step_size = v; return *this; }
  ScheduleOptions& set_gamma(double v) { gamma = v; return *this; }
  // clang-format on
};

class Schedule {
 public:
  // Throws std::invalid_argument naming the option unless: base_lr finite
  // and >= 0; 0 <= min_lr <= base_lr; warmup_steps >= 0; for cosine and
  // linear, total_steps >= warmup_steps; for step, step_size > 0 and
  // 0 < gamma <= 1.
  explicit Schedule(const ScheduleOptions& options);

  // Throws std::invalid_argument for a negative step.
  double lr_at(int64_t step) const;
  const ScheduleOptions& options() const { return options_; }

 private:
  ScheduleOptions options_;
};

}  // namespace headlab::optim
