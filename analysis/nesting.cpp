#include "analysis/nesting.h"

#include <algorithm>
#include <stdexcept>

namespace headlab::analysis {

void NestingSums::Pair::add(const std::vector<int32_t>& builtin, const std::vector<int32_t>& user) {
  shared = true;
  // Both sorted: the built-in keys are ascending, the user's sorted by the caller.
  if (!std::includes(user.begin(), user.end(), builtin.begin(), builtin.end())) builtin_within = false;
  if (!std::includes(builtin.begin(), builtin.end(), user.begin(), user.end())) user_within = false;
}

void NestingSums::add(std::span<const AttendPattern> user, std::span<const int32_t> tokens, bool causal,
                      std::span<const int32_t> targets, std::span<const int32_t> lengths) {
  if (pairs_.empty()) pairs_.resize(user.size());
  if (pairs_.size() != user.size())
    throw std::invalid_argument("NestingSums: a chunk of " + std::to_string(user.size()) + " user patterns after " +
                                std::to_string(pairs_.size()));
  if (user.empty()) return;
  const int64_t B = user[0].batch, T = user[0].seq_len;
  const auto row = [&](std::span<const int32_t> v, int64_t b) {
    return v.empty() ? v : v.subspan(static_cast<std::size_t>(b * T), static_cast<std::size_t>(T));
  };
  std::vector<int32_t> builtin, mine;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lengths.empty() ? T : lengths[static_cast<std::size_t>(b)];
    const HeadMap map{nullptr, len, T, causal, row(tokens, b), row(targets, b)};
    for (int64_t q = 0; q < len; ++q)
      for (std::size_t i = 0; i < kPatternCount; ++i) {
        if (!kPatterns[i].keys(map, q, builtin)) continue;
        const bool judged = map.judged(q);
        judged_[i] = judged_[i] || judged;
        for (std::size_t u = 0; u < user.size(); ++u) {
          mine = user[u].at(b, q);
          if (mine.empty()) continue;  // not scored
          std::sort(mine.begin(), mine.end());
          mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
          pairs_[u][i][1].add(builtin, mine);
          if (judged) pairs_[u][i][0].add(builtin, mine);
        }
      }
  }
}

std::vector<std::vector<std::string>> NestingSums::value() const {
  std::vector<std::vector<std::string>> out(pairs_.size());
  for (std::size_t u = 0; u < pairs_.size(); ++u)
    for (std::size_t i = 0; i < kPatternCount; ++i) {
      const Pair& p = pairs_[u][i][judged_[i] ? 0 : 1];
      if (p.shared && (p.builtin_within || p.user_within)) out[u].emplace_back(kPatterns[i].name);
    }
  return out;
}

bool nests(const std::vector<std::string>& nests_with, std::string_view builtin) {
  return std::find(nests_with.begin(), nests_with.end(), builtin) != nests_with.end();
}

}  // namespace headlab::analysis
