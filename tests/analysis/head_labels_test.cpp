// Labels, sinks, the verdict and heads.json (docs/head-metrics.md).
#include "analysis/heads_json.h"
#include "analysis/run_analysis.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "one_hot_heads.h"

namespace headlab::analysis {
namespace {

using core::DType;
using core::Tensor;

using testing::one_hot_heads;

int64_t previous(int64_t q) { return q > 0 ? q - 1 : 0; }
int64_t first(int64_t) { return 0; }
int64_t self(int64_t q) { return q; }

Tensor uniform_heads(int64_t len, int64_t heads) {
  std::vector<double> v;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t q = 0; q < len; ++q)
      for (int64_t k = 0; k < len; ++k) v.push_back(k <= q ? 1.0 / static_cast<double>(q + 1) : 0.0);
  return Tensor::from_vector(v, {1, heads, len, len}, DType::f64);
}

HeadScores scores(double prev, double first_token, double self_score, double entropy) {
  HeadScores s;
  s["previous-token"] = prev;
  s["first-token"] = first_token;
  s["self"] = self_score;
  s.entropy = entropy;
  return s;
}

TEST(LabelHead, TopPatternAboveThresholdAndMarginNamesTheHead) {
  const LabelOptions o;
  EXPECT_EQ(label_head(scores(0.9, 0.05, 0.05, 0.1), std::nullopt, o), Label::pattern("previous-token"));
  EXPECT_EQ(label_head(scores(0.1, 0.8, 0.1, 0.2), std::nullopt, o), Label::pattern("first-token"));
  EXPECT_EQ(label_head(scores(0.1, 0.1, 0.8, 0.2), std::nullopt, o), Label::pattern("self"));
  HeadScores ind = scores(0.1, 0.1, 0.0, 0.2);
  ind["induction"] = 0.7;
  ind["duplicate-token"] = 0.1;
  EXPECT_EQ(label_head(ind, std::nullopt, o), Label::pattern("induction"));
}

TEST(LabelHead, TooCloseARunnerUpGivesMixedOrDiffuseByEntropy) {
  const LabelOptions o;  // margin 0.15, diffuse at entropy >= 0.8
  EXPECT_EQ(label_head(scores(0.55, 0.45, 0.0, 0.5), std::nullopt, o), Label::mixed());
  EXPECT_EQ(label_head(scores(0.3, 0.3, 0.2, 0.95), std::nullopt, o), Label::diffuse());
  EXPECT_EQ(label_head(scores(0.45, 0.1, 0.1, 0.5), std::nullopt, o), Label::mixed());  // below threshold
}

TEST(LabelHead, ThresholdsAreOptions) {
  LabelOptions o;
  o.score_threshold = 0.4;
  o.margin = 0.05;
  EXPECT_EQ(label_head(scores(0.45, 0.38, 0.0, 0.5), std::nullopt, o), Label::pattern("previous-token"));
  o.diffuse_entropy = 0.4;
  o.score_threshold = 0.9;
  EXPECT_EQ(label_head(scores(0.45, 0.38, 0.0, 0.5), std::nullopt, o), Label::diffuse());
}

TEST(LabelHead, FirstTokenHeadWhoseAblationBarelyMattersIsASink) {
  const LabelOptions o;  // sink at delta loss <= 0.02
  const HeadScores s = scores(0.05, 0.9, 0.05, 0.1);
  EXPECT_EQ(label_head(s, 0.005, o), Label::sink());
  EXPECT_EQ(label_head(s, -0.01, o), Label::sink());  // ablation even helps
  EXPECT_EQ(label_head(s, 0.5, o), Label::pattern("first-token"));
  EXPECT_EQ(label_head(s, std::nullopt, o), Label::pattern("first-token")) << "no ablation, no sink";
  // A cheap previous-token head is still a previous-token head.
  EXPECT_EQ(label_head(scores(0.9, 0.05, 0.05, 0.1), 0.0, o), Label::pattern("previous-token"));
}

TEST(LabelNames, RoundTripAndRejectUnknownNames) {
  for (const Label& l : {Label::pattern("previous-token"), Label::pattern("first-token"), Label::pattern("self"), Label::pattern("induction"), Label::pattern("duplicate-token"),
                  Label::diffuse(), Label::mixed(), Label::sink()})
    EXPECT_EQ(label_from_name(label_name(l)), l);
  EXPECT_EQ(label_name(Label::pattern("previous-token")), "previous-token");
  EXPECT_THROW(label_from_name("prev"), std::invalid_argument);
}

TEST(AnalyzeAttention, PlantedHeadsAreLabelledAndTheRunIsSpecialized) {
  const Tensor l0 = one_hot_heads(6, {previous, first});
  const Tensor l1 = one_hot_heads(6, {self, self});
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9};
  const RunAnalysis run = analyze_attention({l0, uniform_heads(6, 2)}, tokens, true);
  EXPECT_EQ(run.num_layers, 2);
  EXPECT_EQ(run.num_heads, 2);
  ASSERT_EQ(run.heads.size(), 4u);
  EXPECT_EQ(run.at(0, 0).label, Label::pattern("previous-token"));
  EXPECT_DOUBLE_EQ(run.at(0, 0).scores.at("previous-token"), 1.0);
  EXPECT_EQ(run.at(0, 1).label, Label::pattern("first-token"));
  EXPECT_DOUBLE_EQ(run.at(0, 1).scores.at("first-token"), 1.0);
  EXPECT_EQ(run.at(1, 0).label, Label::diffuse());
  EXPECT_EQ(run.at(1, 1).label, Label::diffuse());
  EXPECT_EQ(run.example.tokens, tokens);
  ASSERT_EQ(run.example.attention.size(), 2u);
  EXPECT_EQ(run.example.attention[0][0][2 * 6 + 1], 1.0);  // L0H0 at q = 2 looks at k = 1
  EXPECT_TRUE(run.verdict.specialized);
  EXPECT_EQ(run.verdict.distinct_labels, 2);
  ASSERT_TRUE(run.verdict.min_js.has_value());
  EXPECT_GT(*run.verdict.min_js, 0.5);

