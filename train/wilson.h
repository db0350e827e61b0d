// The Wilson score interval for a proportion: how sure a sweep can be of a
// rate it measured over a few runs (7 of 10 runs specialized: 70%, 95% CI
// 40-89%). Unlike the normal approximation p +- z sqrt(p(1-p)/n), it never
// leaves [0, 1] and does not collapse to a point at 0 of n or n of n, which
// are common with 5 or 10 seeds.
#pragma once

#include <cstdint>

namespace headlab::train {

struct Interval {
  double lo = 0, hi = 1;
};

// z for a two-sided 95% interval: the 0.975 quantile of the standard normal.
inline constexpr double kZ95 = 1.959963984540054;

// The Wilson score interval (no continuity correction) for `successes` of
// `trials`: centre (p + z^2/2n) / (1 + z^2/n), half-width
// z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2), with p = successes / trials.
// Without trials nothing is known: [0, 1]. Throws std::invalid_argument when
// successes is outside [0, trials] or z is not positive.
Interval wilson_interval(int64_t successes, int64_t trials, double z = kZ95);

}  // namespace headlab::train
