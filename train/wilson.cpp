#include "train/wilson.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace headlab::train {

Interval wilson_interval(int64_t successes, int64_t trials, double z) {
  if (trials < 0 || successes < 0 || successes > trials)
    throw std::invalid_argument("wilson_interval: " + std::to_string(successes) + " successes of " +
                                std::to_string(trials) + " trials");
  if (!(z > 0)) throw std::invalid_argument("wilson_interval: z must be positive");
  if (trials == 0) return {0.0, 1.0};
  const auto n = static_cast<double>(trials);
  const double p = static_cast<double>(successes) / n, z2 = z * z;
  const double denominator = 1 + z2 / n;
  const double centre = (p + z2 / (2 * n)) / denominator;
  const double half = z / denominator * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  // At 0 of n and n of n the bound is exactly 0 or 1; rounding must not move it.
  return {successes == 0 ? 0.0 : std::max(0.0, centre - half), successes == trials ? 1.0 : std::min(1.0, centre + half)};
}

}  // namespace headlab::train
