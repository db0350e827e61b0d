// The analysis of a set read in chunks (analyze_model.h, docs/head-metrics.md
// "Analysis in chunks"): the same numbers as one batch up to the forward's
// float rounding, the reader asked for at most a chunk at a time, progress
// after each chunk, and a stop request that ends it between forward passes.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/analyze_model.h"
#include "analysis/donors.h"
#include "analysis/heads_json.h"
#include "core/interrupt.h"

namespace headlab::analysis {
namespace {

// An f32 model with LayerNorm, an MLP and random weights, and a set of rows
// of mixed lengths with a user pattern, a role, sources and a corruption
// that takes the next longer-or-equal row's tokens (as a data file's does).
struct ChunkedSet {
  static constexpr int64_t B = 11, T = 7, V = 5;
  core::Generator gen{3};
  layers::Transformer model;
  std::vector<int32_t> tokens, targets, lengths, corrupted;
  std::vector<AttendPattern> attend;
  std::vector<ExpectedRole> roles{{"the token before", "back-one"}};

  ChunkedSet()
      : model(layers::ModelSpec{.vocab = V, .classes = V, .max_seq_len = T, .layers = 2, .heads = 2, .d_model = 8,
                                .attn_only = false, .layernorm = true, .causal = true},
              gen, core::DType::f32) {
    core::Generator draw(9);
    for (auto& [name, p] : model.named_parameters()) p.mutable_value().copy_(draw.normal(p.shape(), 0.0, 0.7));
    AttendPattern back = AttendPattern::empty("back-one", B, T);
    for (int64_t b = 0; b < B; ++b) {
      const auto n = static_cast<int32_t>(b % 3 == 2 ? 2 + b % 4 : T);  // some rows padded
      lengths.push_back(n);
      for (int64_t t = 0; t < T; ++t) {
        tokens.push_back(t < n ? static_cast<int32_t>(draw.integer(0, V)) : 0);
        targets.push_back(t < n && t > 0 ? static_cast<int32_t>(draw.integer(0, V)) : -1);
        if (t >= 1 && t < n) back.keys[static_cast<std::size_t>(b * T + t)] = {static_cast<int32_t>(t - 1)};
      }
    }
    attend.push_back(std::move(back));
    // Row b takes the first n_b tokens of the next row at least as long (donors.h).
    const std::vector<int64_t> donors = next_donors(lengths, B, DonorRule::at_least_as_long);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        corrupted.push_back(t < lengths[static_cast<std::size_t>(b)]
                                ? tokens[static_cast<std::size_t>(donors[static_cast<std::size_t>(b)] * T + t)]
                                : 0);
  }

  Examples examples() const {
    Examples e{B, T, tokens, targets, lengths};
    e.attend = attend;
    e.roles = roles;
    e.sources = true;
    return e;
  }
  AnalysisOptions options(int64_t chunk_rows) const {
    AnalysisOptions o;
    o.chunk_rows = chunk_rows;
    o.example = 7;
    o.importance_examples = 5;  // rows of the first two chunks of 3
    o.pruning_random_orders = 2;
    o.interventions = true;
    o.corruption.tokens = corrupted;
    o.corruption_text = "the next row's tokens";
    return o;
  }
};

nlohmann::json json_of(const RunAnalysis& run) {
  nlohmann::json j;
  to_json(j, run);
  return j;
}

// Every number of `a` within `tol` (absolute, or relative for large ones) of
// `b`'s, everything else equal; the largest difference found goes to `worst`.
void expect_close(const nlohmann::json& a, const nlohmann::json& b, double tol, const std::string& at, double& worst) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    const double d = std::abs(x - y);
    worst = std::max(worst, d);
    EXPECT_LE(d, tol * std::max(1.0, std::abs(x))) << at << ": " << x << " vs " << y;
    return;
  }
  ASSERT_EQ(a.type(), b.type()) << at;
  if (a.is_object()) {
    ASSERT_EQ(a.size(), b.size()) << at;
    for (const auto& [key, value] : a.items()) {
      ASSERT_TRUE(b.contains(key)) << at << "." << key;
      expect_close(value, b.at(key), tol, at + "." + key, worst);
    }
  } else if (a.is_array()) {
    ASSERT_EQ(a.size(), b.size()) << at;
    for (std::size_t i = 0; i < a.size(); ++i) expect_close(a[i], b[i], tol, at + "[" + std::to_string(i) + "]", worst);
  } else {
    EXPECT_EQ(a, b) << at;
  }
}

