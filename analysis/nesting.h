// Which user patterns nest with which built-in patterns on the analyzed set
// (docs/head-metrics.md, "Nested patterns"): at every query both score, the
// keys of one are within the other's -- the same one's within the other's
// throughout. Nested patterns are not rival explanations of a head, one
// refines the other, so the labels let the user's pattern win (labels.h).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/attend.h"
#include "analysis/patterns.h"

namespace headlab::analysis {

// Nesting over a set read in chunks: add() each chunk's rows (the user
// patterns' rows of the chunk, tokens, targets and lengths as head_scores');
// value() is what one batch holding every chunk gives, whatever the chunks.
class NestingSums {
 public:
  void add(std::span<const AttendPattern> user, std::span<const int32_t> tokens, bool causal,
           std::span<const int32_t> targets = {}, std::span<const int32_t> lengths = {});
  // Per user pattern, in the order given: the names of the built-in patterns
  // it nests with, in table order.
  std::vector<std::vector<std::string>> value() const;

 private:
  // One user pattern and one built-in pattern over the queries they both score.
  struct Pair {
    bool shared = false;          // some query is scored by both
    bool builtin_within = true;   // the built-in's keys are within the user's at each of them
    bool user_within = true;      // the user's keys are within the built-in's at each of them
    void add(const std::vector<int32_t>& builtin, const std::vector<int32_t>& user);
  };
  // [user pattern][built-in pattern][0: the judged queries, 1: every query]:
  // a built-in pattern's score falls back to every query when the set has no
  // judged query it scores, and so does its nesting.
  std::vector<std::array<std::array<Pair, 2>, kPatternCount>> pairs_;
  std::array<bool, kPatternCount> judged_{};  // the pattern scores some judged query
};

// Whether user pattern `user` (its nests_with) nests with the built-in pattern `builtin`.
bool nests(const std::vector<std::string>& nests_with, std::string_view builtin);

}  // namespace headlab::analysis
