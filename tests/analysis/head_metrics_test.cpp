// Head scores on attention matrices planted by hand (docs/head-metrics.md).
#include "analysis/head_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <vector>

#include "analysis/labels.h"

namespace headlab::analysis {
namespace {

using core::DType;
using core::Tensor;

// One row of a planted head: the attention of query q over T keys.
using RowFn = std::function<std::vector<double>(int64_t q, int64_t len)>;

std::vector<double> one_hot(int64_t k, int64_t len) {
  std::vector<double> r(static_cast<std::size_t>(len), 0.0);
  r[static_cast<std::size_t>(k)] = 1.0;
  return r;
}

const RowFn kPrevious = [](int64_t q, int64_t len) { return one_hot(q > 0 ? q - 1 : 0, len); };
const RowFn kFirst = [](int64_t, int64_t len) { return one_hot(0, len); };
const RowFn kSelf = [](int64_t q, int64_t len) { return one_hot(q, len); };
const RowFn kUniformCausal = [](int64_t q, int64_t len) {
  std::vector<double> r(static_cast<std::size_t>(len), 0.0);
  for (int64_t k = 0; k <= q; ++k) r[static_cast<std::size_t>(k)] = 1.0 / static_cast<double>(q + 1);
  return r;
};
const RowFn kUniformAll = [](int64_t, int64_t len) {
  return std::vector<double>(static_cast<std::size_t>(len), 1.0 / static_cast<double>(len));
};

// [batch, heads.size(), T, T] with every example's head h given by heads[h].
Tensor planted(int64_t batch, int64_t len, const std::vector<RowFn>& heads, DType dtype = DType::f64) {
  std::vector<double> v;
  for (int64_t b = 0; b < batch; ++b)
    for (const RowFn& head : heads)
      for (int64_t q = 0; q < len; ++q) {
        const std::vector<double> row = head(q, len);
        v.insert(v.end(), row.begin(), row.end());
      }
  return Tensor::from_vector(v, {batch, static_cast<int64_t>(heads.size()), len, len}, dtype);
}

TEST(HeadScores, PlantedPreviousFirstSelfAndUniformHeadsGetExactScores) {
  const Tensor a = planted(2, 5, {kPrevious, kFirst, kSelf, kUniformCausal});
  const std::vector<HeadScores> s = head_scores(a, {}, /*causal=*/true);
  ASSERT_EQ(s.size(), 4u);

  EXPECT_DOUBLE_EQ(s[0].at("previous-token"), 1.0);
  EXPECT_DOUBLE_EQ(s[0].at("first-token"), 0.0);
  EXPECT_DOUBLE_EQ(s[0].at("self"), 0.0);
  EXPECT_DOUBLE_EQ(s[0].entropy, 0.0);
  EXPECT_DOUBLE_EQ(s[0].distance, 4.0 / 5.0);  // q = 0 attends itself, the rest one step back

  EXPECT_DOUBLE_EQ(s[1].at("first-token"), 1.0);
  EXPECT_DOUBLE_EQ(s[1].at("previous-token"), 0.0);
  EXPECT_DOUBLE_EQ(s[1].distance, (0 + 1 + 2 + 3 + 4) / 5.0);

  EXPECT_DOUBLE_EQ(s[2].at("self"), 1.0);
  EXPECT_DOUBLE_EQ(s[2].at("previous-token"), 0.0);
  EXPECT_DOUBLE_EQ(s[2].distance, 0.0);

  EXPECT_DOUBLE_EQ(s[3].at("previous-token"), (1.0 / 3 + 1.0 / 4 + 1.0 / 5) / 3);
  EXPECT_DOUBLE_EQ(s[3].at("first-token"), (1.0 / 3 + 1.0 / 4 + 1.0 / 5) / 3);
  EXPECT_NEAR(s[3].entropy, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(s[3].distance, (0 + 0.5 + 1 + 1.5 + 2) / 5);

  for (const HeadScores& h : s) {
    EXPECT_FALSE(h["induction"].has_value()) << "no tokens given";
    EXPECT_FALSE(h["duplicate-token"].has_value());
  }
}

TEST(HeadScores, LocalScoresAttentionTwoBackButNotThePositionalPatterns) {
  // Causal, T = 6: a head on q - 2 (q >= 2) scores 1 at q = 3, 4, 5 and 0 at
  // q = 2, whose key two back is position 0 (first-token's).
  const RowFn two_back = [](int64_t q, int64_t len) { return one_hot(q >= 2 ? q - 2 : 0, len); };
  const RowFn half_prev_half_two_back = [](int64_t q, int64_t len) {
    std::vector<double> r(static_cast<std::size_t>(len), 0.0);
    r[static_cast<std::size_t>(q > 0 ? q - 1 : 0)] += 0.5;
    r[static_cast<std::size_t>(q > 1 ? q - 2 : 0)] += 0.5;
    return r;
  };
  const Tensor a = planted(1, 6, {two_back, kPrevious, kFirst, kSelf, half_prev_half_two_back});
  const std::vector<HeadScores> s = head_scores(a, {}, /*causal=*/true);
  EXPECT_DOUBLE_EQ(s[0].at("local"), 3.0 / 4.0);
  EXPECT_EQ(label_head(s[0], std::nullopt, {}), Label::pattern("local"));
  for (std::size_t h = 1; h <= 3; ++h) EXPECT_DOUBLE_EQ(s[h].at("local"), 0.0) << "head " << h;
  EXPECT_DOUBLE_EQ(s[4].at("local"), 0.5 * 3.0 / 4.0);

  // Bidirectional: keys q - 2, q + 1 and q + 2 (those that exist, not 0) count.
  const RowFn next = [](int64_t q, int64_t len) { return one_hot(q + 1 < len ? q + 1 : q, len); };
  const std::vector<HeadScores> b = head_scores(planted(1, 6, {next, kUniformAll}), {}, /*causal=*/false);
  EXPECT_DOUBLE_EQ(b[0].at("local"), 3.0 / 4.0);  // q = 2, 3, 4 attend q + 1; q = 5 attends itself
  // Uniform 1/6: q = 2 has keys 3, 4; q = 3 has 1, 4, 5; q = 4 has 2, 5; q = 5 has 3.
  EXPECT_DOUBLE_EQ(b[1].at("local"), (2.0 + 3.0 + 2.0 + 1.0) / 6.0 / 4.0);
}

TEST(HeadScores, Float32AttentionGivesTheSameScoresAsFloat64) {
  const std::vector<RowFn> heads = {kPrevious, kUniformCausal};
  const std::vector<HeadScores> s64 = head_scores(planted(1, 6, heads), {}, true);
  const std::vector<HeadScores> s32 = head_scores(planted(1, 6, heads, DType::f32), {}, true);
  for (std::size_t h = 0; h < heads.size(); ++h) {
    EXPECT_NEAR(s32[h].at("previous-token"), s64[h].at("previous-token"), 1e-6);
    EXPECT_NEAR(s32[h].entropy, s64[h].entropy, 1e-6);
    EXPECT_NEAR(s32[h].distance, s64[h].distance, 1e-6);
  }
}

TEST(HeadScores, BidirectionalEntropyDividesByLogOfAllKeys) {
  const Tensor a = planted(1, 4, {kUniformAll});
  const HeadScores s = head_scores(a, {}, /*causal=*/false)[0];
  EXPECT_NEAR(s.entropy, 1.0, 1e-12);
  // Mean |q - k| over all keys: q = 0: 1.5, q = 1: 1, q = 2: 1, q = 3: 1.5.
  EXPECT_DOUBLE_EQ(s.distance, (1.5 + 1 + 1 + 1.5) / 4);
  EXPECT_DOUBLE_EQ(s.at("previous-token"), 0.25);
}

TEST(HeadScores, CausalFlagRejectsAttentionAboveTheDiagonal) {
  const Tensor a = planted(1, 4, {kUniformAll});
  EXPECT_THROW(head_scores(a, {}, /*causal=*/true), std::invalid_argument);
}

TEST(HeadScores, InductionAndDuplicateHeadsScoreOneOnARepeatedSegment) {
  // 9 | 1 2 3 | 1 2 3: queries 4, 5, 6 have an earlier copy at q - 3.
  const int64_t len = 7;
  const std::vector<int32_t> tokens = {9, 1, 2, 3, 1, 2, 3};
  const RowFn induction = [](int64_t q, int64_t n) { return one_hot(q >= 4 ? q - 2 : 0, n); };
  const RowFn duplicate = [](int64_t q, int64_t n) { return one_hot(q >= 4 ? q - 3 : 0, n); };
  const std::vector<HeadScores> s = head_scores(planted(1, len, {induction, duplicate, kPrevious}), tokens, true);

  ASSERT_TRUE(s[0]["induction"] && s[0]["duplicate-token"]);
  EXPECT_DOUBLE_EQ(*s[0]["induction"], 1.0);
  EXPECT_DOUBLE_EQ(*s[0]["duplicate-token"], 0.0);
  EXPECT_DOUBLE_EQ(s[0].at("first-token"), 2.0 / 5.0);  // q = 2, 3 of q = 2..6

  EXPECT_DOUBLE_EQ(*s[1]["duplicate-token"], 1.0);
  EXPECT_DOUBLE_EQ(*s[1]["induction"], 0.0);

  EXPECT_DOUBLE_EQ(*s[2]["induction"], 0.0);
  EXPECT_DOUBLE_EQ(*s[2]["duplicate-token"], 0.0);
}

TEST(HeadScores, PreviousTokenHeadScoresNoInductionOnAlternatingTokens) {
  // 5 1 2 1 2 1: the token after each nearby copy is the previous token, so
  // nearby copies (j >= q - 2) are left out; only q = 5's copy at j = 1 counts.
  const std::vector<int32_t> tokens = {5, 1, 2, 1, 2, 1};
  const HeadScores s = head_scores(planted(1, 6, {kPrevious}), tokens, true)[0];
  ASSERT_TRUE(s["induction"].has_value());
  EXPECT_DOUBLE_EQ(*s["induction"], 0.0);
  EXPECT_DOUBLE_EQ(*s["duplicate-token"], 0.0);
  EXPECT_DOUBLE_EQ(s.at("previous-token"), 1.0);
}

TEST(HeadScores, InductionAveragesOnlyOverExamplesWithARepeat) {
  const RowFn induction = [](int64_t q, int64_t n) { return one_hot(q >= 4 ? q - 2 : 0, n); };
  // Example 0 repeats a segment, example 1 has all-distinct tokens.
  const std::vector<int32_t> tokens = {9, 1, 2, 3, 1, 2, 3, /**/ 0, 1, 2, 3, 4, 5, 6};
  const Tensor a = planted(2, 7, {induction});
  EXPECT_FALSE(example_head_scores(a, tokens, true, 1)[0]["induction"].has_value());
  const HeadScores batch = head_scores(a, tokens, true)[0];
  ASSERT_TRUE(batch["induction"].has_value());
  EXPECT_DOUBLE_EQ(*batch["induction"], *example_head_scores(a, tokens, true, 0)[0]["induction"]);
}

// Softmax of fixed pseudo-random scores under a causal mask (or none):
// [B, h, T, T].
Tensor messy_attention(int64_t batch, int64_t heads, int64_t len, bool causal = true, uint32_t state = 12345) {
  std::vector<double> v;
  for (int64_t row = 0; row < batch * heads * len; ++row) {
    const int64_t q = row % len;
    std::vector<double> r(static_cast<std::size_t>(len), 0.0);
    double sum = 0;
    for (int64_t k = 0; k <= (causal ? q : len - 1); ++k) {
      state = state * 1664525u + 1013904223u;
      r[static_cast<std::size_t>(k)] = std::exp(4.0 * (state >> 8) / double(1u << 24));
      sum += r[static_cast<std::size_t>(k)];
    }
    for (double& x : r) x /= sum;
    v.insert(v.end(), r.begin(), r.end());
  }
  return Tensor::from_vector(v, {batch, heads, len, len}, DType::f64);
}

TEST(HeadScores, BatchScoreEqualsTheMeanOfPerExampleScores) {
  const int64_t batch = 3, len = 6;
  const Tensor a = messy_attention(batch, 2, len);
  const std::vector<int32_t> tokens = {1, 2, 1, 2, 3, 1, /**/ 4, 4, 4, 5, 4, 5, /**/ 7, 8, 9, 7, 8, 9};
  const std::vector<HeadScores> whole = head_scores(a, tokens, true);
  for (std::size_t h = 0; h < 2; ++h) {
    HeadScores sum;
    double ind = 0, dup = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const HeadScores e = example_head_scores(a, tokens, true, b)[h];
      *sum["previous-token"] += e.at("previous-token") / batch;
      *sum["first-token"] += e.at("first-token") / batch;
      *sum["self"] += e.at("self") / batch;
      sum.entropy += e.entropy / batch;
      sum.distance += e.distance / batch;
      ASSERT_TRUE(e["induction"].has_value());  // every example repeats a token
      ind += *e["induction"] / batch;
      dup += *e["duplicate-token"] / batch;
    }
    EXPECT_NEAR(whole[h].at("previous-token"), sum.at("previous-token"), 1e-12);
    EXPECT_NEAR(whole[h].at("first-token"), sum.at("first-token"), 1e-12);
    EXPECT_NEAR(whole[h].at("self"), sum.at("self"), 1e-12);
    EXPECT_NEAR(whole[h].entropy, sum.entropy, 1e-12);
    EXPECT_NEAR(whole[h].distance, sum.distance, 1e-12);
    EXPECT_NEAR(*whole[h]["induction"], ind, 1e-12);
    EXPECT_NEAR(*whole[h]["duplicate-token"], dup, 1e-12);
  }
}

TEST(HeadScores, ComputingScoresLeavesTheAttentionTensorUnchanged) {
  const Tensor a = messy_attention(2, 2, 5);
  const std::vector<double> before = a.to_vector();
  head_scores(a, {}, true);
  js_distance_matrix({a}, true);
  EXPECT_EQ(a.to_vector(), before);
}

TEST(HeadScores, NonContiguousViewsAreReadThroughTheirStrides) {
  const Tensor a = planted(2, 5, {kPrevious, kFirst});
  const Tensor head1 = a.slice(1, 1, 2);  // [2, 1, T, T], strided over the batch
  ASSERT_FALSE(head1.is_contiguous());
  EXPECT_DOUBLE_EQ(head_scores(head1, {}, true)[0].at("first-token"), 1.0);
  // Batch and head axes swapped: each "head" is now one example averaged over
  // the previous-token and the first-token head.
  const Tensor swapped = a.transpose(0, 1);
  ASSERT_FALSE(swapped.is_contiguous());
  for (const HeadScores& s : head_scores(swapped, {}, true)) EXPECT_DOUBLE_EQ(s.at("previous-token"), 0.5);
}

TEST(HeadScores, RejectsWrongShapesRowsAndTokenCounts) {
  EXPECT_THROW(head_scores(Tensor::zeros({2, 5, 5}, DType::f64), {}, true), std::invalid_argument);
  EXPECT_THROW(head_scores(planted(1, 2, {kFirst}), {}, true), std::invalid_argument);  // T < 3
  EXPECT_THROW(head_scores(Tensor::zeros({1, 1, 4, 4}, DType::f64), {}, true), std::invalid_argument);
  const std::vector<int32_t> too_few = {1, 2, 3};
  EXPECT_THROW(head_scores(planted(1, 4, {kFirst}), too_few, true), std::invalid_argument);
  EXPECT_THROW(example_head_scores(planted(1, 4, {kFirst}), {}, true, 1), std::invalid_argument);
}

// Examples of real lengths `lengths`, each one's own [1, h, n, n] attention
// padded to T: its pad queries spread their mass over every key, as a
// forward's pad queries may; its real queries never see the padding.
Tensor padded(const std::vector<Tensor>& examples, int64_t T) {
  const int64_t heads = examples[0].size(1);
  std::vector<double> v;
  for (const Tensor& e : examples) {
    const int64_t n = e.size(2);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t q = 0; q < T; ++q)
        for (int64_t k = 0; k < T; ++k)
          v.push_back(q < n ? (k < n ? e.at({0, h, q, k}) : 0.0) : 1.0 / static_cast<double>(T));
  }
  return Tensor::from_vector(v, {static_cast<int64_t>(examples.size()), heads, T, T}, DType::f64);
}

void expect_near(const std::optional<double>& a, const std::optional<double>& b, const char* what) {
  ASSERT_EQ(a.has_value(), b.has_value()) << what;
  if (b) {
    EXPECT_NEAR(*a, *b, 1e-12) << what;
  }
}

// Every score of `s` against `expected`.
void expect_scores(const HeadScores& s, const HeadScores& expected) {
  for (std::size_t p = 0; p < kPatternCount; ++p) {
    expect_near(s.patterns[p], expected.patterns[p], kPatterns[p].name.data());
    expect_near(s.patterns_all[p], expected.patterns_all[p], kPatterns[p].name.data());
  }
  expect_near(s.detector.previous_token, expected.detector.previous_token, "detector previous");
  expect_near(s.detector.duplicate_token, expected.detector.duplicate_token, "detector duplicate");
  expect_near(s.detector.induction, expected.detector.induction, "detector induction");
  EXPECT_NEAR(s.entropy, expected.entropy, 1e-12);
  EXPECT_NEAR(s.distance, expected.distance, 1e-12);
}

// The mean of two examples' scores where each exists.
std::optional<double> mean2(const std::optional<double>& a, const std::optional<double>& b) {
  if (a && b) return (*a + *b) / 2;
  return a ? a : b;
}

TEST(HeadScores, PaddedExamplesScoreAsTheirRealPositionsAlone) {
  for (const bool causal : {true, false}) {
    // Example 0: 4 real tokens padded to 6 (a repeat at q = 3); example 1: 6.
    const std::vector<int32_t> t0 = {1, 2, 3, 1}, t1 = {4, 4, 5, 4, 5, 4};
    const std::vector<int32_t> tokens = {1, 2, 3, 1, 0, 0, /**/ 4, 4, 5, 4, 5, 4}, lengths = {4, 6};
    const Tensor e0 = messy_attention(1, 2, 4, causal, 7), e1 = messy_attention(1, 2, 6, causal, 8);
    const Tensor a = padded({e0, e1}, 6);
    const std::vector<HeadScores> s = head_scores(a, tokens, causal, {}, lengths);
    for (std::size_t h = 0; h < 2; ++h) {
      const HeadScores x = head_scores(e0, t0, causal)[h], y = head_scores(e1, t1, causal)[h];
      HeadScores expected;
      for (std::size_t p = 0; p < kPatternCount; ++p) {
        expected.patterns[p] = mean2(x.patterns[p], y.patterns[p]);
        expected.patterns_all[p] = mean2(x.patterns_all[p], y.patterns_all[p]);
      }
      expected.detector = {mean2(x.detector.previous_token, y.detector.previous_token),
                           mean2(x.detector.duplicate_token, y.detector.duplicate_token),
                           mean2(x.detector.induction, y.detector.induction)};
      expected.entropy = (x.entropy + y.entropy) / 2;
      expected.distance = (x.distance + y.distance) / 2;
      SCOPED_TRACE(causal ? "causal" : "bidirectional");
      expect_scores(s[h], expected);
    }
    // JS: over the (example, query) pairs of both, each at its own length.
    const double pairs0 = causal ? 3 : 4, pairs1 = causal ? 5 : 6;
    const double js0 = js_distance_matrix({e0}, causal)[0][1], js1 = js_distance_matrix({e1}, causal)[0][1];
    EXPECT_NEAR(js_distance_matrix({a}, causal, lengths)[0][1], (js0 * pairs0 + js1 * pairs1) / (pairs0 + pairs1),
                1e-12);
  }
}

TEST(HeadScores, AOneTokenExampleCountsInNoScoreAndATwoTokenOneOnlyInThoseItCanShow) {
  const std::vector<int32_t> t1 = {4, 4, 5, 4, 5, 4};
  const Tensor e1 = messy_attention(1, 2, 6, true, 8);
  const HeadScores alone = head_scores(e1, t1, true)[0];
  // One token: the batch's scores are the full example's.
  const Tensor one = padded({messy_attention(1, 2, 1), e1}, 6);
  const std::vector<int32_t> tokens = {3, 0, 0, 0, 0, 0, /**/ 4, 4, 5, 4, 5, 4};
  expect_scores(head_scores(one, tokens, true, {}, std::vector<int32_t>{1, 6})[0], alone);
  // Two tokens: no query q >= 2 (the positional scores are the full
  // example's), but a choice of keys at q = 1 (entropy, distance, detector).
  const Tensor e0 = messy_attention(1, 2, 2, true, 9);
  const HeadScores two = head_scores(padded({e0, e1}, 6), tokens, true, {}, std::vector<int32_t>{2, 6})[0];
  for (const char* p : {"previous-token", "first-token", "self", "local"}) EXPECT_NEAR(two.at(p), alone.at(p), 1e-12);
  const double entropy0 = -(e0.at({0, 0, 1, 0}) * std::log(e0.at({0, 0, 1, 0})) +
                            e0.at({0, 0, 1, 1}) * std::log(e0.at({0, 0, 1, 1}))) / std::log(2.0);
  EXPECT_NEAR(two.entropy, (entropy0 + alone.entropy) / 2, 1e-12);
  EXPECT_NEAR(two.distance, (e0.at({0, 0, 1, 0}) / 2 + alone.distance) / 2, 1e-12);
  EXPECT_NEAR(*two.detector.previous_token, (e0.at({0, 0, 1, 0}) / 2 + *alone.detector.previous_token) / 2, 1e-12);
  // Nothing of 3 positions or more: the positional scores have no query.
  EXPECT_THROW(head_scores(padded({e0, e0}, 6), {}, true, {}, std::vector<int32_t>{2, 2}), std::invalid_argument);
}

TEST(HeadScores, ARealQuerysMassOnPaddingIsRefused) {
  // Attention computed without the padding mask: query 0 of a 4-token
  // example puts half its mass on pad key 5.
  std::vector<double> v = padded({messy_attention(1, 1, 4, false)}, 6).to_vector();
  for (int64_t k = 0; k < 6; ++k) v[static_cast<std::size_t>(k)] = k < 4 ? v[static_cast<std::size_t>(k)] / 2 : 0;
  v[5] = 0.5;
  const Tensor a = Tensor::from_vector(v, {1, 1, 6, 6}, DType::f64);
  try {
    head_scores(a, {}, false, {}, std::vector<int32_t>{4});
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("padding"), std::string::npos) << e.what();
  }
  EXPECT_THROW(head_scores(a, {}, false, {}, std::vector<int32_t>{7}), std::invalid_argument);     // > T
  EXPECT_THROW(head_scores(a, {}, false, {}, std::vector<int32_t>{4, 4}), std::invalid_argument);  // 2 for 1 example
}

