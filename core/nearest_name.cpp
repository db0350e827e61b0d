#include "core/nearest_name.h"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace headlab::core {

namespace {

bool same(char a, char b) { return a == b || ((a == '_' || a == '-') && (b == '_' || b == '-')); }

// Levenshtein distance, one row at a time.
std::size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = 3;  // at most 2 edits
  for (const std::string& c : candidates) {
    const std::size_t d = distance(name, c);
    if (d < best_distance && 2 * d < std::max(name.size(), c.size())) {
      best = c;
      best_distance = d;
    }
  }
  if (!best.empty() || name.size() < 3) return best;
  // A name cut short (--vers for --version) is many edits away, yet plain
  // when it begins one candidate alone.
  for (const std::string& c : candidates) {
    if (c.size() <= name.size() || !std::equal(name.begin(), name.end(), c.begin(), same)) continue;
    if (!best.empty()) return "";  // the beginning of several
    best = c;
  }
  return best;
}

std::vector<std::string> nearest_names(const std::string& name, const std::vector<std::string>& candidates,
                                       std::size_t count) {
  std::vector<std::pair<std::size_t, std::size_t>> ranked;  // (distance, index)
  for (std::size_t i = 0; i < candidates.size(); ++i) ranked.emplace_back(distance(name, candidates[i]), i);
  std::stable_sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < std::min(count, ranked.size()); ++i) out.push_back(candidates[ranked[i].second]);
  return out;
}

}  // namespace headlab::core
