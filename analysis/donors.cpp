#include "analysis/donors.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace headlab::analysis {

std::vector<int64_t> next_donors(std::span<const int32_t> lengths, int64_t rows, DonorRule rule) {
  if (!lengths.empty() && static_cast<int64_t>(lengths.size()) != rows)
    throw std::invalid_argument("next_donors: " + std::to_string(lengths.size()) + " lengths for " +
                                std::to_string(rows) + " rows");
  std::vector<int64_t> donors(static_cast<std::size_t>(rows), -1);
  if (lengths.empty()) {
    for (int64_t b = 0; b < rows && rows > 1; ++b) donors[static_cast<std::size_t>(b)] = (b + 1) % rows;
    return donors;
  }
  const auto length = [&](int64_t i) { return lengths[static_cast<std::size_t>(i % rows)]; };
  // Positions 0 .. 2 rows - 1 walk the cycle twice, from the end, so that
  // each row b < rows sees every other row once after it; the nearest
  // candidate at p in (b, b + rows) is its donor (p = b + rows is b itself).
  const auto donor = [&](int64_t b, int64_t p) {
    if (p - b < rows) donors[static_cast<std::size_t>(b)] = p % rows;
  };
  if (rule == DonorRule::same_length) {
    std::unordered_map<int32_t, int64_t> next;  // length -> nearest position seen with it
    for (int64_t i = 2 * rows - 1; i >= 0; --i) {
      const auto it = next.find(length(i));
      if (i < rows && it != next.end()) donor(i, it->second);
      next[length(i)] = i;
    }
    return donors;
  }
  // The nearest position with a length >= the row's: a stack of positions
  // whose lengths grow from top to bottom (a shorter one behind a longer one
  // is never anyone's nearest).
  std::vector<int64_t> stack;
  for (int64_t i = 2 * rows - 1; i >= 0; --i) {
    while (!stack.empty() && length(stack.back()) < length(i)) stack.pop_back();
    if (i < rows && !stack.empty()) donor(i, stack.back());
    stack.push_back(i);
  }
  return donors;
}

DonorRows donor_rows(std::span<const int64_t> donors, int64_t first) {
  const auto n = static_cast<int64_t>(donors.size());
  DonorRows out;
  out.from.resize(donors.size());
  for (int64_t r = 0; r < n; ++r) {
    const int64_t d = donors[static_cast<std::size_t>(r)];
    int64_t& f = out.from[static_cast<std::size_t>(r)];
    if (d < 0) {
      f = r;
    } else if (d >= first && d < first + n) {
      f = d - first;
    } else {
      const auto at = std::find(out.outside.begin(), out.outside.end(), d);
      f = n + (at - out.outside.begin());
      if (at == out.outside.end()) out.outside.push_back(d);
    }
  }
  return out;
}

int64_t rows_with_donor(std::span<const int64_t> donors) {
  return std::count_if(donors.begin(), donors.end(), [](int64_t d) { return d >= 0; });
}

std::vector<int32_t> targets_with_donor(std::span<const int32_t> targets, int64_t seq_len,
                                        std::span<const int64_t> donors) {
  std::vector<int32_t> out(targets.begin(), targets.end());
  for (std::size_t b = 0; b < donors.size(); ++b)
    if (donors[b] < 0)
      std::fill_n(out.begin() + static_cast<std::ptrdiff_t>(b * static_cast<std::size_t>(seq_len)), seq_len, -1);
  return out;
}

}  // namespace headlab::analysis
