// Rows of a data file shorter than the model's seq-len: every forward masks
// their padding, so a bidirectional model gives their real positions what the
// unpadded row gets, and the head analysis scores only real positions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/analyze_model.h"
#include "core/ops.h"
#include "layers/padding_mask.h"
#include "tests/train/test_util.h"
#include "train/data_file.h"
#include "train/errors.h"
#include "train/run_builder.h"
#include "train/session.h"

namespace headlab::train {
namespace {

namespace fs = std::filesystem;
using test::contains;

constexpr int64_t kT = 6;

// A data file of `lines` under the temp folder, removed with the object.
struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& lines) {
    const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
    path = fs::temp_directory_path() / ("headlab-padding-" + std::to_string(getpid()) + "-" + t->name() + ".jsonl");
    std::ofstream(path, std::ios::binary) << lines;
  }
  ~TempFile() { fs::remove(path); }
};

layers::ModelSpec spec(bool causal) {
  return {.vocab = 8, .classes = 8, .max_seq_len = kT, .layers = 2, .heads = 2, .d_model = 16, .causal = causal};
}

// The logits [1, n, C] of one unpadded row: the reference a padded row's real
// positions must reproduce.
core::Tensor unpadded_logits(const layers::Transformer& model, const std::vector<int32_t>& tokens) {
  autograd::NoGradGuard no_grad;
  return model.forward(tokens, 1, static_cast<int64_t>(tokens.size())).value();
}

TEST(Padding, DataFileRecordsEachRowsRealLength) {
  const TempFile file("{\"tokens\": [1, 2, 3]}\n{\"tokens\": [1, 2, 3, 4, 5, 6]}\n{\"tokens\": [7]}\n");
  DataFile data(file.path.string(), 8, 8, kT);
  EXPECT_EQ(data.rows(0, 3).lengths, (std::vector<int32_t>{3, 6, 1}));
  core::Generator gen(0);
  EXPECT_EQ(data.sample(4, gen).lengths, (std::vector<int32_t>{3, 6, 1, 3}));
}

TEST(Padding, BidirectionalPaddedRowScoresAsTheUnpaddedRowWhateverThePadding) {
  core::Generator gen(3);
  const layers::Transformer model(spec(/*causal=*/false), gen);
  const TempFile file("{\"tokens\": [1, 2, 3], \"targets\": [5, 6, 7]}\n");
  Batch padded = DataFile(file.path.string(), 8, 8, kT).rows(0, 1);
  const std::vector<int32_t> real = {1, 2, 3}, targets = {5, 6, 7};
  const core::Tensor reference = unpadded_logits(model, real);
  const double reference_loss = analysis::evaluate(model, {1, 3, real, targets}).loss;
  for (const int32_t pad : {0, 4}) {
    std::fill(padded.tokens.begin() + 3, padded.tokens.end(), pad);
    EXPECT_NEAR(evaluate(model, padded).loss, reference_loss, 1e-6) << "pad token " << pad;
    const core::Tensor mask = layers::padding_mask(padded.lengths, 1, kT);
    autograd::NoGradGuard no_grad;
    const core::Tensor logits = model.forward(padded.tokens, 1, kT, &mask).value();
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t c = 0; c < 8; ++c)
        EXPECT_NEAR(logits.at({0, t, c}), reference.at({0, t, c}), 1e-5) << "pad " << pad << " [" << t << ", " << c
                                                                          << "]";
  }
}

// The first training step's loss is the loss of the initial model on the
// batch: on padded rows of a bidirectional model, the unpadded rows' loss,
// with one slice per step and with two (--micro-batches).
TEST(Padding, BidirectionalTrainingStepSeesOnlyTheRealTokens) {
  const TempFile file(
      "{\"tokens\": [1, 2, 3], \"targets\": [5, 6, 7]}\n{\"tokens\": [4, 3, 2, 1], \"targets\": [1, 2, 3, 4]}\n");
  TrainConfig c;
  c.data = file.path.string();
  c.model = spec(/*causal=*/false);
  c.batch = 2;
  c.eval_batch = 2;
  c.steps = 1;
  c.seed = 5;
  Session fresh(c);
  const layers::Transformer& initial = fresh.model();
  const analysis::EvalResult a =
      analysis::evaluate(initial, {1, 3, std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{5, 6, 7}});
  const analysis::EvalResult b =
      analysis::evaluate(initial, {1, 4, std::vector<int32_t>{4, 3, 2, 1}, std::vector<int32_t>{1, 2, 3, 4}});
  const double expected = (3 * a.loss + 4 * b.loss) / 7;
  for (const int64_t slices : {1, 2}) {
    c.micro_batches = slices;
    Session s(c);
    EXPECT_NEAR(s.step().loss, expected, 1e-5) << slices << " slices";
  }
}

