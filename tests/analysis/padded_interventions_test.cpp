// Resample ablation and activation patching on rows of different lengths
// (docs/head-metrics.md, "Interventions"): a row takes values only from a
// donor that is real wherever it is, a row without one is left out of the
// ablated loss and of its base, and what the padding holds changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "analysis/ablation.h"
#include "analysis/analyze_model.h"
#include "analysis/donors.h"

namespace headlab::analysis {
namespace {

// The donors by the definition: the first other row, cyclically, that fits.
std::vector<int64_t> donors_by_hand(const std::vector<int32_t>& lengths, DonorRule rule) {
  const auto rows = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> out(lengths.size(), -1);
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t k = 1; k < rows; ++k) {
      const int32_t n = lengths[static_cast<std::size_t>((b + k) % rows)], own = lengths[static_cast<std::size_t>(b)];
      if (rule == DonorRule::same_length ? n == own : n >= own) {
        out[static_cast<std::size_t>(b)] = (b + k) % rows;
        break;
      }
    }
  return out;
}

TEST(Donors, TheNextOtherRowAtLeastAsLongOrAsLongInCyclicOrder) {
  const std::vector<int32_t> lengths{3, 5, 2, 5, 4};
  EXPECT_EQ(next_donors(lengths, 5, DonorRule::at_least_as_long), (std::vector<int64_t>{1, 3, 3, 1, 1}));
  EXPECT_EQ(next_donors(lengths, 5, DonorRule::same_length), (std::vector<int64_t>{-1, 3, -1, 1, -1}));
  // The unique longest row has none, nor has a set of one row.
  EXPECT_EQ(next_donors(std::vector<int32_t>{3, 6, 2, 5, 4}, 5, DonorRule::at_least_as_long),
            (std::vector<int64_t>{1, -1, 3, 1, 1}));
  EXPECT_EQ(next_donors(std::vector<int32_t>{4}, 1, DonorRule::at_least_as_long), std::vector<int64_t>{-1});
  // Full rows: the next one, as before lengths counted.
  EXPECT_EQ(next_donors({}, 4, DonorRule::same_length), (std::vector<int64_t>{1, 2, 3, 0}));
  EXPECT_EQ(next_donors(std::vector<int32_t>{6, 6, 6}, 3, DonorRule::at_least_as_long),
            (std::vector<int64_t>{1, 2, 0}));
  EXPECT_THROW(next_donors(lengths, 4, DonorRule::same_length), std::invalid_argument);
  // Random sets against the definition.
  core::Generator gen(17);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> random(static_cast<std::size_t>(gen.integer(1, 14)));
    for (int32_t& n : random) n = static_cast<int32_t>(gen.integer(1, 6));
    for (const DonorRule rule : {DonorRule::at_least_as_long, DonorRule::same_length})
      ASSERT_EQ(next_donors(random, static_cast<int64_t>(random.size()), rule), donors_by_hand(random, rule))
          << "trial " << trial;
  }
}

// A chunk's rows take a donor inside the chunk by its index there, one beyond
// it by its place after the chunk's rows (each such donor once), and a row
// without a donor its own.
TEST(Donors, RowsOfAChunkPointIntoTheChunkThenTheDonorsBeyondIt) {
  const std::vector<int64_t> set{1, 3, 3, 1, 1, -1, 0};  // the donors of rows 0 .. 6
  const DonorRows chunk = donor_rows(std::span(set).subspan(2, 4), 2);  // rows 2 .. 5
  EXPECT_EQ(chunk.from, (std::vector<int64_t>{1, 4, 4, 3}));
  EXPECT_EQ(chunk.outside, std::vector<int64_t>{1});
  const DonorRows whole = donor_rows(set, 0);
  EXPECT_EQ(whole.from, (std::vector<int64_t>{1, 3, 3, 1, 1, 5, 0}));
  EXPECT_TRUE(whole.outside.empty());
}

// An f64 model with random weights (LayerNorm and MLPs, so every position's
// value passes through more than attention) and rows of `lengths` padded to
// T with `pad` (a fixed token, or -1: random ones), targets -1 there.
struct PaddedSet {
  static constexpr int64_t T = 6, V = 7;
  core::Generator gen{21};
  layers::Transformer model;
  std::vector<int32_t> lengths, tokens, targets, corrupted;

