// Target-aware scores, user-defined patterns, expected roles and the
// redundancy-aware verdict (issue 25; docs/head-metrics.md).
#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "analysis/attend.h"
#include "analysis/head_metrics.h"
#include "analysis/heads_json.h"
#include "analysis/html_report.h"
#include "analysis/run_analysis.h"

namespace headlab::analysis {
namespace {

using core::DType;
using core::Tensor;

// Query q's attention over the keys of example b.
using RowFn = std::function<std::vector<double>(int64_t b, int64_t q, int64_t len)>;

std::vector<double> one_hot(int64_t k, int64_t len) {
  std::vector<double> r(static_cast<std::size_t>(len), 0.0);
  r[static_cast<std::size_t>(k)] = 1.0;
  return r;
}
std::vector<double> mix(int64_t k1, int64_t k2, double w1, int64_t len) {
  std::vector<double> r(static_cast<std::size_t>(len), 0.0);
  r[static_cast<std::size_t>(k1)] += w1;
  r[static_cast<std::size_t>(k2)] += 1.0 - w1;
  return r;
}

Tensor planted(int64_t batch, int64_t len, const std::vector<RowFn>& heads) {
  std::vector<double> v;
  for (int64_t b = 0; b < batch; ++b)
    for (const RowFn& head : heads)
      for (int64_t q = 0; q < len; ++q) {
        const std::vector<double> row = head(b, q, len);
        v.insert(v.end(), row.begin(), row.end());
      }
  return Tensor::from_vector(v, {batch, static_cast<int64_t>(heads.size()), len, len}, DType::f64);
}

// The marker task of issue 25: a marker token M at a random position m, and
// one target, at the last position: the token right after the marker.
constexpr int32_t kMarker = 9;
struct Marker {
  int64_t batch = 4, len = 8;
  std::vector<int32_t> tokens, targets;
  std::vector<int64_t> at;  // the marker's position per example
  AttendPattern after;      // "after-marker": at the last query, key m + 1
  Marker() {
    const int64_t positions[] = {1, 3, 2, 5};
    after = AttendPattern::empty("after-marker", batch, len);
    for (int64_t b = 0; b < batch; ++b) {
      at.push_back(positions[b]);
      for (int64_t q = 0; q < len; ++q) {
        tokens.push_back(q == at[b] ? kMarker : static_cast<int32_t>((3 * b + q) % 7));
        targets.push_back(-1);
      }
      targets.back() = tokens[static_cast<std::size_t>(b * len + at[b] + 1)];
      after.keys[static_cast<std::size_t>(b * len + len - 1)] = {static_cast<int32_t>(at[b] + 1)};
    }
  }
  // Attends to the token after the marker at every query past it, else to itself.
  RowFn after_head() const {
    return [this](int64_t b, int64_t q, int64_t n) { return one_hot(q > at[b] ? at[b] + 1 : q, n); };
  }
};

const RowFn kFirst = [](int64_t, int64_t, int64_t n) { return one_hot(0, n); };
const RowFn kPrevious = [](int64_t, int64_t q, int64_t n) { return one_hot(q > 0 ? q - 1 : 0, n); };

TEST(UserPatterns, TheMarkerFilesPatternLabelsTheHeadThatFollowsItAndTheVerdictFindsTheRole) {
  const Marker m;
  const std::vector<AttendPattern> attend = {m.after};
  const std::vector<ExpectedRole> roles = {{"after-marker", "after-marker"}};
  const Tensor a = planted(m.batch, m.len, {m.after_head(), kFirst});
  const RunAnalysis run = analyze_attention({a}, m.tokens, true, {}, 0, {m.targets, attend, roles});
  EXPECT_EQ(run.at(0, 0).label, Label::user("after-marker"));
  ASSERT_EQ(run.at(0, 0).scores.user.size(), 1u);
  EXPECT_DOUBLE_EQ(*run.at(0, 0).scores.user[0].score, 1.0);
  EXPECT_DOUBLE_EQ(*run.at(0, 1).scores.user[0].score, 0.0);
  ASSERT_EQ(run.verdict.roles.size(), 1u);
  EXPECT_EQ(run.verdict.roles[0].heads, std::vector<std::string>{"L0H0"});
  EXPECT_TRUE(run.verdict.roles_found);
  EXPECT_TRUE(run.verdict.success());
  EXPECT_EQ(run.verdict.reasons[0], "expected roles found: 1 of 1 (after-marker: L0H0)");
}

TEST(UserPatterns, BuiltInScoresJudgeOnlyTheQueriesWithATargetAndKeepTheAllQueryMeanBeside) {
  const Marker m;
  // Previous-token at the one targeted query (the last), first-token elsewhere.
  const RowFn head = [&](int64_t, int64_t q, int64_t n) { return one_hot(q == n - 1 ? q - 1 : 0, n); };
  const HeadScores s = head_scores(planted(m.batch, m.len, {head}), m.tokens, true, m.targets)[0];
  EXPECT_DOUBLE_EQ(*s["previous-token"], 1.0);
  EXPECT_DOUBLE_EQ(*s.patterns_all[pattern_index("previous-token")], 1.0 / 6.0);  // 1 of the queries 2..7
  EXPECT_DOUBLE_EQ(*s.patterns_all[pattern_index("first-token")], 5.0 / 6.0);
  EXPECT_EQ(label_head(s, std::nullopt, {}), Label::pattern("previous-token"));
}

TEST(UserPatterns, AFirstTokenHeadIsNotADuplicateTokenHeadBecausePositionZeroHoldsACopy) {
  // Every token equals x_0, so every earlier copy includes position 0.
  const std::vector<int32_t> tokens = {4, 4, 1, 4, 2, 4};
  const HeadScores s = head_scores(planted(1, 6, {kFirst}), tokens, true)[0];
  EXPECT_DOUBLE_EQ(s.at("first-token"), 1.0);
  EXPECT_DOUBLE_EQ(s.at("duplicate-token"), 0.0);  // the copies at 1 and 3 get nothing
}

TEST(UserPatterns, TransformerLensDetectorScoresAverageOverAllQueryRows) {
  // A repeated sequence [0 1 2 | 0 1 2] and a perfect induction head on its
  // second half (previous-token before it): TransformerLens divides by all 6 rows.
  const std::vector<int32_t> tokens = {0, 1, 2, 0, 1, 2};
  const RowFn induction = [](int64_t, int64_t q, int64_t n) { return one_hot(q >= 3 ? q - 2 : (q > 0 ? q - 1 : 0), n); };
  const HeadScores s = head_scores(planted(1, 6, {induction}), tokens, true)[0];
  EXPECT_DOUBLE_EQ(s.at("induction"), 1.0);
  EXPECT_DOUBLE_EQ(*s.detector.induction, 3.0 / 6.0);
  EXPECT_DOUBLE_EQ(*s.detector.previous_token, 2.0 / 6.0);  // rows 1 and 2
  EXPECT_DOUBLE_EQ(*s.detector.duplicate_token, 0.0);
}

TEST(UserPatterns, APositionalPatternThatCoincidesWithABuiltInOneStillLabelsItsHeads) {
  const Marker m;
  const std::vector<AttendPattern> attend = {positional_pattern("offset:1", m.batch, m.len, true, m.targets)};
  const RunAnalysis run = analyze_attention({planted(m.batch, m.len, {kPrevious})}, m.tokens, true, {}, 0,
                                            {m.targets, attend, {}});
  EXPECT_EQ(run.at(0, 0).label, Label::user("offset:1"));  // not "mixed" for a tie with previous-token
  try {
    positional_pattern("offset:-1", 1, 4, true, {});
    ADD_FAILURE() << "offset:-1 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'offset:-1': K must be >= 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(positional_pattern("lag:1", 1, 4, true, {}), std::invalid_argument);
  // Each refusal says what is wrong with K: a negative position is no offset,
  // a leading zero would name offset:1 a second time, a long number is a number.
  const auto refusal = [](const std::string& spec) {
    try {
      positional_pattern(spec, 1, 4, true, {});
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal("position:-1").find("position:K reads position K"), std::string::npos) << refusal("position:-1");
  EXPECT_EQ(refusal("position:-1").find("offset:K"), std::string::npos) << refusal("position:-1");
  EXPECT_NE(refusal("offset:01").find("without leading zeros (offset:1)"), std::string::npos) << refusal("offset:01");
  EXPECT_NE(refusal("offset:9999999999999").find("beyond any sequence's positions"), std::string::npos);
  EXPECT_EQ(refusal("offset:0"), "accepted");
}

TEST(UserPatterns, HeadsJsonRecordsThePatternsRolesAndWhatWasAnalyzedAndReadsThemBack) {
  const Marker m;
  const std::vector<AttendPattern> attend = {m.after};
  const std::vector<ExpectedRole> roles = {{"after-marker", "after-marker"}};
  RunAnalysis run =
      analyze_attention({planted(m.batch, m.len, {m.after_head(), kFirst})}, m.tokens, true, {}, 0,
                        {m.targets, attend, roles});
  run.analyzed = "data:marker.jsonl";
  nlohmann::json j = run;
  EXPECT_EQ(j["analyzed"], "data:marker.jsonl");
  EXPECT_EQ(j["heads"][0]["scores"]["user"]["after-marker"], 1.0);
  EXPECT_TRUE(j["heads"][0]["scores"].contains("previous_token_all"));
  EXPECT_TRUE(j["heads"][0]["scores"]["transformer_lens"].contains("induction"));
  EXPECT_EQ(j["verdict"]["success"], true);
  const RunAnalysis back = j.get<RunAnalysis>();
  EXPECT_EQ(back.at(0, 0).label, Label::user("after-marker"));
  EXPECT_EQ(back.user_patterns, run.user_patterns);
  EXPECT_EQ(back.expected_roles, run.expected_roles);
  EXPECT_EQ(back.at(0, 0).scores.user, run.at(0, 0).scores.user);
  EXPECT_EQ(back.analyzed, run.analyzed);
  EXPECT_EQ(compact_json(run)["heads"]["L0H0"]["after-marker"], 1.0);
}

TEST(UserPatterns, APatternWithAReservedOrBadNameIsRefused) {
  for (const char* name : {"previous-token", "previous_token", "mixed", "label", "", "a b"})
    EXPECT_THROW(check_pattern_name(name), std::invalid_argument) << name;
  EXPECT_NO_THROW(check_pattern_name("after-marker"));
  // The tables' abbreviations and the labels, in any case, read as the built-in ones.
  for (const Pattern& p : kPatterns)
    for (std::string name : {std::string(p.short_name), std::string(p.name)}) {
      name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
      try {
        check_pattern_name(name);
        ADD_FAILURE() << name << " is accepted";
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("'" + name + "' reads as the built-in pattern " + std::string(p.name)),
                  std::string::npos)
            << e.what();
      }
    }
  EXPECT_THROW(check_pattern_name("SINK"), std::invalid_argument);
  EXPECT_NO_THROW(check_pattern_name("prev2"));
}

TEST(ExpectedRoles, AOneRoleRunThatShowsItsRoleIsASuccessWithoutSpecializing) {
  const Marker m;
  const std::vector<ExpectedRole> roles = {{"first token", "first-token"}};
  const RunAnalysis run = analyze_attention({planted(m.batch, m.len, {kFirst, kFirst})}, m.tokens, true, {}, 0,
                                            {{}, {}, roles});
  EXPECT_FALSE(run.verdict.specialized);
  EXPECT_TRUE(run.verdict.roles_found);
  EXPECT_TRUE(run.verdict.success());
  const std::vector<ExpectedRole> two = {{"first token", "first-token"}, {"previous token", "previous-token"}};
  const RunAnalysis missing = analyze_attention({planted(m.batch, m.len, {kFirst, kFirst})}, m.tokens, true, {}, 0,
                                                {{}, {}, two});
  EXPECT_FALSE(missing.verdict.success());
  EXPECT_EQ(missing.verdict.reasons[0],
            "expected roles found: 1 of 2 (first token [first-token]: L0H0+L0H1, previous token [previous-token]: none)");
}

TEST(RedundancyAwareVerdict, AWeakCopyOfARoleDoesNotSinkTheSeparationOfTheRoles) {
  // Two previous-token heads, one of them leaning a third to the first token,
  // and one first-token head: the roles are separated by their clearest heads.
  const RowFn weak = [](int64_t, int64_t q, int64_t n) { return mix(q - 1 >= 0 ? q - 1 : 0, 0, 0.6, n); };
  RunAnalysis run = analyze_attention({planted(2, 6, {kPrevious, weak, kFirst})}, {}, true);
  ASSERT_EQ(run.at(0, 1).label, Label::pattern("previous-token"));
  run.js[1][2] = run.js[2][1] = 0.1;  // the weak copy close to the first-token head...
  relabel(run);
  EXPECT_TRUE(run.verdict.specialized);  // ...but the roles, represented by L0H0 and L0H2, are apart
}

TEST(InductionCircuit, HoldsOnlyHeadsLabelledForIt) {
  // Layer 0: a previous-token head and a head half on the previous token
  // (mixed); layer 1: an induction head.
  const std::vector<int32_t> tokens = {5, 0, 1, 2, 3, 0, 1, 2, 3, 4};
  const RowFn half = [](int64_t, int64_t q, int64_t n) { return mix(q > 0 ? q - 1 : 0, q, 0.55, n); };
  const RowFn induction = [&](int64_t, int64_t q, int64_t n) {
    for (int64_t j = 0; j + 2 < q; ++j)
      if (tokens[static_cast<std::size_t>(j)] == tokens[static_cast<std::size_t>(q)]) return one_hot(j + 1, n);
    return one_hot(q, n);
  };
  const RunAnalysis run =
      analyze_attention({planted(1, 10, {kPrevious, half}), planted(1, 10, {induction, kFirst})}, tokens, true);
  ASSERT_EQ(run.at(1, 0).label, Label::pattern("induction"));
  ASSERT_EQ(run.at(0, 1).label, Label::mixed());
  const std::vector<SetAblation> sets = candidate_sets(run);
  const auto circuit = std::find_if(sets.begin(), sets.end(), [](const SetAblation& s) { return s.role == "induction circuit"; });
  ASSERT_NE(circuit, sets.end());
  EXPECT_EQ(circuit->heads, (std::vector<std::size_t>{0, 2}));  // L0H0 and L1H0, not the mixed L0H1
}

}  // namespace
}  // namespace headlab::analysis

namespace headlab::analysis {
namespace {

// A pattern of the Marker's shape that coincides with offset:1, under another name.
AttendPattern renamed(AttendPattern p, const std::string& name) {
  p.name = name;
  return p;
}

TEST(ScoredOnlyPatterns, NeverChangeTheVerdictNorTakeAnExpectedRolesLabel) {
  // QA19 F2: `analyze --pattern offset:1` took the previous-token head's label, and the role was "none";
  // position:0 likewise took first-token's (nested with it, so within the margin).
  const Marker m;
  const std::vector<ExpectedRole> roles = {{"previous token", "previous-token"}, {"first token", "first-token"}};
  const Tensor a = planted(m.batch, m.len, {kPrevious, kFirst});
  const RunAnalysis plain = analyze_attention({a}, m.tokens, true, {}, 0, {{}, {}, roles});
  const std::vector<AttendPattern> scored = {positional_pattern("offset:1", m.batch, m.len, true, {}),
                                             positional_pattern("position:0", m.batch, m.len, true, {})};
  const RunAnalysis with = analyze_attention({a}, m.tokens, true, {}, 0, {{}, scored, roles});
  EXPECT_EQ(with.at(0, 0).label, Label::pattern("previous-token"));
  EXPECT_EQ(with.at(0, 1).label, Label::pattern("first-token"));
  EXPECT_TRUE(with.verdict.roles_found);
  EXPECT_EQ(with.verdict.reasons, plain.verdict.reasons);
  EXPECT_EQ(with.verdict.specialized, plain.verdict.specialized);
  // Without expected roles the user's pattern labels its heads, as before.
  const RunAnalysis no_roles = analyze_attention({a}, m.tokens, true, {}, 0, {{}, scored, {}});
  EXPECT_EQ(no_roles.at(0, 0).label, Label::user("offset:1"));
}

TEST(ScoredOnlyPatterns, ARoleIsFoundByAHeadLabelledWithAPatternThatCoincidesWithItsOwn) {
  // QA19 F2 repro B: a task's previous-token role and a file's one-back role, the same keys.
  const Marker m;
  const std::vector<AttendPattern> attend = {renamed(positional_pattern("offset:1", m.batch, m.len, true, {}),
                                                     "one-back")};
  const std::vector<ExpectedRole> roles = {{"previous token", "previous-token"}, {"one-back", "one-back"}};
  const RunAnalysis run =
      analyze_attention({planted(m.batch, m.len, {kPrevious, kPrevious})}, m.tokens, true, {}, 0, {{}, attend, roles});
  EXPECT_EQ(run.at(0, 0).label, Label::user("one-back"));  // a tie: the user's pattern
  EXPECT_TRUE(run.verdict.roles_found);
  EXPECT_EQ(run.verdict.reasons[0], "expected roles found: 2 of 2 (previous token [previous-token]: L0H0+L0H1 "
                                    "(labelled one-back, nested with it on this set), one-back: L0H0+L0H1)");
  // Two user patterns with the same keys: the same scores on every head.
  const std::vector<AttendPattern> twice = {attend[0], renamed(attend[0], "back-one")};
  const std::vector<ExpectedRole> both = {{"one-back", "one-back"}, {"back-one", "back-one"}};
  const RunAnalysis same = analyze_attention({planted(m.batch, m.len, {kPrevious, kFirst})}, m.tokens, true, {}, 0,
                                             {{}, twice, both});
  EXPECT_EQ(same.at(0, 0).label, Label::user("back-one"));
  EXPECT_EQ(same.verdict.reasons[0], "expected roles found: 2 of 2 (one-back: L0H0 (labelled back-one, the same "
                                     "pattern on this set), back-one: L0H0)");
}

TEST(ScoredOnlyPatterns, IdenticalUserPatternsTieByNameWhateverTheirOrderAndARolesPatternWins) {
  // QA19 F2 repro C: patterns {"aa": M, "zz": M} labelled by dict order.
  const Marker m;
  const AttendPattern back = positional_pattern("offset:1", m.batch, m.len, true, {});
  const Tensor a = planted(m.batch, m.len, {kPrevious});
  for (const bool zz_first : {false, true}) {
    std::vector<AttendPattern> attend = {renamed(back, "aa"), renamed(back, "zz")};
    if (zz_first) std::swap(attend[0], attend[1]);
    EXPECT_EQ(analyze_attention({a}, m.tokens, true, {}, 0, {{}, attend, {}}).at(0, 0).label, Label::user("aa"));
    const std::vector<ExpectedRole> role = {{"one back", "zz"}};
    const RunAnalysis run = analyze_attention({a}, m.tokens, true, {}, 0, {{}, attend, role});
    EXPECT_EQ(run.at(0, 0).label, Label::user("zz"));
    EXPECT_TRUE(run.verdict.roles_found) << zz_first;
  }
}

// modular-addition's shape: a, b, '=' with the target at '='; the pattern "operands" (keys a and b at '=')
// as the role. Head 0 attends uniformly; head 1 half to each operand.
RunAnalysis operands_run() {
  const int64_t batch = 4, len = 3;
  std::vector<int32_t> tokens, targets;
  AttendPattern operands = AttendPattern::empty("operands", batch, len);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t q = 0; q < len; ++q) {
      tokens.push_back(static_cast<int32_t>(q == 2 ? 5 : (b + q) % 5));
      targets.push_back(q == 2 ? static_cast<int32_t>(b % 5) : -1);
    }
    operands.keys[static_cast<std::size_t>(b * len + 2)] = {0, 1};
  }
  const RowFn uniform = [](int64_t, int64_t q, int64_t n) {
    std::vector<double> r(static_cast<std::size_t>(n), 0.0);
    for (int64_t k = 0; k <= q; ++k) r[static_cast<std::size_t>(k)] = 1.0 / static_cast<double>(q + 1);
    return r;
  };
  const RowFn both = [](int64_t, int64_t q, int64_t n) { return q == 2 ? mix(0, 1, 0.5, n) : one_hot(0, n); };
  const std::vector<AttendPattern> attend = {operands};
  const std::vector<ExpectedRole> roles = {{"both operands", "operands"}};
  return analyze_attention({planted(batch, len, {uniform, both})}, tokens, true, {}, 0, {targets, attend, roles});
}

TEST(ChanceScores, UniformAttentionTakesNoPatternThatCoversMostKeysButATrainedHeadKeepsIt) {
  // QA19 F16: modular-addition's "operands" (keys a and b at '=') scores 2/3 under uniform attention, beating
  // the single-key patterns by the margin: an untrained model's heads were "operands" at entropy 1.00.
  RunAnalysis run = operands_run();
  ASSERT_TRUE(run.chance);
  EXPECT_DOUBLE_EQ(*run.chance->user_score("operands")->score, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(*run.chance->patterns[pattern_index("first-token")], 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(*run.at(0, 0).scores.user_score("operands")->score, 2.0 / 3.0);
  EXPECT_EQ(run.at(0, 0).label, Label::diffuse());
  EXPECT_EQ(run.at(0, 1).label, Label::user("operands"));
  // heads.json keeps the chance scores, and a file from before them labels as it did.
  nlohmann::json j = run;
  RunAnalysis back = j.get<RunAnalysis>();
  relabel(back);
  EXPECT_EQ(back.at(0, 0).label, Label::diffuse());
  j.erase("chance");
  RunAnalysis old = j.get<RunAnalysis>();
  relabel(old);
  EXPECT_EQ(old.at(0, 0).label, Label::user("operands"));
}

// QA20: a pattern emerges at the score at which it labels (its chance score plus the margin, 0.82 for the
// operands), not at the bare threshold, which uniform attention's 2/3 passes: one rule for the labels, the
// report's emergence steps and sweep.json's.
TEST(ChanceScores, APatternEmergesAtTheScoreAtWhichItLabels) {
  const RunAnalysis run = operands_run();
  std::vector<nlohmann::json> history;
  for (const auto& [step, score] : std::vector<std::pair<int64_t, double>>{{10, 0.67}, {20, 0.7}, {50, 0.83}, {100, 1.0}})
    history.push_back({{"step", step}, {"heads", {{"L0H1", {{"operands", score}}}}}});
  const Label operands = Label::user("operands");
  EXPECT_EQ(emergence_step(history, "L0H1", "operands", LabelOptions{}.score_threshold), 10);  // the bare threshold
  EXPECT_EQ(pattern_emergence_step(history, "L0H1", operands, run), 50);
  LabelOptions wide;
  wide.margin = 0.3;  // 2/3 + 0.3 = 0.97
  EXPECT_EQ(pattern_emergence_step(history, "L0H1", operands, run, wide), 100);
  // A file from before chance scores: the threshold, as its labels.
  RunAnalysis old = run;
  old.chance.reset();
  EXPECT_EQ(pattern_emergence_step(history, "L0H1", operands, old), 10);
}

// A run whose last step is off the --analyze-every grid has no metrics line of
// its final analysis (heads.json's): a head labelled by it, below the labelling
// score at every analysis before, showed no emergence in the report and
// sweep.json. The final analysis counts after the history's last record.
TEST(ChanceScores, TheFinalAnalysisOffTheGridIsTheLastPointOfEmergence) {
  RunAnalysis run = operands_run();
  const Label operands = Label::user("operands");
  std::vector<nlohmann::json> history;
  for (const auto& [step, score] : std::vector<std::pair<int64_t, double>>{{10, 0.67}, {20, 0.7}})
    history.push_back({{"step", step}, {"heads", {{"L0H0", {{"operands", 0.9}}}, {"L0H1", {{"operands", score}}}}}});
  ASSERT_GE(label_score(run.at(0, 1).scores, operands), 0.82);  // labels L0H1 operands
  run.step = 30;
  EXPECT_EQ(pattern_emergence_step(history, "L0H1", operands, run), 30);
  // L0H0 scored 0.9 before, but its final score (uniform attention's 2/3) is below: not emerged.
  EXPECT_FALSE(pattern_emergence_step(history, "L0H0", operands, run).has_value());
  run.step = 20;  // the final analysis is the history's last line: nothing to add
  EXPECT_FALSE(pattern_emergence_step(history, "L0H1", operands, run).has_value());
  run.step = 30;  // a single analysis shows no emergence
  EXPECT_FALSE(pattern_emergence_step({}, "L0H1", operands, run).has_value());
}

}  // namespace
}  // namespace headlab::analysis