  const RunAnalysis selfs = analyze_attention({l1}, tokens, true);
  EXPECT_EQ(selfs.at(0, 0).label, Label::pattern("self"));
  EXPECT_FALSE(selfs.verdict.specialized) << "two heads with the same pattern: one distinct label";
  EXPECT_EQ(selfs.verdict.distinct_labels, 1);
}

TEST(AnalyzeAttention, UniformHeadsAreNotSpecialized) {
  const RunAnalysis run = analyze_attention({uniform_heads(5, 2)}, {}, true);
  EXPECT_FALSE(run.verdict.specialized);
  EXPECT_EQ(run.verdict.counted_heads, 0);
  EXPECT_THROW(run.at(1, 0), std::invalid_argument);
}

TEST(AnalyzeAttention, OneHeadModelNeverSpecializes) {
  // Specialization is heads taking different roles; one head has no other to differ from.
  const RunAnalysis run = analyze_attention({one_hot_heads(5, {previous})}, {}, true);
  EXPECT_EQ(run.at(0, 0).label, Label::pattern("previous-token"));
  EXPECT_FALSE(run.verdict.specialized);
}

// Two planted heads (previous-token, first-token) with ablation filled in as the trainer would.
RunAnalysis planted_pair(double prev_acc_drop, double first_delta_loss, double first_acc_drop) {
  RunAnalysis run = analyze_attention({one_hot_heads(6, {previous, first})}, {}, true);
  run.loss = 0.1;
  run.accuracy = 0.97;
  run.at(0, 0).ablation_delta_loss = 2.0;
  run.at(0, 0).ablation_delta_acc = -prev_acc_drop;
  run.at(0, 1).ablation_delta_loss = first_delta_loss;
  run.at(0, 1).ablation_delta_acc = -first_acc_drop;
  relabel(run);
  return run;
}

