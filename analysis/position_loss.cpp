#include "analysis/position_loss.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "analysis/evaluate.h"

namespace headlab::analysis {

std::vector<std::optional<double>> position_loss(const core::Tensor& logits, std::span<const int32_t> targets) {
  PositionLossSums sums;
  sums.add(logits, targets);
  return sums.value();
}

void PositionLossSums::add(const core::Tensor& logits, std::span<const int32_t> targets) {
  if (logits.dim() != 3 || static_cast<int64_t>(targets.size()) != logits.size(0) * logits.size(1))
    throw std::invalid_argument("position_loss: logits " + core::to_string(logits.shape()) + " do not match " +
                                std::to_string(targets.size()) + " targets; expected [B, T, C] and B * T targets");
  const int64_t B = logits.size(0), T = logits.size(1), C = logits.size(2);
  if (sum_.empty()) sum_.assign(static_cast<std::size_t>(T), 0.0), count_.assign(static_cast<std::size_t>(T), 0);
  if (static_cast<int64_t>(sum_.size()) != T)
    throw std::invalid_argument("position_loss: a chunk of logits " + core::to_string(logits.shape()) +
                                " after chunks of " + std::to_string(sum_.size()) + " positions");
  // Each row as score_logits reads it, with no float64 copy of the logits.
  const core::Tensor f = logits.contiguous();
  core::dispatch(f.dtype(), [&](auto zero) {
    using D = decltype(zero);
    const D* p = f.data<D>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int32_t y = targets[static_cast<std::size_t>(b * T + t)];
        if (y < 0) continue;
        int64_t best = 0;
        sum_[static_cast<std::size_t>(t)] += row_loss(p + (b * T + t) * C, C, y, best);
        ++count_[static_cast<std::size_t>(t)];
      }
  });
}

std::vector<std::optional<double>> PositionLossSums::value() const {
  std::vector<std::optional<double>> out(sum_.size());
  for (std::size_t t = 0; t < out.size(); ++t)
    if (count_[t] > 0) out[t] = sum_[t] / static_cast<double>(count_[t]);
  return out;
}

std::optional<double> icl_score(const std::vector<std::optional<double>>& position_loss) {
  std::vector<double> present;
  for (const auto& v : position_loss)
    if (v) present.push_back(*v);
  if (present.size() < 2) return std::nullopt;
  const std::size_t k = std::max<std::size_t>(1, present.size() / 4);
  double early = 0, late = 0;
  for (std::size_t i = 0; i < k; ++i) {
    early += present[i];
    late += present[present.size() - 1 - i];
  }
  return (late - early) / static_cast<double>(k);
}

}  // namespace headlab::analysis
