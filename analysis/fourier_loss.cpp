#include "analysis/fourier_loss.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace headlab::analysis {
namespace {

void check(std::span<const double> logits, int64_t p, int64_t classes, const char* op) {
  if (p < 3 || classes < p || static_cast<int64_t>(logits.size()) != p * p * classes)
    throw std::invalid_argument(std::string(op) + ": need logits [p*p, classes] with p >= 3 and classes >= p, got " +
                                std::to_string(logits.size()) + " values for p " + std::to_string(p) + ", classes " +
                                std::to_string(classes));
}

}  // namespace

std::vector<double> key_frequency_part(std::span<const double> logits, int64_t p, int64_t classes,
                                       const std::vector<int64_t>& keys) {
  check(logits, p, classes, "key_frequency_part");
  std::vector<double> out(logits.size(), 0.0);
  const auto cols = static_cast<std::size_t>(classes);
  for (const int64_t k : keys) {
    if (k < 1 || 2 * k >= p)
      throw std::invalid_argument("key_frequency_part: frequency " + std::to_string(k) + " is not in 1 .. " +
                                  std::to_string((p - 1) / 2));
    // The grid direction depends on (a + b) mod p only, each sum p times: its
    // squared norm is p * p / 2.
    for (const bool sine : {false, true}) {
      std::vector<double> u(static_cast<std::size_t>(p));
      for (int64_t s = 0; s < p; ++s) {
        const double angle = 2 * std::numbers::pi * static_cast<double>(k * s % p) / static_cast<double>(p);
        u[static_cast<std::size_t>(s)] = sine ? std::sin(angle) : std::cos(angle);
      }
      const auto dir = [&](std::size_t row) { return u[(row / static_cast<std::size_t>(p) + row % static_cast<std::size_t>(p)) % static_cast<std::size_t>(p)]; };
      std::vector<double> coef(cols, 0.0);
      const auto n = static_cast<std::size_t>(p * p);
      for (std::size_t row = 0; row < n; ++row)
        for (std::size_t c = 0; c < cols; ++c) coef[c] += dir(row) * logits[row * cols + c];
      const double norm2 = static_cast<double>(p * p) / 2;
      for (std::size_t row = 0; row < n; ++row)
        for (std::size_t c = 0; c < cols; ++c) out[row * cols + c] += coef[c] / norm2 * dir(row);
    }
  }
  return out;
}

double modular_loss(std::span<const double> logits, int64_t p, int64_t classes, const std::vector<bool>& rows) {
  check(logits, p, classes, "modular_loss");
  const auto cols = static_cast<std::size_t>(classes);
  double total = 0;
  int64_t count = 0;
  for (int64_t a = 0; a < p; ++a)
    for (int64_t b = 0; b < p; ++b) {
      const auto row = static_cast<std::size_t>(a * p + b);
      if (!rows.empty() && !rows.at(row)) continue;
      const double* x = logits.data() + row * cols;
      const double m = *std::max_element(x, x + cols);
      double sum = 0;
      for (std::size_t c = 0; c < cols; ++c) sum += std::exp(x[c] - m);
      total += std::log(sum) - (x[(a + b) % p] - m);
      ++count;
    }
  return count > 0 ? total / static_cast<double>(count) : 0.0;
}

FourierLosses fourier_losses(std::span<const double> logits, int64_t p, int64_t classes,
                             const std::vector<int64_t>& keys, const std::vector<bool>& train) {
  const std::vector<double> part = key_frequency_part(logits, p, classes, keys);
  std::vector<double> rest(logits.begin(), logits.end());
  for (std::size_t i = 0; i < rest.size(); ++i) rest[i] -= part[i];
  return {.full = modular_loss(logits, p, classes),
          .restricted = modular_loss(part, p, classes),
          .excluded = modular_loss(rest, p, classes, train)};
}

}  // namespace headlab::analysis