TEST(Verdict, SpecializedWhenEveryPatternHeadsAblationCostsAccuracy) {
  const RunAnalysis run = planted_pair(0.6, 1.5, 0.5);
  EXPECT_EQ(run.at(0, 1).label, Label::pattern("first-token"));
  EXPECT_TRUE(run.verdict.specialized);
  EXPECT_EQ(run.verdict.counted_heads, 2);
  EXPECT_DOUBLE_EQ(*run.verdict.min_js, 0.8);  // disjoint at 4 of the 5 queries q >= 1
}

TEST(Verdict, AFirstTokenSinkDoesNotCountAndLeavesOneLabel) {
  const RunAnalysis run = planted_pair(0.6, 0.001, 0.0);
  EXPECT_EQ(run.at(0, 1).label, Label::sink());
  EXPECT_FALSE(run.verdict.specialized);
  EXPECT_EQ(run.verdict.distinct_labels, 1);
}

TEST(Verdict, AHeadWhoseAblationCostsLossButNoAccuracyStillCounts) {
  // A head backed up by another (as with 4 heads): accuracy holds, the loss rises.
  const RunAnalysis run = planted_pair(0.6, 0.3, 0.001);
  EXPECT_EQ(run.verdict.counted_heads, 2);
  EXPECT_TRUE(run.verdict.specialized);
}

TEST(Verdict, AHeadWhoseAblationCostsNeitherAccuracyNorLossIsNotCounted) {
  // Loss moves a little (no sink: above 0.02 nats) but below 0.05 nats, and accuracy not at all.
  const RunAnalysis run = planted_pair(0.6, 0.03, 0.001);
  EXPECT_EQ(run.at(0, 1).label, Label::pattern("first-token"));
  EXPECT_EQ(run.verdict.counted_heads, 1);
  EXPECT_FALSE(run.verdict.specialized);
  bool named = false;
  for (const std::string& r : run.verdict.reasons) named |= r.find("L0H1 first-token") != std::string::npos &&
                                                             r.find("not counted") != std::string::npos;
  EXPECT_TRUE(named) << "the reasons name the head left out";
}

TEST(Verdict, HeadsWithDifferentLabelsButCloseAttentionAreNotSpecialized) {
  RunAnalysis run = planted_pair(0.6, 1.5, 0.5);
  LabelOptions strict;
  strict.min_js = 0.9;  // the pair's JS is 0.8 bits
  relabel(run, strict);
  EXPECT_FALSE(run.verdict.specialized);
  EXPECT_TRUE(run.verdict.min_js.has_value());
}

TEST(HeadsJson, RoundTripKeepsEveryFieldAndAbsentValues) {
  RunAnalysis run = planted_pair(0.6, 1.5, 0.5);
  run.at(0, 0).importance = 0.25;
  run.example.token_labels = {"<a>", "b", "c", "d", "e", "f"};
  const nlohmann::json j = run;
  const RunAnalysis back = nlohmann::json::parse(j.dump()).get<RunAnalysis>();
  EXPECT_EQ(nlohmann::json(back), j);
  EXPECT_EQ(back.at(0, 0).importance, 0.25);
  EXPECT_FALSE(back.at(0, 1).importance.has_value());
  EXPECT_FALSE(back.at(0, 0).scores["induction"].has_value());
  EXPECT_EQ(back.at(0, 1).label, Label::pattern("first-token"));
  EXPECT_EQ(back.example.attention, run.example.attention);
  EXPECT_EQ(back.verdict.reasons, run.verdict.reasons);
  EXPECT_TRUE(j.at("heads")[0].at("scores").at("induction").is_null());
  EXPECT_EQ(j.at("format"), "headlab-heads/1");
}

