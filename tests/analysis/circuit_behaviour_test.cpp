// Task-position scores, loss by position, the loss-drop step, sets of heads
// ablated together and the verdicts they give (docs/head-metrics.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "analysis/heads_json.h"
#include "analysis/html_report.h"
#include "analysis/position_loss.h"
#include "analysis/run_analysis.h"
#include "analysis/task_positions.h"
#include "one_hot_heads.h"

namespace headlab::analysis {
namespace {

using core::DType;
using core::Tensor;

using testing::one_hot_heads;

// Filler 9 9, segment 1 2 3 4 at 2..5, filler 8, the segment again at 7..10,
// filler 9: targets at 7, 8, 9 (the next token), none elsewhere.
const std::vector<int32_t> kTokens = {9, 9, 1, 2, 3, 4, 8, 1, 2, 3, 4, 9};
const std::vector<int32_t> kTargets = {-1, -1, -1, -1, -1, -1, -1, 2, 3, 4, -1, -1};

TEST(TaskPositionScores, PreviousTokenAtTheSourcesAndInductionAtTheTargets) {
  const int64_t T = 12;
  // Head 0: previous token inside the first occurrence (sources 3, 4, 5), itself elsewhere.
  // Head 1: induction at the targets (q -> q - 5 + 1), itself elsewhere.
  // Head 2: previous token everywhere.
  const Tensor a = one_hot_heads(T, {[](int64_t q) { return q >= 3 && q <= 5 ? q - 1 : q; },
                                     [](int64_t q) { return q >= 7 && q <= 9 ? q - 4 : q; },
                                     [](int64_t q) { return q > 0 ? q - 1 : 0; }});
  const std::vector<TaskPositionScores> s = task_position_scores(a, kTokens, kTargets, true);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(*s[0].previous_token, 1.0);
  EXPECT_DOUBLE_EQ(*s[0].induction, 0.0);
  EXPECT_DOUBLE_EQ(*s[1].previous_token, 0.0);
  EXPECT_DOUBLE_EQ(*s[1].induction, 1.0);
  EXPECT_DOUBLE_EQ(*s[2].previous_token, 1.0);
  // The all-position mean of head 0 is diluted by the filler: 3 of 10 queries q >= 2.
  const std::vector<HeadScores> all = head_scores(a, kTokens, true);
  EXPECT_NEAR(all[0].at("previous-token"), 0.3, 1e-12);
}

TEST(TaskPositionScores, AbsentWithoutTargetsOrWithoutCopies) {
  const Tensor a = one_hot_heads(12, {[](int64_t q) { return q; }});
  EXPECT_FALSE(task_position_scores(a, kTokens, {}, true)[0].induction.has_value());
  const std::vector<int32_t> distinct = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const TaskPositionScores none = task_position_scores(a, distinct, kTargets, true)[0];
  EXPECT_FALSE(none.previous_token.has_value());
  EXPECT_FALSE(none.induction.has_value());
  EXPECT_THROW(task_position_scores(a, kTokens, std::vector<int32_t>(5, 0), true), std::invalid_argument);
}

TEST(PositionLoss, IsTheMeanCrossEntropyPerPositionAndAbsentWithoutTargets) {
  // B = 2, T = 3, C = 4; uniform logits give ln 4, a confident right logit ~0.
  std::vector<double> v(2 * 3 * 4, 0.0);
  v[(1 * 3 + 2) * 4 + 1] = 50;  // example 1, position 2 predicts class 1
  const Tensor logits = Tensor::from_vector(v, {2, 3, 4}, DType::f64);
  const std::vector<int32_t> targets = {-1, 0, 3, -1, 2, 1};
  const auto loss = position_loss(logits, targets);
  ASSERT_EQ(loss.size(), 3u);
  EXPECT_FALSE(loss[0].has_value());
  EXPECT_NEAR(*loss[1], std::log(4.0), 1e-12);
  EXPECT_NEAR(*loss[2], std::log(4.0) / 2, 1e-12);
  EXPECT_THROW(position_loss(logits, std::vector<int32_t>(5, 0)), std::invalid_argument);
}

TEST(IclScore, IsLateMinusEarlyOverAQuarterOfThePositions) {
  // 8 positions with a loss: quarter = 2; late (0.5 + 0.3) / 2 - early (2 + 1.6) / 2.
  const std::vector<std::optional<double>> loss = {std::nullopt, 2.0, 1.6, 1.0, 1.0, 1.0, 1.0, 0.5, 0.3};
  EXPECT_NEAR(*icl_score(loss), 0.4 - 1.8, 1e-12);
  EXPECT_FALSE(icl_score({std::nullopt, 1.0}).has_value());
}

TEST(LossDropStep, IsTheFirstStepHalfwayDownAndAbsentWithoutADrop) {
  std::vector<nlohmann::json> history;
  for (int64_t step : {50, 100, 150, 200, 250, 300}) {
    const double loss = step < 200 ? 2.0 - 0.001 * static_cast<double>(step) / 50 : step == 200 ? 1.2 : 0.1;
    history.push_back({{"step", step}, {"eval_loss", loss}});
  }
  // First 1.999, lowest 0.1: halfway is 1.0495, first reached at 250.
  EXPECT_EQ(loss_drop_step(history), 250);
  const std::vector<nlohmann::json> flat = {{{"step", 1}, {"loss", 1.0}}, {{"step", 2}, {"loss", 0.99}}};
  EXPECT_FALSE(loss_drop_step(flat).has_value());
}

// Two redundant first-token heads: each alone costs nothing, together a lot.
RunAnalysis redundant_first_token_pair(double set_delta_loss, double set_delta_acc,
                                       SetAblation::Cost first_own = {0.001, 0.0}) {
  RunAnalysis run = analyze_attention({one_hot_heads(6, {[](int64_t) { return 0; }, [](int64_t) { return 0; }})}, {}, true);
  for (int64_t h = 0; h < 2; ++h) {
    run.at(0, h).ablation_delta_loss = h == 0 ? first_own.delta_loss : 0.001;
    run.at(0, h).ablation_delta_acc = h == 0 ? first_own.delta_accuracy : 0.0;
  }
  run.set_ablations = candidate_sets(run);
  EXPECT_EQ(run.set_ablations.size(), 1u);
  if (!run.set_ablations.empty()) {
    run.set_ablations[0].delta_loss = set_delta_loss;
    run.set_ablations[0].delta_accuracy = set_delta_acc;
  }
  relabel(run);
  return run;
}

TEST(SetAblation, TwoRedundantFirstTokenHeadsAreCreditedAsOneRoleNotSinks) {
  const RunAnalysis run = redundant_first_token_pair(2.5, -0.8);
  EXPECT_EQ(run.set_ablations[0].role, "first-token");
  EXPECT_EQ(run.set_ablations[0].heads, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(run.at(0, 0).label, Label::pattern("first-token"));
  EXPECT_EQ(run.at(0, 1).label, Label::pattern("first-token"));
  EXPECT_EQ(run.verdict.counted_heads, 2);
  EXPECT_EQ(run.verdict.distinct_labels, 1);
  EXPECT_FALSE(run.verdict.specialized) << "one role, however many heads share it";
  bool said = false;
  for (const std::string& r : run.verdict.reasons)
    said |= r.find("ablating L0H0+L0H1 (first-token) together costs 80.0 pts of accuracy and 2.500 nats") !=
                std::string::npos &&
            r.find("counted as one role") != std::string::npos;
  EXPECT_TRUE(said) << "the reasons say which set was ablated and what it cost";
}

// A set whose ablation lowers the loss says how it changes it, not "costs -0.5 nats".
TEST(SetAblation, ASetThatHelpsSaysHowItChangesAccuracyAndLoss) {
  const RunAnalysis run = redundant_first_token_pair(-0.511, -0.314);
  bool said = false;
  for (const std::string& r : run.verdict.reasons) {
    EXPECT_EQ(r.find("costs -"), std::string::npos) << r;
    said |= r.find("together changes accuracy by -31.4 pts and the loss by -0.511 nats") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

// A first-token head that adds nothing to its costly set (L0H0 alone costs
// what both do) is a sink: the model does not use its output. Its partner is
// not.
TEST(SetAblation, AFirstTokenHeadAddingNothingToItsSetIsASink) {
  const RunAnalysis run = redundant_first_token_pair(2.5, -0.8, {2.5, -0.8});
  EXPECT_EQ(run.at(0, 0).label, Label::pattern("first-token"));
  EXPECT_EQ(run.at(0, 1).label, Label::sink());
  EXPECT_EQ(run.verdict.counted, (std::vector<std::string>{"L0H0"}));
}

TEST(SetAblation, WhenTheSetCostsNothingEitherBothHeadsAreSinks) {
  const RunAnalysis run = redundant_first_token_pair(0.001, 0.0);
  EXPECT_EQ(run.at(0, 0).label, Label::sink());
  EXPECT_EQ(run.at(0, 1).label, Label::sink());
  EXPECT_EQ(run.verdict.counted_heads, 0);
}

// Heads that all attend to the previous token, with each head's own ablation
// and the set's filled in as analyze_model would (`without`: the set ablated
// without each member, which it measures for three heads or more).
RunAnalysis previous_token_heads(const std::vector<SetAblation::Cost>& own, SetAblation::Cost set,
                                 const std::vector<SetAblation::Cost>& without = {}) {
  const std::vector<std::function<int64_t(int64_t)>> keys(own.size(), [](int64_t q) { return q > 0 ? q - 1 : 0; });
  RunAnalysis run = analyze_attention({one_hot_heads(6, keys)}, {}, true);
  for (std::size_t i = 0; i < own.size(); ++i) {
    run.heads[i].ablation_delta_loss = own[i].delta_loss;
    run.heads[i].ablation_delta_acc = own[i].delta_accuracy;
  }
  run.set_ablations = candidate_sets(run);
  EXPECT_EQ(run.set_ablations.size(), 1u);
  if (!run.set_ablations.empty()) {
    run.set_ablations[0].delta_loss = set.delta_loss;
    run.set_ablations[0].delta_accuracy = set.delta_accuracy;
    run.set_ablations[0].without = without;
  }
  relabel(run);
  return run;
}

bool says(const RunAnalysis& run, const std::string& text) {
  for (const std::string& r : run.verdict.reasons)
    if (r.find(text) != std::string::npos) return true;
  return false;
}

TEST(SetAblation, AHeadThatWritesNothingIsNotCreditedThroughItsPartnersSet) {
  // L0H1's output is zero: ablating it changes nothing, and the set's whole
  // cost is L0H0's own (QA F15).
  const RunAnalysis run = previous_token_heads({{2.5, -0.8}, {0.0, 0.0}}, {2.5, -0.8});
  EXPECT_EQ(run.at(0, 1).label, Label::pattern("previous-token")) << "the label still shows its attention";
  EXPECT_EQ(run.verdict.counted_heads, 1);
  EXPECT_EQ(run.verdict.counted, (std::vector<std::string>{"L0H0"}));
  EXPECT_TRUE(says(run, "L0H1 previous-token: ablation costs only 0.0 pts of accuracy and 0.000 nats of loss, and "
                        "adds only 0.0 pts and 0.000 nats to ablating L0H0+L0H1"));
  EXPECT_TRUE(says(run, "changes too little, alone or within its set"));
  EXPECT_TRUE(says(run, "together costs 80.0 pts of accuracy and 2.500 nats of loss: counted as one role for L0H0 "
                        "only (L0H1 adds too little to it)"));
  // heads.json says the same.
  const nlohmann::json j = run;
  EXPECT_EQ(j.at("verdict").at("counted"), nlohmann::json({"L0H0"}));
  EXPECT_EQ(j.at("verdict").at("counted_heads"), 1);
}

TEST(SetAblation, TwoRedundantHeadsAreStillCreditedEachAddingToTheSet) {
  // Each alone costs nothing, together a lot: each adds the set's cost.
  const RunAnalysis run = previous_token_heads({{0.001, 0.0}, {0.001, 0.0}}, {2.5, -0.8});
  EXPECT_EQ(run.verdict.counted, (std::vector<std::string>{"L0H0", "L0H1"}));
  EXPECT_TRUE(says(run, "counted as one role, whatever each head alone costs"));
  EXPECT_FALSE(says(run, "adds only"));
}

TEST(SetAblation, OfThreeHeadsThoseAddingToTheSetAreCreditedByItsAblationWithoutEach) {
  // L0H0 and L0H1 back each other up; L0H2 writes nothing. Without L0H0 (L0H1
  // and L0H2 ablated) the set costs nothing, without L0H2 all of it.
  const SetAblation::Cost nothing{0.001, 0.0}, all{2.5, -0.8};
  RunAnalysis run = previous_token_heads({nothing, nothing, {0.0, 0.0}}, all, {nothing, nothing, all});
  EXPECT_EQ(run.verdict.counted, (std::vector<std::string>{"L0H0", "L0H1"}));
  EXPECT_TRUE(says(run, "counted as one role for L0H0+L0H1 only (L0H2 adds too little to it)"));
  // The measurements survive heads.json, and so does the verdict on them.
  RunAnalysis back = nlohmann::json(run).get<RunAnalysis>();
  ASSERT_EQ(back.set_ablations.at(0).without.size(), 3u);
  EXPECT_EQ(back.set_ablations[0].without[2].delta_loss, 2.5);
  relabel(back);
  EXPECT_EQ(back.verdict.counted, run.verdict.counted);
  // A heads.json from before these measurements credits the whole set, as it did.
  back.set_ablations[0].without.clear();
  relabel(back);
  EXPECT_EQ(back.verdict.counted_heads, 3);
}

TEST(SetAblation, OfThreeHeadsOfWhichAnyTwoSufficeEachIsCreditedBesideOnePartner) {
  // Any two do the job, one alone cannot: each costs nothing alone and adds
  // nothing to the three (without it, the one head left fails as well), but
  // the pair of it and a partner costs all that the partner alone does not.
  const SetAblation::Cost nothing{0.001, 0.0}, all{2.5, -0.8};
  const RunAnalysis run = previous_token_heads({nothing, nothing, nothing}, all, {all, all, all});
  EXPECT_EQ(run.verdict.counted, (std::vector<std::string>{"L0H0", "L0H1", "L0H2"}));
  EXPECT_TRUE(says(run, "counted as one role, whatever each head alone costs"));
  // A head that writes nothing beside two that back each other up still adds
  // nothing beside either of them.
  const RunAnalysis idle = previous_token_heads({nothing, nothing, {0.0, 0.0}}, all, {nothing, nothing, all});
  EXPECT_EQ(idle.verdict.counted, (std::vector<std::string>{"L0H0", "L0H1"}));
  EXPECT_TRUE(says(idle, "L0H2 previous-token: ablation costs only 0.0 pts of accuracy and 0.000 nats of loss, and "
                         "adds only 0.0 pts and 0.000 nats to ablating L0H0+L0H1+L0H2 (at most 0.0 pts and 0.000 "
                         "nats beside one other of them)"));
}

// QA20 F21: on a task with sources, the circuit's previous-token heads are
// those that attend to the previous token where an induction head copies
// from (task previous-token score), not those the all-position label calls
// previous-token: filler dilutes the one and flatters the other.
TEST(CandidateSets, TakeTheInductionCircuitFromTheTaskPositionScores) {
  const int64_t T = 12;
  // L0H0: the previous token at the sources 3..5 only, the first token elsewhere (labelled first-token);
  // L0H1: the previous token everywhere but at the sources (labelled previous-token); L1: two induction heads.
  const auto at_sources = [](int64_t q) { return q >= 3 && q <= 5 ? q - 1 : 0; };
  const auto elsewhere = [](int64_t q) { return q >= 3 && q <= 5 ? q : std::max<int64_t>(q - 1, 0); };
  const auto induction = [](int64_t q) { return q >= 7 && q <= 9 ? q - 4 : q; };
  const std::vector<Tensor> layers = {one_hot_heads(T, {at_sources, elsewhere}), one_hot_heads(T, {induction, induction})};
  RunAnalysis run = analyze_attention(layers, kTokens, true, {}, 0, {kTargets, {}, {}});
  ASSERT_EQ(run.at(0, 0).label, Label::pattern("first-token"));
  ASSERT_EQ(run.at(0, 1).label, Label::pattern("previous-token"));
  const auto circuit_of = [](const RunAnalysis& r) {
    for (const SetAblation& s : candidate_sets(r))
      if (s.role == "induction circuit") return s.heads;
    return std::vector<std::size_t>{};
  };
  // Without task-position scores (a task without sources), the labels decide.
  EXPECT_EQ(circuit_of(run), (std::vector<std::size_t>{1, 2, 3}));
  for (int64_t l = 0; l < 2; ++l) {
    const auto task = task_position_scores(layers[static_cast<std::size_t>(l)], kTokens, kTargets, true);
    for (int64_t h = 0; h < 2; ++h) run.at(l, h).task = task[static_cast<std::size_t>(h)];
  }
  ASSERT_DOUBLE_EQ(*run.at(0, 0).task.previous_token, 1.0);
  ASSERT_DOUBLE_EQ(*run.at(0, 1).task.previous_token, 0.0);
  EXPECT_EQ(circuit_of(run), (std::vector<std::size_t>{0, 2, 3}));
}

TEST(CandidateSets, FindTheInductionCircuitFromItsLabelledHeads) {
  // Layer 0: a previous-token head and a self head; layer 1: two induction
  // heads at the targets. Only heads labelled for the circuit are in it.
  const int64_t T = 12;
  const auto prev_at_sources = [](int64_t q) { return q >= 1 ? q - 1 : q; };
  const auto induction = [](int64_t q) { return q >= 7 && q <= 9 ? q - 4 : q; };
  const std::vector<Tensor> layers = {one_hot_heads(T, {prev_at_sources, [](int64_t q) { return q; }}),
                                      one_hot_heads(T, {induction, induction})};
  RunAnalysis run = analyze_attention(layers, kTokens, true, {}, 0, {kTargets, {}, {}});
  for (int64_t l = 0; l < 2; ++l) {
    const auto task = task_position_scores(layers[static_cast<std::size_t>(l)], kTokens, kTargets, true);
    for (int64_t h = 0; h < 2; ++h) run.at(l, h).task = task[static_cast<std::size_t>(h)];
  }
  const std::vector<SetAblation> sets = candidate_sets(run);
  bool circuit = false;
  for (const SetAblation& s : sets)
    if (s.role == "induction circuit") {
      circuit = true;
      EXPECT_EQ(s.heads, (std::vector<std::size_t>{0, 2, 3}));
    }
  EXPECT_TRUE(circuit);
  // And it survives heads.json.
  run.set_ablations = sets;
  const RunAnalysis back = nlohmann::json(run).get<RunAnalysis>();
  EXPECT_EQ(nlohmann::json(back), nlohmann::json(run));
  EXPECT_EQ(back.at(0, 0).task.previous_token, run.at(0, 0).task.previous_token);
}

TEST(ReportHtml, CarriesTheLossDropTaskEmergenceAndTheNewSections) {
  RunAnalysis run = redundant_first_token_pair(2.5, -0.8);
  run.position_loss = {std::nullopt, 0.5, 0.25};
  run.icl_score = -0.25;
  std::vector<nlohmann::json> history;
  for (int64_t step : {100, 200, 300})
    history.push_back({{"step", step},
                       {"eval_loss", step < 300 ? 2.0 : 0.1},
                       {"position_loss", {nullptr, 1.0, 0.5}},
                       {"heads", {{"L0H0", {{"task_induction", step < 200 ? 0.1 : 0.9}}}}}});
  const std::string html = report_html(run, history, nlohmann::json::object());
  EXPECT_NE(html.find("\"loss_drop_step\":300"), std::string::npos);
  EXPECT_NE(html.find("\"task_emerged\":{\"task_induction\":200"), std::string::npos);
  EXPECT_NE(html.find("\"set_ablations\":[{"), std::string::npos);
  EXPECT_NE(html.find("card.id = 'behaviour'"), std::string::npos);
  EXPECT_NE(html.find("card.id = 'interventions'"), std::string::npos);
}

}  // namespace
}  // namespace headlab::analysis