TEST(ChunkedAnalysis, AnySizeOfChunkGivesTheNumbersOfOneBatchWithinTheDocumentedTolerance) {
  const ChunkedSet s;
  const nlohmann::json whole = json_of(analyze_model(s.model, s.examples(), s.options(0)));
  // Everything the analysis fills in, patching and the pruning curve included.
  ASSERT_FALSE(whole.at("patching").is_null());
  ASSERT_FALSE(whole.at("pruning").is_null());
  ASSERT_FALSE(whole.at("heads")[0].at("resample_ablation_delta_loss").is_null());
  for (const int64_t chunk : {1, 3, 10, 11, 64}) {
    SCOPED_TRACE("chunks of " + std::to_string(chunk));
    double worst = 0;
    expect_close(whole, json_of(analyze_model(s.model, s.examples(), s.options(chunk))), 1e-6, "heads.json", worst);
    if (chunk >= ChunkedSet::B) {
      EXPECT_EQ(worst, 0.0) << "one chunk is the one-batch analysis, bit for bit";
    }
  }
}

TEST(ChunkedAnalysis, TheReaderIsAskedForAChunkAtATimeAndEveryRowTwice) {
  const ChunkedSet s;
  const Examples all = s.examples();
  std::vector<int64_t> reads(ChunkedSet::B, 0);
  int64_t largest = 0, single = 0, corrupted = 0;
  const ReadChunk read = [&](int64_t first, int64_t count, bool with_corruption) {
    if (count == 1 && !with_corruption) {
      ++single;  // a resample donor beyond a chunk
    } else {
      largest = std::max(largest, count);
      for (int64_t r = first; r < first + count; ++r) ++reads[static_cast<std::size_t>(r)];
    }
    corrupted += with_corruption;
    ExampleChunk c;
    c.examples = all.rows(first, count);
    c.examples.sources = true;
    c.corrupted = std::span<const int32_t>(s.corrupted).subspan(static_cast<std::size_t>(first * ChunkedSet::T),
                                                                 static_cast<std::size_t>(count * ChunkedSet::T));
    return c;
  };
  (void)analyze_chunks(s.model, ChunkedSet::B, s.lengths, read, s.options(4));
  EXPECT_EQ(largest, 4);
  EXPECT_EQ(reads, std::vector<int64_t>(ChunkedSet::B, 2)) << "each row once per pass";
  EXPECT_EQ(corrupted, 3) << "the first pass's chunks bring their corrupted tokens";
  // Rows 0-3, 4-7, 8-10 of lengths 7 7 4 7 | 7 3 7 7 | 2 7 7: row 3's donor
  // (row 4), row 7's (row 9, past the shorter row 8) and row 10's (row 0)
  // lie beyond their chunk.
  EXPECT_EQ(single, 3) << "each donor beyond its chunk is read once";
}

TEST(ChunkedAnalysis, ProgressIsReportedAfterEachChunkOfEachPassAndEndsAtOne) {
  const ChunkedSet s;
  AnalysisOptions options = s.options(4);
  std::vector<AnalysisProgress> seen;
  options.progress = [&](const AnalysisProgress& p) { seen.push_back(p); };
  (void)analyze_model(s.model, s.examples(), options);
  ASSERT_EQ(seen.size(), 6u);  // 3 chunks, 2 passes
  for (std::size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].pass, i < 3 ? 1 : 2);
    EXPECT_EQ(seen[i].passes, 2);
    EXPECT_EQ(seen[i].rows, ChunkedSet::B);
    EXPECT_EQ(seen[i].rows_done, std::min<int64_t>(4 * static_cast<int64_t>(i % 3 + 1), ChunkedSet::B));
    if (i > 0) {
      EXPECT_GT(seen[i].fraction, seen[i - 1].fraction);
    }
  }
  EXPECT_DOUBLE_EQ(seen.back().fraction, 1.0);
}

struct StopRequested : std::runtime_error {
  StopRequested() : std::runtime_error("stop") {}
};

TEST(ChunkedAnalysis, AStopRequestEndsAForwardBetweenBlocksAndAnAnalysisAtOnce) {
  const ChunkedSet s;
  int64_t checks = 0;
  {
    const core::InterruptScope counting([&] { ++checks; });
    autograd::NoGradGuard no_grad;
    (void)s.model.forward(s.tokens, ChunkedSet::B, ChunkedSet::T);
  }
  EXPECT_EQ(checks, 3) << "before each of the 2 blocks and after the last";
  int64_t full = 0;
  {
    const core::InterruptScope counting([&] { ++full; });
    (void)analyze_model(s.model, s.examples(), s.options(4));
  }
  EXPECT_GT(full, 100);
  int64_t after_stop = 0;
  bool stop = false;
  const core::InterruptScope stopping([&] {
    if (stop) ++after_stop, throw StopRequested();
    stop = ++checks > 40;  // a stop signal arrives in the middle of the analysis
  });
  EXPECT_THROW(analyze_model(s.model, s.examples(), s.options(4)), StopRequested);
  EXPECT_EQ(after_stop, 1) << "the first check after the request stops it";
  {
    const core::InterruptScope inner([] {});
    EXPECT_NO_THROW(core::check_interrupt()) << "the innermost scope's check runs";
  }
  stop = true;
  EXPECT_THROW(core::check_interrupt(), StopRequested) << "the outer one is back";
}

}  // namespace
}  // namespace headlab::analysis
