#include "analysis/fourier.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <stdexcept>
#include <string>

namespace headlab::analysis {

std::vector<double> frequency_norms(std::span<const double> rows, int64_t p, int64_t d) {
  if (p < 3 || d < 1 || static_cast<int64_t>(rows.size()) != p * d)
    throw std::invalid_argument("frequency_norms: need rows [p, d] with p >= 3, got " + std::to_string(rows.size()) +
                                " values for p " + std::to_string(p) + ", d " + std::to_string(d));
  const int64_t top = highest_frequency(p);
  std::vector<double> out(static_cast<std::size_t>(top + 1), 0.0);
  const auto at = [&](int64_t x, int64_t j) { return rows[static_cast<std::size_t>(x * d + j)]; };
  const double pd = static_cast<double>(p);
  for (int64_t k = 0; k <= top; ++k) {
    // The unit vectors: 1/sqrt(p) for the constant, sqrt(2/p) cos and sin.
    const double unit = k == 0 ? 1.0 / std::sqrt(pd) : std::sqrt(2.0 / pd);
    double squared = 0;
    for (int64_t j = 0; j < d; ++j) {
      double c = 0, s = 0;
      for (int64_t x = 0; x < p; ++x) {
        const double angle = 2 * std::numbers::pi * static_cast<double>(k * x % p) / pd;
        c += std::cos(angle) * at(x, j);
        s += std::sin(angle) * at(x, j);
      }
      squared += unit * unit * (c * c + (k == 0 ? 0.0 : s * s));
    }
    out[static_cast<std::size_t>(k)] = std::sqrt(squared);
  }
  return out;
}

std::vector<int64_t> key_frequencies(const std::vector<double>& norms, int64_t count) {
  std::vector<int64_t> ks(norms.size() > 1 ? norms.size() - 1 : 0);
  std::iota(ks.begin(), ks.end(), int64_t{1});
  std::stable_sort(ks.begin(), ks.end(), [&](int64_t a, int64_t b) {
    return norms[static_cast<std::size_t>(a)] > norms[static_cast<std::size_t>(b)];
  });
  ks.resize(std::min(ks.size(), static_cast<std::size_t>(std::max<int64_t>(count, 0))));
  return ks;
}

double key_share(const std::vector<double>& norms, const std::vector<int64_t>& keys) {
  double total = 0, key = 0;
  for (const double n : norms) total += n * n;
  for (const int64_t k : keys) key += norms.at(static_cast<std::size_t>(k)) * norms.at(static_cast<std::size_t>(k));
  return total > 0 ? key / total : 0.0;
}

}  // namespace headlab::analysis