TEST(JsDivergence, IsZeroForEqualRowsOneForDisjointAndKnownInBetween) {
  const std::vector<double> p = {1, 0}, q = {0, 1}, half = {0.5, 0.5};
  EXPECT_DOUBLE_EQ(js_divergence(p, p), 0.0);
  EXPECT_DOUBLE_EQ(js_divergence(p, q), 1.0);
  // 0.5 * log2(4/3) + 0.25 * log2(2/3) + 0.25 * log2(2)
  EXPECT_NEAR(js_divergence(p, half), 0.5 * std::log2(4.0 / 3) + 0.25 * std::log2(2.0 / 3) + 0.25, 1e-15);
  EXPECT_DOUBLE_EQ(js_divergence(p, half), js_divergence(half, p));
  EXPECT_THROW(js_divergence(p, std::vector<double>{1.0}), std::invalid_argument);
}

TEST(JsDistanceMatrix, IdenticalHeadsAreZeroAndDisjointHeadsAreMaximalAcrossLayers) {
  // From q = 1 on, the self head and the first-token head never share a key.
  const Tensor layer0 = planted(2, 5, {kSelf, kFirst});
  const Tensor layer1 = planted(2, 5, {kSelf, kPrevious});
  const auto js = js_distance_matrix({layer0, layer1}, true);
  ASSERT_EQ(js.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(js[i][i], 0.0);
  EXPECT_DOUBLE_EQ(js[0][1], 1.0);
  EXPECT_DOUBLE_EQ(js[1][0], 1.0);
  EXPECT_DOUBLE_EQ(js[0][2], 0.0);  // the same self head in two layers
  EXPECT_DOUBLE_EQ(js[0][3], 1.0);
  // First vs previous agree only at q = 1 (both attend key 0): 3 of 4 queries disjoint.
  EXPECT_DOUBLE_EQ(js[1][3], 0.75);
}

TEST(JsDistanceMatrix, RejectsLayersWithDifferentSequenceLengths) {
  EXPECT_THROW(js_distance_matrix({planted(1, 5, {kSelf}), planted(1, 6, {kSelf})}, true), std::invalid_argument);
  EXPECT_THROW(js_distance_matrix({}, true), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::analysis