// The analysis of a 1-token row and a full row is the full row's alone: the
// short row's padding adds no query or key, and one token shows no pattern.
TEST(Padding, AnalysisOfAShortRowAddsNothingOfItsPadding) {
  core::Generator gen(7);
  const layers::Transformer model(spec(/*causal=*/true), gen);
  const std::vector<int32_t> full = {1, 2, 3, 1, 2, 3};
  std::vector<int32_t> tokens = {4, 0, 0, 0, 0, 0}, targets = {2, -1, -1, -1, -1, -1};
  tokens.insert(tokens.end(), full.begin(), full.end());
  const std::vector<int32_t> full_targets = {2, 3, 1, 2, 3, 1};
  targets.insert(targets.end(), full_targets.begin(), full_targets.end());
  const std::vector<int32_t> lengths = {1, kT};
  analysis::AnalysisOptions options;
  options.pruning = false;
  options.example = 1;
  const analysis::RunAnalysis both = analysis::analyze_model(model, {2, kT, tokens, targets, lengths}, options);
  options.example = 0;
  const analysis::RunAnalysis alone = analysis::analyze_model(model, {1, kT, full, full_targets}, options);
  ASSERT_EQ(both.heads.size(), alone.heads.size());
  for (std::size_t i = 0; i < both.heads.size(); ++i) {
    const analysis::HeadScores &x = both.heads[i].scores, &y = alone.heads[i].scores;
    for (std::size_t p = 0; p < analysis::kPatternCount; ++p) {
      ASSERT_EQ(x.patterns_all[p].has_value(), y.patterns_all[p].has_value()) << analysis::kPatterns[p].name;
      if (y.patterns_all[p]) {
        EXPECT_NEAR(*x.patterns_all[p], *y.patterns_all[p], 1e-6) << analysis::kPatterns[p].name;
      }
    }
    EXPECT_NEAR(x.entropy, y.entropy, 1e-6);
    EXPECT_NEAR(x.distance, y.distance, 1e-6);
    EXPECT_NEAR(*x.detector.previous_token, *y.detector.previous_token, 1e-6);
    EXPECT_NEAR(*x.detector.duplicate_token, *y.detector.duplicate_token, 1e-6);
    EXPECT_NEAR(*x.detector.induction, *y.detector.induction, 1e-6);
  }
  // The heatmap of the 1-token row shows that token alone.
  options.example = 0;
  const analysis::RunAnalysis short_example =
      analysis::analyze_model(model, {2, kT, tokens, targets, lengths}, options);
  EXPECT_EQ(short_example.example.tokens, (std::vector<int32_t>{4}));
  EXPECT_EQ(short_example.example.attention.at(0).at(0), (std::vector<double>{1.0}));
}

// A bidirectional model's analysis of a padded row is the analysis of the
// same row given at its own length.
TEST(Padding, BidirectionalAnalysisOfAPaddedRowIsThatOfTheRowAtItsLength) {
  core::Generator gen(9);
  const layers::Transformer model(spec(/*causal=*/false), gen);
  const std::vector<int32_t> row = {1, 2, 1, 2}, row_targets = {2, 1, 2, 1};
  const std::vector<int32_t> tokens = {1, 2, 1, 2, 5, 5}, targets = {2, 1, 2, 1, -1, -1}, lengths = {4};
  analysis::AnalysisOptions options;
  options.pruning = false;
  const analysis::RunAnalysis padded = analysis::analyze_model(model, {1, kT, tokens, targets, lengths}, options);
  const analysis::RunAnalysis own = analysis::analyze_model(model, {1, 4, row, row_targets}, options);
  EXPECT_NEAR(*padded.loss, *own.loss, 1e-6);
  EXPECT_EQ(padded.example.tokens, own.example.tokens);
  for (std::size_t i = 0; i < own.heads.size(); ++i) {
    for (std::size_t p = 0; p < analysis::kPatternCount; ++p) {
      if (own.heads[i].scores.patterns[p]) {
        EXPECT_NEAR(*padded.heads[i].scores.patterns[p], *own.heads[i].scores.patterns[p], 1e-5);
      }
    }
    EXPECT_NEAR(padded.heads[i].scores.entropy, own.heads[i].scores.entropy, 1e-5);
    EXPECT_NEAR(padded.heads[i].scores.distance, own.heads[i].scores.distance, 1e-5);
    EXPECT_NEAR(*padded.heads[i].ablation_delta_loss, *own.heads[i].ablation_delta_loss, 1e-5);
  }
  for (std::size_t a = 0; a < own.js.size(); ++a)
    for (std::size_t b = 0; b < own.js.size(); ++b) EXPECT_NEAR(padded.js[a][b], own.js[a][b], 1e-5);
}

// Two rows of kT positions whose one target is at position 1 of the first.
std::vector<int32_t> one_target() {
  std::vector<int32_t> targets(2 * kT, -1);
  targets[1] = 3;
  return targets;
}

// check_analysable's refusal of `rows`, or "" when it takes them.
std::string refusal(const Batch& rows, const std::string& source) {
  try {
    check_analysable(rows, source);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Padding, AnalysisRefusesRowsThatAreAllShorterThanThreeNamingTheLongest) {
  Batch rows{2, kT, std::vector<int32_t>(12, 0), one_target(), {1, 2}};
  const std::string short_rows = refusal(rows, "--data f.jsonl");
  EXPECT_TRUE(contains(short_rows, "--data f.jsonl")) << short_rows;
  EXPECT_TRUE(contains(short_rows, "sequence 2 of 2, has 2")) << short_rows;
  EXPECT_TRUE(contains(short_rows, "at least 3")) << short_rows;
  rows.lengths = {1, 3};
  EXPECT_EQ(refusal(rows, "--data f.jsonl"), "");
}

// Rows without a target would give the held-out loss and every ablation as 0
// (QA19 F20); a batch of lengths alone (analyze --data's whole file) is not
// checked for targets it does not carry.
TEST(Padding, AnalysisRefusesRowsWithoutATarget) {
  Batch rows{2, kT, std::vector<int32_t>(12, 0), std::vector<int32_t>(12, -1), {3, 6}};
  const std::string unscored = refusal(rows, "--eval-data e.jsonl (its first 2 sequences)");
  EXPECT_TRUE(contains(unscored, "--eval-data e.jsonl (its first 2 sequences): none of the 2 sequences")) << unscored;
  EXPECT_TRUE(contains(unscored, "would read 0 as if measured")) << unscored;
  rows.targets = one_target();
  EXPECT_EQ(refusal(rows, "--eval-data e.jsonl"), "");
  rows.targets.clear();
  EXPECT_EQ(refusal(rows, "--data f.jsonl"), "");
}

}  // namespace
}  // namespace headlab::train
