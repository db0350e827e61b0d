// User patterns nested with built-in ones: the nesting over a set, chunk by
// chunk, and the labels it lets the user's pattern win (docs/head-metrics.md,
// "Nested patterns").
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/attend.h"
#include "analysis/head_metrics.h"
#include "analysis/heads_json.h"
#include "analysis/labels.h"
#include "analysis/nesting.h"
#include "analysis/run_analysis.h"

namespace headlab::analysis {
namespace {

using Names = std::vector<std::string>;

// A pattern over `batch` rows of `len` positions whose query q reads keys(b, q).
template <class F>
AttendPattern pattern(const std::string& name, int64_t batch, int64_t len, F keys) {
  AttendPattern p = AttendPattern::empty(name, batch, len);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t q = 0; q < len; ++q)
      for (int64_t k : keys(b, q))
        if (k >= 0 && k < len) p.keys[static_cast<std::size_t>(b * len + q)].push_back(static_cast<int32_t>(k));
  return p;
}

Names nesting(const AttendPattern& p, bool causal, std::span<const int32_t> targets = {}) {
  NestingSums sums;
  sums.add({&p, 1}, {}, causal, targets);
  return sums.value()[0];
}

TEST(Nesting, TwoBackNestsWithCausalLocalAndAttendingNextWithBidirectionalLocal) {
  // Two back: local's keys (q - 2 from q = 3, none at q = 2) are within its own.
  const AttendPattern two_back = pattern("two-back", 2, 8, [](int64_t, int64_t q) {
    return q >= 2 ? std::vector<int64_t>{q - 2} : std::vector<int64_t>{};
  });
  EXPECT_EQ(nesting(two_back, true), Names{"local"});
  // The next token (bidirectional): within local's q - 2, q + 1, q + 2; local
  // scores no query below 2, where "next" has keys too.
  const AttendPattern next = pattern("next", 2, 8, [](int64_t, int64_t q) { return std::vector<int64_t>{q + 1}; });
  EXPECT_EQ(nesting(next, false), Names{"local"});
  // offset:1 coincides with previous-token: nested both ways, the old tie.
  EXPECT_EQ(nesting(positional_pattern("offset:1", 2, 8, true, {}), true), Names{"previous-token"});
  // Keys that are neither within nor around: nothing.
  const AttendPattern three_back = pattern("three-back", 2, 8, [](int64_t, int64_t q) {
    return std::vector<int64_t>{q - 3};
  });
  EXPECT_EQ(nesting(three_back, true), Names{});
}

TEST(Nesting, IsDecidedOverTheWholeSetWhateverTheChunks) {
  // Row 0 reads the next key (within local's), row 1 every key within 2 (local's
  // within its own): each row alone nests with local, the two rows do not (nor
  // does one chunk per row: nested in each chunk, but not the same way).
  const AttendPattern p = pattern("near", 2, 8, [](int64_t b, int64_t q) {
    return b == 0 ? std::vector<int64_t>{q + 1} : std::vector<int64_t>{q - 2, q - 1, q + 1, q + 2};
  });
  EXPECT_EQ(nesting(attend_rows(p, 0, 1), false), Names{"local"});
  EXPECT_EQ(nesting(attend_rows(p, 1, 1), false), (Names{"previous-token", "local"}));
  EXPECT_EQ(nesting(p, false), Names{});
  NestingSums chunked;
  for (int64_t row = 0; row < 2; ++row) {
    const AttendPattern chunk = attend_rows(p, row, 1);
    chunked.add({&chunk, 1}, {}, false);
  }
  EXPECT_EQ(chunked.value()[0], Names{});
}

TEST(Nesting, UsesTheQueriesTheBuiltInPatternScores) {
  // Position 0, and at q = 4 also two back: around first-token's keys
  // everywhere, and around local's at q = 4, the one query with a target.
  std::vector<int32_t> targets(8, -1);
  targets[4] = 0;
  const AttendPattern p = pattern("first-and-two-back-at-4", 1, 8, [](int64_t, int64_t q) {
    return q == 4 ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{0};
  });
  EXPECT_EQ(nesting(p, true, targets), (Names{"first-token", "local"}));
  EXPECT_EQ(nesting(p, true), Names{"first-token"}) << "without targets every query q >= 2 counts";
  // A target only at q = 1, which no built-in pattern scores: their scores fall
  // back to every query, and so does their nesting.
  std::vector<int32_t> early(8, -1);
  early[1] = 0;
  EXPECT_EQ(nesting(p, true, early), Names{"first-token"});
}

// A head's scores: the built-in ones given, the rest 0, and user patterns.
HeadScores scores(std::vector<std::pair<const char*, double>> builtin, std::vector<UserScore> user) {
  HeadScores s;
  for (const auto& [name, score] : builtin) s[name] = score;
  s.user = std::move(user);
  return s;
}

TEST(NestedLabels, AUserPatternTakesTheLabelFromTheBuiltInItNestsWith) {
  const Names local = {"local"};
  // As in the QA runs: two-back 0.92 against local 0.78; next 0.98 against local 0.97.
  EXPECT_EQ(label_head(scores({{"local", 0.78}}, {{"two-back", 0.92, local}}), std::nullopt, {}), Label::user("two-back"));
  EXPECT_EQ(label_head(scores({{"local", 0.97}}, {{"next", 0.98, local}}), std::nullopt, {}), Label::user("next"));
  // Also when the built-in one scores higher, within the margin.
  EXPECT_EQ(label_head(scores({{"local", 0.99}}, {{"next", 0.9, local}}), std::nullopt, {}), Label::user("next"));
  // Not nested: mixed, as before.
  EXPECT_EQ(label_head(scores({{"local", 0.78}}, {{"two-back", 0.92, {}}}), std::nullopt, {}), Label::mixed());
  // A nested built-in a margin above it keeps the label.
  EXPECT_EQ(label_head(scores({{"local", 0.9}}, {{"next", 0.7, local}}), std::nullopt, {}), Label::pattern("local"));
  // Below the threshold the user pattern wins nothing.
  EXPECT_EQ(label_head(scores({{"local", 0.5}}, {{"next", 0.45, local}}), std::nullopt, {}), Label::mixed());
  // The margin is over the next pattern not nested with it.
  EXPECT_EQ(label_head(scores({{"local", 0.9}, {"self", 0.8}}, {{"next", 0.9, local}}), std::nullopt, {}),
            Label::mixed());
  EXPECT_EQ(label_head(scores({{"local", 0.9}, {"self", 0.7}}, {{"next", 0.9, local}}), std::nullopt, {}),
            Label::user("next"));
}

TEST(NestedLabels, AUserPatternNestedWithTwoBuiltInsBeatsBoth) {
  // "near" reads q - 1 and q - 2: previous-token and causal local are both within it.
  const HeadScores s = scores({{"previous-token", 0.5}, {"local", 0.45}}, {{"near", 0.95, {"previous-token", "local"}}});
  EXPECT_EQ(label_head(s, std::nullopt, {}), Label::user("near"));
  EXPECT_EQ(label_score(s, Label::user("near")), 0.95);
}

TEST(NestedLabels, TwoUserPatternsKeepTheOrdinaryRuleBetweenThem) {
  // "two-back" within "near": both the user's, so rivals; each nests with local.
  const HeadScores s =
      scores({{"local", 0.8}}, {{"near", 0.95, {"previous-token", "local"}}, {"two-back", 0.85, {"local"}}});
  EXPECT_EQ(label_head(s, std::nullopt, {}), Label::mixed());
  const HeadScores clear =
      scores({{"local", 0.8}}, {{"near", 0.95, {"previous-token", "local"}}, {"two-back", 0.7, {"local"}}});
  EXPECT_EQ(label_head(clear, std::nullopt, {}), Label::user("near"));
}

TEST(NestedLabels, AnAnalyzedRunFindsTheRoleRecordsTheNestingAndReadsItBack) {
  // Bidirectional, target at every query but the last; the head reads the next
  // token with 0.9 and the one after with 0.1: local 1.0, "next" 0.9.
  const int64_t B = 2, T = 8;
  std::vector<int32_t> tokens, targets;
  std::vector<double> v;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t q = 0; q < T; ++q) {
      tokens.push_back(static_cast<int32_t>((b + 3 * q) % 5));
      targets.push_back(q + 1 < T ? 0 : -1);
      for (int64_t k = 0; k < T; ++k)
        v.push_back(q + 1 == T ? (k == q ? 1.0 : 0.0)
                               : k == q + 1 ? (q + 2 < T ? 0.9 : 1.0) : (k == q + 2 ? 0.1 : 0.0));
    }
  const core::Tensor a = core::Tensor::from_vector(v, {B, 1, T, T}, core::DType::f64);
  const std::vector<AttendPattern> attend = {
      pattern("next", B, T, [](int64_t, int64_t q) { return std::vector<int64_t>{q + 1}; })};
  const std::vector<ExpectedRole> roles = {{"next", "next"}};
  const RunAnalysis run = analyze_attention({a}, tokens, false, {}, 0, {targets, attend, roles});
  EXPECT_EQ(run.user_patterns[0].nests_with, Names{"local"});
  EXPECT_GT(*run.at(0, 0).scores["local"], run.at(0, 0).scores.user[0].score.value());
  EXPECT_EQ(run.at(0, 0).label, Label::user("next"));
  EXPECT_TRUE(run.verdict.roles_found);
  // One chunk per row: the same nesting.
  AttentionSums chunks(false, 0);
  for (int64_t row = 0; row < B; ++row) {
    const std::vector<AttendPattern> rows = {attend_rows(attend[0], row, 1)};
    const std::span<const int32_t> t(targets.data() + row * T, static_cast<std::size_t>(T));
    const std::span<const int32_t> row_tokens(tokens.data() + row * T, static_cast<std::size_t>(T));
    chunks.add({a.slice(0, row, row + 1)}, row_tokens, row, {t, rows, roles});
  }
  EXPECT_EQ(chunks.value().user_patterns[0].nests_with, Names{"local"});
  // heads.json records it under the pattern and a relabelled read-back keeps the label.
  const nlohmann::json j = run;
  EXPECT_EQ(j["patterns"][0]["nests_with"], nlohmann::json::array({"local"}));
  RunAnalysis back = j.get<RunAnalysis>();
  relabel(back);
  EXPECT_EQ(back.at(0, 0).label, Label::user("next"));
}

}  // namespace
}  // namespace headlab::analysis
