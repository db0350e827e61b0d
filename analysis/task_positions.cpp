#include "analysis/task_positions.h"

#include <set>
#include <stdexcept>
#include <string>

#include "analysis/head_metrics.h"
#include "analysis/mean.h"

namespace headlab::analysis {
namespace {

// Adds rows [B, H, T, T] of attention to each head's means.
template <class F>
void add_rows(const F* p, int64_t B, int64_t H, int64_t T, std::span<const int32_t> tokens,
              std::span<const int32_t> targets, std::vector<Mean>& prev, std::vector<Mean>& ind) {
  for (int64_t b = 0; b < B; ++b) {
    const auto x = tokens.subspan(static_cast<std::size_t>(b * T), static_cast<std::size_t>(T));
    const auto y = targets.subspan(static_cast<std::size_t>(b * T), static_cast<std::size_t>(T));
    // The targeted queries with their earlier copies j <= q - 3 (as the
    // induction pattern), and the sources j + 1 those copies point to.
    std::vector<std::pair<int64_t, std::vector<int64_t>>> queries;
    std::set<int64_t> sources;
    for (int64_t q = 3; q < T; ++q) {
      if (y[static_cast<std::size_t>(q)] < 0) continue;
      std::vector<int64_t> copies;
      for (int64_t j = 0; j + 2 < q; ++j)
        if (x[static_cast<std::size_t>(j)] == x[static_cast<std::size_t>(q)]) copies.push_back(j);
      if (copies.empty()) continue;
      for (int64_t j : copies) sources.insert(j + 1);
      queries.emplace_back(q, std::move(copies));
    }
    if (queries.empty()) continue;
    for (int64_t h = 0; h < H; ++h) {
      const F* m = p + (b * H + h) * T * T;
      double s_ind = 0, s_prev = 0;
      for (const auto& [q, copies] : queries)
        for (int64_t j : copies) s_ind += static_cast<double>(m[q * T + j + 1]);
      for (int64_t k : sources) s_prev += static_cast<double>(m[k * T + k - 1]);
      ind[static_cast<std::size_t>(h)].add(s_ind / static_cast<double>(queries.size()));
      prev[static_cast<std::size_t>(h)].add(s_prev / static_cast<double>(sources.size()));
    }
  }
}

}  // namespace

std::vector<TaskPositionScores> task_position_scores(const core::Tensor& attn, std::span<const int32_t> tokens,
                                                     std::span<const int32_t> targets, bool causal) {
  TaskPositionSums sums;
  sums.add(attn, tokens, targets, causal);
  return sums.value();
}

void TaskPositionSums::add(const core::Tensor& attn, std::span<const int32_t> tokens, std::span<const int32_t> targets,
                           bool causal) {
  check_attention(attn, tokens, causal, "task_position_scores");
  const int64_t B = attn.size(0), H = attn.size(1), T = attn.size(2);
  if (previous_.empty()) previous_.resize(static_cast<std::size_t>(H)), induction_.resize(static_cast<std::size_t>(H));
  if (static_cast<int64_t>(previous_.size()) != H)
    throw std::invalid_argument("task_position_scores: a chunk of attention " + core::to_string(attn.shape()) +
                                " after chunks of " + std::to_string(previous_.size()) + " heads");
  if (tokens.empty() || targets.empty()) return;
  if (targets.size() != tokens.size())
    throw std::invalid_argument("task_position_scores: " + std::to_string(targets.size()) + " targets for " +
                                std::to_string(tokens.size()) + " tokens");
  // Read where it is, each value as a double (no float64 copy of the layer).
  const core::Tensor a = attn.contiguous();
  core::dispatch(a.dtype(), [&](auto zero) {
    add_rows(a.data<decltype(zero)>(), B, H, T, tokens, targets, previous_, induction_);
  });
}

std::vector<TaskPositionScores> TaskPositionSums::value() const {
  std::vector<TaskPositionScores> out(previous_.size());
  for (std::size_t h = 0; h < out.size(); ++h) out[h] = {previous_[h].value(), induction_[h].value()};
  return out;
}

}  // namespace headlab::analysis
