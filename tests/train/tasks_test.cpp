#include "train/tasks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "train/errors.h"

namespace headlab::train {
namespace {

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

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

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

TEST(Tasks, InductionRepeatsADistinctPrefixAndTargetsTheNextTokenOnTheRepeat) {
  const int64_t t = 12, half = 6;
  for (const Seq& s : rows_of(sample("induction", 16, t))) {
    const std::set<int32_t> prefix(s.x.begin(), s.x.begin() + half);
    EXPECT_EQ(prefix.size(), static_cast<std::size_t>(half)) << "prefix tokens are distinct";
    for (int64_t i = 0; i < t; ++i) {
      const auto u = static_cast<std::size_t>(i);
      if (i >= half) {
        EXPECT_EQ(s.x[u], s.x[u - half]);
      }
      // Targets exactly on the repeat, except its last position (no next token).
      if (i >= half && i < t - 1) {
        EXPECT_EQ(s.y[u], s.x[u + 1]);
        // Which is what follows the earlier occurrence of the current token.
        const auto earlier = std::find(s.x.begin(), s.x.begin() + half, s.x[u]) - s.x.begin();
        EXPECT_EQ(s.y[u], s.x[static_cast<std::size_t>(earlier) + 1]);
      } else {
        EXPECT_EQ(s.y[u], -1) << "position " << i;
      }
    }
  }
}

TEST(Tasks, InductionWithVocabEqualToHalfTheSequenceUsesEveryTokenOncePerPrefix) {
  for (const Seq& s : rows_of(sample("induction", 4, 8))) {
    const std::set<int32_t> prefix(s.x.begin(), s.x.begin() + 4);
    EXPECT_EQ(prefix, (std::set<int32_t>{0, 1, 2, 3}));
  }
}

TEST(Tasks, InductionPrefixOrderVariesAcrossSequences) {
  std::set<std::vector<int32_t>> prefixes;
  for (const Seq& s : rows_of(sample("induction", 4, 8, 200))) prefixes.insert({s.x.begin(), s.x.begin() + 4});
  EXPECT_EQ(prefixes.size(), 24u) << "all 4! orders of 4 tokens appear in 200 draws";
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
  const std::string induction = usage_error_of("induction", 5, 12);
  EXPECT_TRUE(contains(induction, "vocab 5")) << induction;
  EXPECT_TRUE(contains(induction, "vocab >= 6")) << induction;
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
  EXPECT_TRUE(contains(usage_error_of("induction", 16, 2), "seq-len >= 4"));
  const std::string odd = usage_error_of("induction", 16, 7);
  EXPECT_TRUE(contains(odd, "must be even")) << odd;
  EXPECT_TRUE(contains(odd, "try 6 or 8")) << odd;
  const std::string even = usage_error_of("sort", 10, 6);
  EXPECT_TRUE(contains(even, "must be odd")) << even;
  EXPECT_TRUE(contains(even, "try 5 or 7")) << even;
  EXPECT_TRUE(contains(usage_error_of("sort", 10, 1), "seq-len >= 3"));
  EXPECT_TRUE(contains(usage_error_of("modular-addition", 12, 4), "must be 3"));
  EXPECT_TRUE(contains(usage_error_of("modular-addition", 12, 2), "must be 3"));
}

TEST(Tasks, SmallestValidSizesWork) {
  EXPECT_EQ(sample("first-prev-pair", 2, 2).tokens.size(), 128u);
  EXPECT_EQ(sample("induction", 2, 4).tokens.size(), 256u);
  EXPECT_EQ(sample("sort", 3, 3).tokens.size(), 192u);
  EXPECT_EQ(sample("modular-addition", 3, 3).tokens.size(), 192u);
}

TEST(Tasks, SampleRejectsANonPositiveBatch) {
  const auto task = make_task("previous", 8, 6);
  core::Generator gen(0);
  EXPECT_THROW(task->sample(0, gen), std::invalid_argument);
  EXPECT_THROW(task->sample(-1, gen), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::train