  PaddedSet(std::vector<int32_t> lengths_, bool causal, int64_t layers = 2, bool attn_only = false)
      : model(layers::ModelSpec{.vocab = V, .classes = V, .max_seq_len = T, .layers = layers, .heads = 2,
                                .d_model = 8, .attn_only = attn_only, .layernorm = !attn_only, .causal = causal},
              gen, core::DType::f64),
        lengths(std::move(lengths_)) {
    core::Generator draw(8);
    for (auto& [name, p] : model.named_parameters()) p.mutable_value().copy_(draw.normal(p.shape(), 0.0, 0.6, core::DType::f64));
    for (std::size_t b = 0; b < lengths.size(); ++b)
      for (int64_t t = 0; t < T; ++t) {
        const bool real = t < lengths[b];
        tokens.push_back(real ? static_cast<int32_t>(draw.integer(0, V)) : 0);
        targets.push_back(real && t > 0 ? static_cast<int32_t>(draw.integer(0, V)) : -1);
      }
    // The data file's corruption: the first n_b tokens of the next row at least as long.
    const std::vector<int64_t> donors = next_donors(lengths, rows(), DonorRule::at_least_as_long);
    corrupted = tokens;
    for (std::size_t b = 0; b < lengths.size(); ++b)
      for (int64_t t = 0; t < lengths[b] && donors[b] >= 0; ++t)
        corrupted[b * T + static_cast<std::size_t>(t)] = tokens[static_cast<std::size_t>(donors[b] * T + t)];
  }
  int64_t rows() const { return static_cast<int64_t>(lengths.size()); }
  Examples examples() const { return {rows(), T, tokens, targets, lengths}; }
  // Fills every padded position of the tokens and the corrupted tokens with random tokens.
  void scramble_padding(uint64_t seed) {
    core::Generator draw(seed);
    for (std::size_t b = 0; b < lengths.size(); ++b)
      for (int64_t t = lengths[b]; t < T; ++t) {
        tokens[b * T + static_cast<std::size_t>(t)] = static_cast<int32_t>(draw.integer(0, V));
        corrupted[b * T + static_cast<std::size_t>(t)] = static_cast<int32_t>(draw.integer(0, V));
      }
  }
  RunAnalysis analyze(int64_t chunk_rows = 0) const {
    AnalysisOptions o;
    o.pruning = false;
    o.interventions = true;
    o.corruption.tokens = corrupted;
    o.chunk_rows = chunk_rows;
    return analyze_model(model, examples(), o);
  }
};

// Rows 1 and 5 are the longest; rows 2, 3 and 4 have lengths no other row has.
const std::vector<int32_t> kShared{4, 6, 2, 5, 3, 6, 4};
// Row 1 is the one longest row.
const std::vector<int32_t> kOneLongest{4, 6, 2, 5, 3, 5, 4};

TEST(PaddedInterventions, WhatThePaddingHoldsChangesNoResampleOrPatchingNumber) {
  for (const bool causal : {true, false})
    for (const auto& lengths : {kShared, kOneLongest}) {
      SCOPED_TRACE(causal ? "causal" : "bidirectional");
      PaddedSet s(lengths, causal);
      const RunAnalysis zeros = s.analyze();
      s.scramble_padding(5);
      const RunAnalysis random = s.analyze();
      ASSERT_TRUE(zeros.patching && random.patching);
      EXPECT_EQ(zeros.patching->clean_loss, random.patching->clean_loss);
      EXPECT_EQ(zeros.patching->corrupted_loss, random.patching->corrupted_loss);
      for (std::size_t i = 0; i < zeros.heads.size(); ++i) {
        ASSERT_TRUE(zeros.heads[i].resample_ablation_delta_loss.has_value()) << i;
        EXPECT_EQ(zeros.heads[i].resample_ablation_delta_loss, random.heads[i].resample_ablation_delta_loss) << i;
        EXPECT_EQ(zeros.heads[i].mean_ablation_delta_loss, random.heads[i].mean_ablation_delta_loss) << i;
        EXPECT_EQ(zeros.heads[i].patch_restored, random.heads[i].patch_restored) << i;
      }
    }
}

TEST(PaddedInterventions, AReceiverNeverGetsADonorsPaddedPositions) {
  // One attention-only layer: what replaces a head's output at a position
  // reaches that position's logits and no other. The clean outputs' padded
  // positions hold NaN, so a real position given one makes the loss NaN.
  const PaddedSet s(kShared, /*causal=*/true, /*layers=*/1, /*attn_only=*/true);
  const Examples ex = s.examples();
  std::vector<core::Tensor> clean = record_head_outputs(s.model, ex);
  for (int64_t b = 0; b < s.rows(); ++b)
    for (int64_t t = s.lengths[static_cast<std::size_t>(b)]; t < PaddedSet::T; ++t)
      clean[0].select(0, b).select(0, t).fill_(std::nan(""));
  const std::vector<int64_t> donors = next_donors(s.lengths, s.rows(), DonorRule::at_least_as_long);
  ASSERT_EQ(rows_with_donor(donors), s.rows());
  const std::vector<core::Tensor> replaced = resample_outputs(clean, donors);
  for (int64_t b = 0; b < s.rows(); ++b)
    for (int64_t t = 0; t < s.lengths[static_cast<std::size_t>(b)]; ++t)
      for (int64_t i = 0; i < replaced[0].size(2); ++i)
        ASSERT_TRUE(std::isfinite(replaced[0].at({b, t, i}))) << "row " << b << " position " << t;
  layers::Probe probe(1);
  probe.layers[0].replace_heads = {true, true};
  probe.layers[0].replacement = replaced[0];
  const EvalResult base = evaluate(s.model, ex), by_hand = evaluate(s.model, ex, &probe);
  ASSERT_TRUE(std::isfinite(by_hand.loss));
  EXPECT_EQ(ablate_set(s.model, ex, base, {0, 1}, AblationKind::resample).delta_loss, by_hand.loss - base.loss);
}

