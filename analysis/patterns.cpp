#include "analysis/patterns.h"

namespace headlab::analysis {

std::string pattern_key(const Pattern& pattern) {
  std::string key(pattern.name);
  for (char& c : key)
    if (c == '-') c = '_';
  return key;
}

std::optional<double> pattern_score(const Pattern& pattern, const HeadMap& a, std::vector<int32_t>& buffer) {
  double total = 0;
  int64_t queries = 0;
  for (int64_t q = 0; q < a.len; ++q) {
    if (!a.judged(q) || !pattern.keys(a, q, buffer)) continue;
    double sum = 0;
    for (int32_t k : buffer) sum += a(q, k);
    total += sum;
    ++queries;
  }
  if (queries == 0) return std::nullopt;
  return total / static_cast<double>(queries);
}

}  // namespace headlab::analysis