TEST(HeadsJson, RejectsAWrongFormatOrHeadCount) {
  nlohmann::json j = planted_pair(0.6, 1.5, 0.5);
  nlohmann::json wrong_format = j;
  wrong_format["format"] = "other/9";
  EXPECT_THROW(wrong_format.get<RunAnalysis>(), std::invalid_argument);
  j["layers"] = 3;
  EXPECT_THROW(j.get<RunAnalysis>(), std::invalid_argument);
}

// Heads are named by layer and head elsewhere in the file, so their list must be layer-major.
TEST(HeadsJson, RejectsHeadsOutOfOrderAndUnknownHeadNames) {
  const nlohmann::json j = planted_pair(0.6, 1.5, 0.5);
  nlohmann::json swapped = j;
  std::swap(swapped["heads"][0], swapped["heads"][1]);
  try {
    swapped.get<RunAnalysis>();
    ADD_FAILURE() << "heads listed out of order were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("L0H1 where L0H0 belongs"), std::string::npos) << e.what();
  }
  nlohmann::json sets = j;
  sets["set_ablations"] = {{{"role", "pair"}, {"heads", {"L0H0", "L0H2"}}, {"delta_loss", 1.0}, {"delta_accuracy", -0.5}}};
  try {
    sets.get<RunAnalysis>();
    ADD_FAILURE() << "a set naming L0H2 of a 2-head model was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'L0H2' is not a head of this model"), std::string::npos) << e.what();
  }
  sets["set_ablations"][0]["heads"] = {"L0H1", "L0H0"};
  EXPECT_EQ(sets.get<RunAnalysis>().set_ablations.at(0).heads, (std::vector<std::size_t>{1, 0}));
}

TEST(CompactJson, HoldsEachHeadsLabelAndScoresAndTheLayersJs) {
  const nlohmann::json c = compact_json(planted_pair(0.6, 1.5, 0.5));
  EXPECT_EQ(c.at("heads").at("L0H0").at("label"), "previous-token");
  EXPECT_EQ(c.at("heads").at("L0H0").at("score"), 1.0);
  EXPECT_EQ(c.at("heads").at("L0H1").at("first_token"), 1.0);
  EXPECT_EQ(c.at("heads").at("L0H1").at("ablation_delta_accuracy"), -0.5);
  EXPECT_DOUBLE_EQ(c.at("layer_js")[0].get<double>(), 0.8);
  EXPECT_EQ(c.at("specialized"), true);
  EXPECT_FALSE(c.contains("example"));
}

// QA20: heads.json records the label options it was labelled with, so that a
// sweep can refuse a run re-analyzed with other thresholds; a file from before
// records none and departs from nothing.
TEST(HeadsJson, RecordsTheLabelOptionsAndNamesThoseThatDepart) {
  LabelOptions strict;
  strict.score_threshold = 0.6;
  strict.margin = 0.1;
  const RunAnalysis run = analyze_attention({one_hot_heads(6, {previous, first})}, {}, true, strict);
  ASSERT_TRUE(run.label_options);
  nlohmann::json j = run;
  EXPECT_EQ(j["label_options"],
            (nlohmann::json{{"threshold", 0.6}, {"margin", 0.1}, {"diffuse_entropy", 0.8}, {"sink_delta_loss", 0.02}}));
  const RunAnalysis back = j.get<RunAnalysis>();
  EXPECT_EQ(label_options_departures(back), "--threshold 0.6 (not 0.5), --margin 0.1 (not 0.15)");
  EXPECT_EQ(label_options_departures(back, strict), "");
  EXPECT_EQ(nlohmann::json(back)["label_options"], j["label_options"]);
  nlohmann::json wrong = j;
  wrong["label_options"]["margin"] = "0.1";
  try {
    wrong.get<RunAnalysis>();
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "heads.json: label_options.margin is \"0.1\", not a number (--margin's value)");
  }
  j.erase("label_options");
  const RunAnalysis old = j.get<RunAnalysis>();
  EXPECT_FALSE(old.label_options);
  EXPECT_EQ(label_options_departures(old), "");
}

}  // namespace
}  // namespace headlab::analysis