TEST(PaddedInterventions, ARowWithoutADonorIsLeftOutOfTheDeltaAndItsBase) {
  PaddedSet s(kOneLongest, /*causal=*/true);
  const RunAnalysis run = s.analyze();
  ASSERT_TRUE(run.resample.has_value());
  EXPECT_EQ(run.resample->rows, 7);
  EXPECT_EQ(run.resample->with_donor, 6) << "row 1, the longest, has none";
  // The one-batch ablation of ablation.h agrees with the analysis's sums.
  const EvalResult base = evaluate(s.model, s.examples());
  const std::vector<Ablation> each = ablate_heads(s.model, s.examples(), base, AblationKind::resample);
  for (std::size_t i = 0; i < each.size(); ++i) EXPECT_EQ(each[i].delta_loss, *run.heads[i].resample_ablation_delta_loss) << i;
  // Row 1's targets are in no resample number (they are in zero ablation's).
  for (int64_t t = 1; t < PaddedSet::T; ++t) {
    int32_t& y = s.targets[static_cast<std::size_t>(PaddedSet::T + t)];
    y = (y + 3) % static_cast<int32_t>(PaddedSet::V);
  }
  const RunAnalysis other = s.analyze();
  for (std::size_t i = 0; i < run.heads.size(); ++i) {
    EXPECT_EQ(other.heads[i].resample_ablation_delta_loss, run.heads[i].resample_ablation_delta_loss) << i;
    EXPECT_NE(other.heads[i].ablation_delta_loss, run.heads[i].ablation_delta_loss) << i;
  }
  // Row 1 gives its outputs to rows 3, 5 and 6 all the same; the corruption leaves it as it is.
  EXPECT_EQ(run.patching->rows, 7);
  EXPECT_EQ(run.patching->corrupted_rows, 6);
}

TEST(PaddedInterventions, BidirectionalRowsTakeOnlyRowsOfTheirOwnLength) {
  const PaddedSet s(kShared, /*causal=*/false);
  const RunAnalysis run = s.analyze();
  ASSERT_TRUE(run.resample.has_value());
  EXPECT_EQ(run.resample->with_donor, 4) << "rows 0 and 6 (4 tokens) and 1 and 5 (6): each other's donors";
  // Rows of lengths no other row has: nothing to resample from at all.
  const PaddedSet alone({6, 5, 4, 3}, /*causal=*/false);
  const RunAnalysis none = alone.analyze();
  EXPECT_EQ(none.resample->with_donor, 0);
  for (const HeadAnalysis& h : none.heads) EXPECT_FALSE(h.resample_ablation_delta_loss.has_value());
  const EvalResult base = evaluate(alone.model, alone.examples());
  EXPECT_THROW(ablate_heads(alone.model, alone.examples(), base, AblationKind::resample), std::invalid_argument);
}

TEST(PaddedInterventions, ChunksGiveTheNumbersOfOneBatch) {
  for (const bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    const PaddedSet s(kOneLongest, causal);
    const RunAnalysis whole = s.analyze();
    for (const int64_t chunk : {1, 2, 3, 7}) {
      const RunAnalysis part = s.analyze(chunk);
      EXPECT_EQ(part.resample->with_donor, whole.resample->with_donor);
      EXPECT_EQ(part.patching->corrupted_rows, whole.patching->corrupted_rows);
      for (std::size_t i = 0; i < whole.heads.size(); ++i) {
        EXPECT_NEAR(*part.heads[i].resample_ablation_delta_loss, *whole.heads[i].resample_ablation_delta_loss, 1e-12)
            << "chunks of " << chunk << ", head " << i;
        EXPECT_NEAR(*part.heads[i].patch_restored, *whole.heads[i].patch_restored, 1e-12) << chunk << ", head " << i;
      }
    }
  }
}

}  // namespace
}  // namespace headlab::analysis
