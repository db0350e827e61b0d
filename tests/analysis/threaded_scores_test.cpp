// The head scores, the JS matrix and the attention check run on several
// threads (analysis/head_metrics.cpp): each sum must still add its terms in
// the order one thread adds them, so every number keeps its bits, and a bad
// map must be reported as a check in order reports it.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/head_metrics.h"
#include "core/random.h"
#include "core/threads.h"
#include "tests/threads_scope.h"

namespace headlab::analysis {
namespace {

constexpr int64_t kRows = 7, kHeads = 3, kLen = 9;
const std::vector<int32_t> kThreadedLengths = {9, 4, 9, 2, 9, 6, 9};

using Threads = headlab::test::ThreadsScope;

// [kRows, kHeads, kLen, kLen] f32 attention: each real query's softmax of random scores over
// the keys it sees (causal: 0..q) within its example's length, zeros elsewhere.
core::Tensor random_attention(uint64_t seed, bool causal) {
  core::Generator draw(seed);
  std::vector<double> v;
  for (int64_t b = 0; b < kRows; ++b)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t q = 0; q < kLen; ++q) {
        const int64_t len = kThreadedLengths[static_cast<std::size_t>(b)];
        const int64_t keys = q >= len ? 0 : causal ? q + 1 : len;
        std::vector<double> row(static_cast<std::size_t>(kLen), 0.0);
        double total = 0;
        for (int64_t k = 0; k < keys; ++k) total += row[static_cast<std::size_t>(k)] = std::exp(3 * draw.uniform());
        for (int64_t k = 0; k < keys; ++k) row[static_cast<std::size_t>(k)] /= total;
        v.insert(v.end(), row.begin(), row.end());
      }
  return core::Tensor::from_vector(v, {kRows, kHeads, kLen, kLen}, core::DType::f32);
}

std::vector<core::Tensor> random_layers(bool causal) {
  return {random_attention(1, causal), random_attention(2, causal), random_attention(3, causal)};
}

// The matrix one sum at a time, as docs/head-metrics.md defines it: per pair
// of heads, js_divergence of their rows added over the examples, then the
// queries, that see two real keys or more, over the count of those.
std::vector<std::vector<double>> js_in_order(const std::vector<core::Tensor>& layers, bool causal) {
  std::vector<std::vector<double>> maps;  // per head of all layers: [kRows, kLen, kLen], f32 values
  for (const core::Tensor& layer : layers) {
    const std::vector<double> all = layer.to_vector();
    for (int64_t h = 0; h < kHeads; ++h) {
      std::vector<double> head;
      for (int64_t b = 0; b < kRows; ++b) {
        const auto at = static_cast<std::ptrdiff_t>((b * kHeads + h) * kLen * kLen);
        head.insert(head.end(), all.begin() + at, all.begin() + at + kLen * kLen);
      }
      maps.push_back(std::move(head));
    }
  }
  const std::size_t n = maps.size();
  std::vector<std::vector<double>> js(n, std::vector<double>(n, 0.0));
  int64_t pairs = 0;
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t c = a + 1; c < n; ++c) {
      double sum = 0;
      pairs = 0;
      for (int64_t b = 0; b < kRows; ++b) {
        const int64_t len = kThreadedLengths[static_cast<std::size_t>(b)];
        for (int64_t q = 0; q < len; ++q) {
          const auto keys = static_cast<std::size_t>(causal ? q + 1 : len);
          if (keys < 2) continue;
          const auto row = [&](std::size_t head) {
            const double* p = maps[head].data() + (b * kLen + q) * kLen;
            return std::vector<double>(p, p + keys);
          };
          sum += js_divergence(row(a), row(c));
          ++pairs;
        }
      }
      js[a][c] = js[c][a] = sum / static_cast<double>(pairs);
    }
  return js;
}

TEST(ThreadedScores, TheJsMatrixOnTwoThreadsIsEverySumInOrderBitForBit) {
  for (const bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    const std::vector<core::Tensor> layers = random_layers(causal);
    const std::vector<std::vector<double>> want = js_in_order(layers, causal);
    std::vector<std::vector<double>> one, two;
    {
      const Threads threads(1);
      one = js_distance_matrix(layers, causal, kThreadedLengths);
    }
    {
      const Threads threads(2);
      two = js_distance_matrix(layers, causal, kThreadedLengths);
    }
    EXPECT_EQ(one, want);
    EXPECT_EQ(two, want);
    EXPECT_GT(two[0][kHeads * 3 - 1], 0.0) << "a pair of the first and the last layer";
  }
}

void expect_same(const std::vector<HeadScores>& a, const std::vector<HeadScores>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t h = 0; h < a.size(); ++h) {
    SCOPED_TRACE("head " + std::to_string(h));
    EXPECT_EQ(a[h].patterns, b[h].patterns);
    EXPECT_EQ(a[h].patterns_all, b[h].patterns_all);
    EXPECT_EQ(a[h].detector.previous_token, b[h].detector.previous_token);
    EXPECT_EQ(a[h].detector.duplicate_token, b[h].detector.duplicate_token);
    EXPECT_EQ(a[h].detector.induction, b[h].detector.induction);
    EXPECT_EQ(a[h].entropy, b[h].entropy);
    EXPECT_EQ(a[h].distance, b[h].distance);
  }
}

TEST(ThreadedScores, HeadScoresOnTwoThreadsAreTheOneThreadsBitForBit) {
  const core::Tensor a = random_attention(4, true);
  std::vector<int32_t> tokens, targets;
  core::Generator draw(9);
  for (int64_t i = 0; i < kRows * kLen; ++i) {
    tokens.push_back(static_cast<int32_t>(draw.integer(0, 3)));
    targets.push_back(i % kLen >= 3 ? 0 : -1);
  }
  std::vector<HeadScores> one, two;
  {
    const Threads threads(1);
    one = head_scores(a, tokens, true, targets, kThreadedLengths);
  }
  {
    const Threads threads(2);
    two = head_scores(a, tokens, true, targets, kThreadedLengths);
  }
  expect_same(one, two);
  // Per head the mean over examples: a head's sums mixed with another's
  // (a race) would not give each example's score back.
  for (int64_t h = 0; h < kHeads; ++h) {
    HeadScoreSums alone;
    alone.add(a.slice(1, h, h + 1).contiguous(), tokens, true, targets, kThreadedLengths);
    expect_same({two[static_cast<std::size_t>(h)]}, alone.value());
  }
}

TEST(ThreadedScores, TheFirstBadMapInOrderIsTheOneReported) {
  const core::Tensor good = random_attention(5, true);
  std::vector<double> v = good.to_vector();
  // Two bad maps the two threads check each: (example 0, head 2), row 3
  // summing to 1.5, and (example 5, head 1), a negative value.
  v[static_cast<std::size_t>(((0 * kHeads + 2) * kLen + 3) * kLen + 1)] += 0.5;
  v[static_cast<std::size_t>(((5 * kHeads + 1) * kLen + 4) * kLen + 2)] = -0.25;
  const core::Tensor bad = core::Tensor::from_vector(v, {kRows, kHeads, kLen, kLen}, core::DType::f32);
  const Threads threads(2);
  try {
    head_scores(bad, {}, true, {}, kThreadedLengths);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("attention row [0, 2, 3, :] sums to 1.5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headlab::analysis
