#include "train/nearest_name.h"

#include <algorithm>
#include <cstddef>

namespace headlab::train {

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
  return best;
}

}  // namespace headlab::train
