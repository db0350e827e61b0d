// A running mean over the values that exist (absent ones are skipped).
#pragma once

#include <cstdint>
#include <optional>

namespace headlab::analysis {

struct Mean {
  double total = 0;
  int64_t count = 0;
  void add(const std::optional<double>& v) {
    if (!v) return;
    total += *v;
    ++count;
  }
  std::optional<double> value() const {
    return count > 0 ? std::optional<double>(total / static_cast<double>(count)) : std::nullopt;
  }
};

}  // namespace headlab::analysis
