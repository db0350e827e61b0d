#include "train/tasks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"
#include "train/errors.h"

namespace headlab::train {
namespace {

using test::contains;

// One sequence of a batch, as plain vectors, for readable checks.
struct Seq {
  std::vector<int32_t> x, y;
};

std::vector<Seq> rows_of(const Batch& batch) {
  std::vector<Seq> rows;
  for (int64_t b = 0; b < batch.batch; ++b) {
    const auto begin = static_cast<std::ptrdiff_t>(b * batch.seq_len), end = begin + batch.seq_len;
    rows.push_back({{batch.tokens.begin() + begin, batch.tokens.begin() + end},
                    {batch.targets.begin() + begin, batch.targets.begin() + end}});
  }
  return rows;
}

Batch sample(const std::string& name, int64_t vocab, int64_t seq_len, int64_t batch = 64, uint64_t seed = 7) {
  core::Generator gen(seed);
  return make_task(name, vocab, seq_len)->sample(batch, gen);
}

std::string usage_error_of(const std::string& name, int64_t vocab, int64_t seq_len) {
  try {
    make_task(name, vocab, seq_len);
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "make_task(" << name << ", " << vocab << ", " << seq_len << ") did not throw UsageError";
  return "";
}

TEST(Tasks, CatalogListsEveryTaskOnceWithDefinitionExpectedHeadsAndWorkingDefaults) {
  const std::vector<std::string> expected = {"first-prev-pair", "first-prev-sum", "previous",        "first",
                                             "induction",       "sort",           "modular-addition"};
  std::vector<std::string> names;
  for (const auto& info : task_catalog()) {
    names.push_back(info.name);
    EXPECT_FALSE(info.definition.empty()) << info.name;
    EXPECT_FALSE(info.expected_heads.empty()) << info.name;
    EXPECT_EQ(info.definition.find('\n'), std::string::npos) << info.name;
    const auto task = make_task(info.name, info.default_vocab, info.default_seq_len);
    EXPECT_EQ(task->name(), info.name);
    EXPECT_EQ(task->vocab(), info.default_vocab);
    EXPECT_EQ(task->seq_len(), info.default_seq_len);
    EXPECT_EQ(task_info(info.name).default_vocab, info.default_vocab);
  }
  EXPECT_EQ(names, expected);
}

TEST(Tasks, DefaultDemoIsFirstPrevPairWithVocab8AndSixTokens) {
  const TaskInfo& info = task_info("first-prev-pair");
  EXPECT_EQ(info.default_vocab, 8);
  EXPECT_EQ(info.default_seq_len, 6);
  EXPECT_TRUE(contains(info.expected_heads, "previous-token")) << info.expected_heads;
  EXPECT_TRUE(contains(info.expected_heads, "first-token")) << info.expected_heads;
}

TEST(Tasks, EveryTaskFillsTheBatchShapeWithTokensAndTargetsInRange) {
  for (const auto& info : task_catalog()) {
    const auto task = make_task(info.name, info.default_vocab, info.default_seq_len);
    core::Generator gen(3);
    const Batch batch = task->sample(17, gen);
    ASSERT_EQ(batch.batch, 17) << info.name;
    ASSERT_EQ(batch.seq_len, info.default_seq_len) << info.name;
    ASSERT_EQ(batch.tokens.size(), static_cast<std::size_t>(17 * info.default_seq_len)) << info.name;
    ASSERT_EQ(batch.targets.size(), batch.tokens.size()) << info.name;
    int64_t scored = 0;
    for (std::size_t i = 0; i < batch.tokens.size(); ++i) {
      EXPECT_GE(batch.tokens[i], 0) << info.name;
      EXPECT_LT(batch.tokens[i], task->vocab()) << info.name;
      EXPECT_GE(batch.targets[i], -1) << info.name;
      EXPECT_LT(batch.targets[i], task->num_classes()) << info.name;
      scored += batch.targets[i] >= 0;
    }
    EXPECT_GT(scored, 0) << info.name;
  }
}

TEST(Tasks, FirstPrevPairTargetIsFirstTimesVocabPlusPreviousFromPosition1) {
  const int64_t v = 8;
  EXPECT_EQ(make_task("first-prev-pair", v, 6)->num_classes(), 64);
  for (const Seq& s : rows_of(sample("first-prev-pair", v, 6))) {
    EXPECT_EQ(s.y[0], -1);
    for (std::size_t i = 1; i < s.x.size(); ++i) EXPECT_EQ(s.y[i], s.x[0] * v + s.x[i - 1]);
  }
}

TEST(Tasks, FirstPrevSumTargetIsFirstPlusPreviousModVocab) {
  const int64_t v = 5;
  EXPECT_EQ(make_task("first-prev-sum", v, 7)->num_classes(), v);
  for (const Seq& s : rows_of(sample("first-prev-sum", v, 7))) {
    EXPECT_EQ(s.y[0], -1);
    for (std::size_t i = 1; i < s.x.size(); ++i) EXPECT_EQ(s.y[i], (s.x[0] + s.x[i - 1]) % v);
  }
}

TEST(Tasks, PreviousTargetIsThePreviousToken) {
  for (const Seq& s : rows_of(sample("previous", 8, 6))) {
    EXPECT_EQ(s.y[0], -1);
    for (std::size_t i = 1; i < s.x.size(); ++i) EXPECT_EQ(s.y[i], s.x[i - 1]);
  }
}

TEST(Tasks, FirstTargetIsTheFirstToken) {
  for (const Seq& s : rows_of(sample("first", 8, 6))) {
    EXPECT_EQ(s.y[0], -1);
    for (std::size_t i = 1; i < s.x.size(); ++i) EXPECT_EQ(s.y[i], s.x[0]);
  }
}

// Where the segment's two occurrences start in one induction sequence: the
// first position whose token reappears later, and that later position.
std::pair<std::size_t, std::size_t> occurrences(const Seq& s) {
  for (std::size_t i = 0; i < s.x.size(); ++i)
    for (std::size_t j = i + 1; j < s.x.size(); ++j)
      if (s.x[j] == s.x[i] && s.y[j] >= 0) return {i, j};
  return {s.x.size(), s.x.size()};
}

TEST(Tasks, InductionRepeatsADistinctSegmentInOtherFillerAndTargetsTheNextTokenOnTheRepeat) {
  const std::size_t t = 24, len = 6;
  for (const Seq& s : rows_of(sample("induction", 16, static_cast<int64_t>(t)))) {
    const auto [first, second] = occurrences(s);
    ASSERT_LT(second, t) << "the segment occurs twice";
    ASSERT_LE(second + len, t);
    ASSERT_GE(second, first + len) << "the occurrences do not overlap";
    const std::set<int32_t> segment(s.x.begin() + static_cast<std::ptrdiff_t>(first),
                                    s.x.begin() + static_cast<std::ptrdiff_t>(first + len));
    EXPECT_EQ(segment.size(), len) << "segment tokens are distinct";
    for (std::size_t i = 0; i < t; ++i) {
      const bool in_first = i >= first && i < first + len, in_second = i >= second && i < second + len;
      if (in_second) {
        EXPECT_EQ(s.x[i], s.x[i - second + first]);
      }
      if (!in_first && !in_second) {
        EXPECT_FALSE(segment.contains(s.x[i])) << "filler at " << i << " is outside the segment";
      }
      // Targets exactly on the repeat, except its last position (no next token):
      // what followed the earlier copy of the current token.
      if (in_second && i + 1 < second + len) {
        EXPECT_EQ(s.y[i], s.x[i + 1]);
        EXPECT_EQ(s.y[i], s.x[i - second + first + 1]);
      } else {
        EXPECT_EQ(s.y[i], -1) << "position " << i;
      }
    }
  }
}

TEST(Tasks, InductionOffsetsAndGapsVarySoNoPositionGivesTheCopyAway) {
  std::set<std::size_t> firsts, distances;
  for (const Seq& s : rows_of(sample("induction", 16, 24, 300))) {
    const auto [first, second] = occurrences(s);
    firsts.insert(first);
    distances.insert(second - first);
  }
  // Filler of T - 2L = 12 positions: the first occurrence starts at 0 .. 12, and
  // the second follows it by L + 0 .. L + 12.
  EXPECT_EQ(firsts.size(), 13u);
  EXPECT_EQ(distances.size(), 13u);
  EXPECT_EQ(*distances.begin(), 6u);
  EXPECT_EQ(*distances.rbegin(), 18u);
}

TEST(Tasks, InductionWithTheSmallestVocabFillsWithTheOneTokenLeft) {
  for (const Seq& s : rows_of(sample("induction", 4, 12))) {
    const auto [first, second] = occurrences(s);
    ASSERT_LT(second, s.x.size());
    std::set<int32_t> all(s.x.begin(), s.x.end());
    EXPECT_EQ(all, (std::set<int32_t>{0, 1, 2, 3}));
  }
}

TEST(Tasks, InductionSegmentOrderVariesAcrossSequences) {
  std::set<std::vector<int32_t>> segments;
  for (const Seq& s : rows_of(sample("induction", 4, 12, 200))) {
    const auto [first, second] = occurrences(s);
    segments.insert({s.x.begin() + static_cast<std::ptrdiff_t>(first), s.x.begin() + static_cast<std::ptrdiff_t>(first + 3)});
  }
  EXPECT_EQ(segments.size(), 24u) << "all 4 * 3 * 2 ordered segments of 3 of 4 tokens appear in 200 draws";
}

TEST(Tasks, InductionCorruptionRemovesTheEarlierCopyOfEveryTargetedToken) {
  const Batch clean = sample("induction", 16, 24);
  core::Generator gen(3);
  const auto task = make_task("induction", 16, 24);
  const std::vector<int32_t> x = task->corrupt(clean, gen);
  ASSERT_EQ(x.size(), clean.tokens.size());
  for (std::size_t b = 0; b < 64; ++b) {
    const auto row = [&](const std::vector<int32_t>& v, std::size_t i) { return v[b * 24 + i]; };
    for (std::size_t i = 0; i < 24; ++i) {
      if (clean.targets[b * 24 + i] < 0) continue;
      EXPECT_EQ(row(x, i), row(clean.tokens, i)) << "the repeat itself is kept";
      for (std::size_t j = 0; j + 2 < i; ++j) EXPECT_NE(row(x, j), row(x, i)) << "no earlier copy at " << j;
    }
  }
  EXPECT_NE(task->corruption().find("first occurrence"), std::string::npos);
}

TEST(Tasks, FirstPrevCorruptionChangesOnlyTheFirstTokenAndPreviousChangesEveryToken) {
  core::Generator gen(4);
  const Batch clean = sample("first-prev-pair", 8, 6);
  const std::vector<int32_t> x = make_task("first-prev-pair", 8, 6)->corrupt(clean, gen);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (i % 6 == 0)
      EXPECT_NE(x[i], clean.tokens[i]);
    else
      EXPECT_EQ(x[i], clean.tokens[i]);
  }
  const Batch prev = sample("previous", 8, 6);
  const std::vector<int32_t> y = make_task("previous", 8, 6)->corrupt(prev, gen);
  for (std::size_t i = 0; i < y.size(); ++i) {
    EXPECT_NE(y[i], prev.tokens[i]);
    EXPECT_GE(y[i], 0);
    EXPECT_LT(y[i], 8);
  }
}

TEST(Tasks, DefaultCorruptionGivesEachSequenceTheNextOnesTokens) {
  core::Generator gen(5);
  const Batch clean = sample("sort", 10, 11, 3);
  const std::vector<int32_t> x = make_task("sort", 10, 11)->corrupt(clean, gen);
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t i = 0; i < 11; ++i) EXPECT_EQ(x[b * 11 + i], clean.tokens[((b + 1) % 3) * 11 + i]);
  EXPECT_EQ(make_task("sort", 10, 11)->corruption(), Task::next_row_corruption());
}

TEST(Tasks, DefaultCorruptionOfPaddedRowsTakesTheNextRowAtLeastAsLong) {
  // Lengths 3 6 2 5 4 padded to 6 with 99 (a value no row holds): row b
  // takes the first n_b tokens of the next row at least as long, and pads
  // the rest with 0; row 1, the longest, has none and keeps its tokens.
  Batch clean{5, 6, {}, std::vector<int32_t>(30, -1), {3, 6, 2, 5, 4}};
  for (int32_t b = 0; b < 5; ++b)
    for (int32_t t = 0; t < 6; ++t) clean.tokens.push_back(t < clean.lengths[static_cast<std::size_t>(b)] ? 10 * b + t : 99);
  core::Generator gen(5);
  const std::vector<int32_t> x = make_task("sort", 10, 11)->corrupt(clean, gen);  // the default: any task without its own
  const std::vector<int32_t> expected{
      10, 11, 12, 0,  0,  0,   // row 1's first 3
      10, 11, 12, 13, 14, 15,  // its own: no other row has 6 tokens
      30, 31, 0,  0,  0,  0,   // row 3's first 2
      10, 11, 12, 13, 14, 0,   // row 1's: rows 4 and 0 are shorter
      10, 11, 12, 13, 0,  0};  // row 1's: row 0 is shorter
  EXPECT_EQ(x, expected);
}

TEST(Tasks, SortListsTokensThenSeparatorThenTheSortedTokensAsNextTokenTargets) {
  const int64_t v = 10, t = 11, n = 5;
  for (const Seq& s : rows_of(sample("sort", v, t))) {
    std::vector<int32_t> list(s.x.begin(), s.x.begin() + n);
    for (int32_t token : list) EXPECT_LT(token, v - 1) << "list tokens never equal the separator";
    EXPECT_EQ(s.x[n], v - 1);
    std::sort(list.begin(), list.end());
    EXPECT_EQ(std::vector<int32_t>(s.x.begin() + n + 1, s.x.end()), list);
    for (int64_t i = 0; i < t; ++i) {
      const auto u = static_cast<std::size_t>(i);
      EXPECT_EQ(s.y[u], i >= n && i < t - 1 ? s.x[u + 1] : -1) << "position " << i;
    }
  }
}

TEST(Tasks, ModularAdditionScoresOnlyTheEqualsPosition) {
  const int64_t v = 12, p = 11;
  const auto task = make_task("modular-addition", v, 3);
  EXPECT_EQ(task->num_classes(), p);
  std::set<int32_t> operands;
  for (const Seq& s : rows_of(sample("modular-addition", v, 3, 500))) {
    EXPECT_LT(s.x[0], p);
    EXPECT_LT(s.x[1], p);
    EXPECT_EQ(s.x[2], p);
    EXPECT_EQ(s.y, (std::vector<int32_t>{-1, -1, static_cast<int32_t>((s.x[0] + s.x[1]) % p)}));
    operands.insert(s.x[0]);
    operands.insert(s.x[1]);
  }
  EXPECT_EQ(operands.size(), static_cast<std::size_t>(p)) << "every operand value appears";
}

TEST(Tasks, RandomTokensCoverTheWholeVocab) {
  const Batch batch = sample("first-prev-pair", 8, 6, 100);
  EXPECT_EQ(std::set<int32_t>(batch.tokens.begin(), batch.tokens.end()).size(), 8u);
  const Batch sums = sample("first-prev-sum", 8, 6, 100);
  EXPECT_EQ(std::set<int32_t>(sums.targets.begin(), sums.targets.end()).size(), 9u) << "-1 and 8 classes";
}

TEST(Tasks, SameGeneratorStateGivesTheSameBatchForEveryTask) {
  for (const auto& info : task_catalog()) {
    const auto task = make_task(info.name, info.default_vocab, info.default_seq_len);
    core::Generator gen(11);
    gen.next_u64();
    const auto state = gen.state();
    const Batch a = task->sample(8, gen);
    gen.set_state(state);
    const Batch b = task->sample(8, gen);
    EXPECT_EQ(a.tokens, b.tokens) << info.name;
    EXPECT_EQ(a.targets, b.targets) << info.name;
    EXPECT_NE(gen.state(), state) << info.name << ": sampling advances the generator";
  }
}

TEST(Tasks, DifferentSeedsAndConsecutiveSamplesGiveDifferentBatches) {
  for (const auto& info : task_catalog()) {
    const auto task = make_task(info.name, info.default_vocab, info.default_seq_len);
    core::Generator one(1), two(2);
    const Batch first = task->sample(16, one);
    EXPECT_NE(first.tokens, task->sample(16, two).tokens) << info.name;
    EXPECT_NE(first.tokens, task->sample(16, one).tokens) << info.name;
  }
}

TEST(Tasks, UnknownTaskNameIsAUsageErrorListingTheValidOnes) {
  const std::string message = usage_error_of("fist-prev-pair", 8, 6);
  EXPECT_TRUE(contains(message, "unknown task 'fist-prev-pair'")) << message;
  for (const auto& info : task_catalog()) EXPECT_TRUE(contains(message, info.name)) << message;
  EXPECT_THROW(task_info("nope"), UsageError);
}

TEST(Tasks, VocabTooSmallForTheTaskIsAUsageErrorSayingWhatFits) {
  EXPECT_TRUE(contains(usage_error_of("first-prev-pair", 1, 6), "vocab 1")) << usage_error_of("first-prev-pair", 1, 6);
  EXPECT_TRUE(contains(usage_error_of("first-prev-pair", 1, 6), "vocab >= 2"));
  EXPECT_TRUE(contains(usage_error_of("first-prev-sum", 0, 6), "vocab 0"));
  EXPECT_TRUE(contains(usage_error_of("previous", -3, 6), "vocab -3"));
  EXPECT_TRUE(contains(usage_error_of("first", 1, 6), "vocab 1"));
  EXPECT_TRUE(contains(usage_error_of("sort", 2, 5), "vocab >= 3"));
  EXPECT_TRUE(contains(usage_error_of("modular-addition", 2, 3), "vocab >= 3"));
  const std::string induction = usage_error_of("induction", 6, 24);
  EXPECT_TRUE(contains(induction, "vocab 6")) << induction;
  EXPECT_TRUE(contains(induction, "vocab >= 7")) << induction;
}

TEST(Tasks, VocabTooLargeForThirtyTwoBitTargetsIsAUsageError) {
  EXPECT_TRUE(
      contains(usage_error_of("first-prev-pair", 46341, 6), "vocab 46341 is too large; it needs vocab <= 46340"));
  EXPECT_NO_THROW(make_task("first-prev-pair", 46340, 6));
  EXPECT_TRUE(contains(usage_error_of("previous", int64_t{1} << 31, 6), "vocab 2147483648"));
}

TEST(Tasks, ImpossibleSeqLenIsAUsageErrorSayingWhatFits) {
  EXPECT_TRUE(contains(usage_error_of("first-prev-pair", 8, 1), "seq-len >= 2"));
  EXPECT_TRUE(contains(usage_error_of("previous", 8, 0), "seq-len 0"));
  EXPECT_TRUE(contains(usage_error_of("first", 8, -1), "seq-len -1"));
  EXPECT_TRUE(contains(usage_error_of("induction", 16, 11), "seq-len >= 12"));
  const std::string even = usage_error_of("sort", 10, 6);
  EXPECT_TRUE(contains(even, "must be odd")) << even;
  EXPECT_TRUE(contains(even, "try 5 or 7")) << even;
  EXPECT_TRUE(contains(usage_error_of("sort", 10, 1), "seq-len >= 3"));
  EXPECT_TRUE(contains(usage_error_of("modular-addition", 12, 4), "must be 3"));
  EXPECT_TRUE(contains(usage_error_of("modular-addition", 12, 2), "must be 3"));
}

TEST(Tasks, SmallestValidSizesWork) {
  EXPECT_EQ(sample("first-prev-pair", 2, 2).tokens.size(), 128u);
  EXPECT_EQ(sample("induction", 4, 12).tokens.size(), 768u);
  EXPECT_EQ(sample("sort", 3, 3).tokens.size(), 192u);
  EXPECT_EQ(sample("modular-addition", 3, 3).tokens.size(), 192u);
}

TEST(Tasks, SampleRejectsANonPositiveBatch) {
  const auto task = make_task("previous", 8, 6);
  core::Generator gen(0);
  EXPECT_THROW(task->sample(0, gen), std::invalid_argument);
  EXPECT_THROW(task->sample(-1, gen), std::invalid_argument);
}


TEST(Tasks, EachTaskDeclaresItsExpectedRolesAndEmitsTheirPatternsWithItsExamples) {
  for (const TaskInfo& t : task_catalog()) {
    auto task = make_task(t.name, t.default_vocab, t.default_seq_len);
    Batch b = task->eval_batch(4, 1);
    task->describe(b);
    EXPECT_EQ(b.roles, t.roles) << t.name;
    EXPECT_EQ(b.sources, t.name == "induction") << t.name;
    for (const analysis::ExpectedRole& r : t.roles) {
      const bool builtin = r.pattern == "previous-token" || r.pattern == "first-token" || r.pattern == "induction";
      const bool emitted = std::any_of(b.attend.begin(), b.attend.end(),
                                       [&](const analysis::AttendPattern& p) { return p.name == r.pattern; });
      EXPECT_TRUE(builtin || emitted) << t.name << ": role " << r.role;
    }
  }
  EXPECT_TRUE(task_info("first-prev-sum").roles.empty());
}

TEST(Tasks, SortsPatternPointsAtTheListPositionsHoldingTheNextToken) {
  auto task = make_task("sort", 10, 11);
  Batch b = task->eval_batch(8, 3);
  task->describe(b);
  ASSERT_EQ(b.attend.size(), 1u);
  const analysis::AttendPattern& p = b.attend[0];
  for (int64_t row = 0; row < b.batch; ++row)
    for (int64_t q = 0; q < 11; ++q) {
      const int32_t target = b.targets[static_cast<std::size_t>(row * 11 + q)];
      EXPECT_EQ(p.at(row, q).empty(), target < 0);
      for (int32_t k : p.at(row, q)) {
        EXPECT_LT(k, 5);
        EXPECT_EQ(b.tokens[static_cast<std::size_t>(row * 11 + k)], target);
      }
    }
}

}  // namespace
}  // namespace headlab::train
