// The terminal rendering and report.html of a head analysis.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/heads_json.h"
#include "analysis/run_analysis.h"
#include "analysis/text_report.h"
#include "analysis/html_report.h"
#include "page_test_util.h"

namespace headlab::analysis {
namespace {

using core::DType;
using core::Tensor;

// One layer, two heads on T = 6: head 0 previous-token, head 1 first-token.
RunAnalysis planted_run() {
  const int64_t len = 6;
  std::vector<double> v;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t q = 0; q < len; ++q)
      for (int64_t k = 0; k < len; ++k) v.push_back(k == (h == 0 ? (q > 0 ? q - 1 : 0) : 0) ? 1.0 : 0.0);
  const std::vector<int32_t> tokens = {5, 3, 8, 1, 9, 2};
  RunAnalysis run = analyze_attention({Tensor::from_vector(v, {1, 2, len, len}, DType::f64)}, tokens, true);
  run.loss = 0.05;
  run.accuracy = 0.98;
  run.at(0, 0).ablation_delta_acc = -0.6;
  run.at(0, 1).ablation_delta_acc = -0.4;
  run.at(0, 0).importance = 0.3;
  relabel(run);
  return run;
}

std::vector<nlohmann::json> history() {
  std::vector<nlohmann::json> h;
  for (int step = 0; step <= 400; step += 100) {
    const double prev = step >= 200 ? 0.9 : 0.1;
    h.push_back({{"step", step},
                 {"loss", 2.0 - step / 250.0},
                 {"accuracy", step / 400.0},
                 {"lr", 1e-3},
                 {"heads", {{"L0H0", {{"label", "mixed"}, {"previous_token", prev}}},
                            {"L0H1", {{"label", "mixed"}, {"first_token", 0.3}}}}}});
  }
  return h;
}

TEST(LayerSummary, NamesEachHeadsLabelScoreAndTheLayersJs) {
  EXPECT_EQ(layer_summary(planted_run(), 0), "L0H0 previous-token 1.00 | L0H1 first-token 1.00 | JS 0.80");
}

TEST(HeadTable, HasOneRowPerHeadWithLabelScoresAndAblation) {
  const std::string table = head_table(planted_run());
  EXPECT_NE(table.find("ablation Δacc"), std::string::npos);
  EXPECT_NE(table.find("previous-token   prev 1.00"), std::string::npos) << table;
  EXPECT_NE(table.find("-60.0 pts"), std::string::npos);
  EXPECT_NE(table.find("0.3000"), std::string::npos);
  EXPECT_EQ(count(table, "\n"), 4u);  // header, rule, two heads
  EXPECT_EQ(table.find("\x1b["), std::string::npos) << "no colour unless asked";
}

// After training, the table adds when each head's label emerged: the steps
// report.html shows for the labelled heads, "-" for one that never held it,
// a head without a pattern label (mixed, diffuse) none.
TEST(HeadTable, AddsEachLabelsEmergenceStepFromTheTrainingsHistory) {
  RunAnalysis run = planted_run();
  const std::vector<std::optional<int64_t>> steps = label_emergence_steps(history(), run);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0], std::optional<int64_t>(200));  // report.html's heads_extra[0].emerged
  EXPECT_EQ(steps[1], std::nullopt);                  // first-token stays at 0.3 in the history
  TextOptions options;
  options.emerged = steps;
  const std::string table = head_table(run, options);
  EXPECT_NE(table.find("importance  emerged\n"), std::string::npos) << table;
  const std::size_t row1 = table.find("    0     1");
  ASSERT_NE(row1, std::string::npos) << table;
  EXPECT_EQ(table.substr(row1 - 6, 6), "  200\n") << table;  // row 0 ends with its step
  EXPECT_EQ(table.substr(table.size() - 4, 4), "  -\n") << table;
  EXPECT_EQ(head_table(run).find("emerged"), std::string::npos) << "no history: no column";
  options.emerged.pop_back();
  EXPECT_THROW(head_table(run, options), std::invalid_argument);
  run.at(0, 0).label = Label::mixed();
  EXPECT_EQ(label_emergence_steps(history(), run)[0], std::nullopt);
}

TEST(Heatmap, ShadesEachCellAndLabelsTheAxes) {
  RunAnalysis run = planted_run();
  const std::string map = attention_heatmap(run, 0, 0);
  EXPECT_NE(map.find("L0H0 previous-token 1.00"), std::string::npos);
  EXPECT_NE(map.find("  2 8    · ██"), std::string::npos) << map;  // query 2 (token 8) on key 1
  EXPECT_EQ(map.find("\x1b["), std::string::npos);
  TextOptions color;
  color.color = true;
  EXPECT_NE(attention_heatmap(run, 0, 0, color).find("\x1b["), std::string::npos);
  EXPECT_THROW(attention_heatmap(run, 1, 0), std::invalid_argument);
}

TEST(Heatmap, ControlCharactersInTokenLabelsCannotReachTheTerminal) {
  RunAnalysis run = planted_run();
  run.example.token_labels = {"\x1b[2J", "b", "c", "d", "e", "f"};
  const std::string text = text_report(run);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_NE(text.find("?[2"), std::string::npos);
}

TEST(Heatmap, ShowsOnlyTheFirstPositionsWhenAsked) {
  TextOptions few;
  few.max_positions = 3;
  const std::string map = attention_heatmap(planted_run(), 0, 1, few);
  EXPECT_NE(map.find("(first 3 of 6 positions)"), std::string::npos);
  EXPECT_EQ(map.find("  3 "), std::string::npos);
}

TEST(VerdictText, StatesTheVerdictAndEveryReason) {
  const RunAnalysis run = planted_run();
  const std::string text = verdict_text(run);
  EXPECT_EQ(text.rfind("Verdict: heads specialized", 0), 0u);
  for (const std::string& r : run.verdict.reasons) EXPECT_NE(text.find(r), std::string::npos);
}

// A one-role task whose role is found: a success, and the line says why it
// is not called specialized instead of seeming to contradict itself.
TEST(VerdictText, AFoundSingleRoleSaysWhySpecializationDoesNotApply) {
  RunAnalysis run = planted_run();
  run.verdict.specialized = false;
  run.verdict.roles_found = true;
  run.verdict.roles = {{"the token after the earlier copy", "induction", {"L1H0"}}};
  const std::string text = verdict_text(run);
  EXPECT_EQ(text.rfind("Verdict: expected roles found: 1 of 1 (the task expects one role", 0), 0u) << text;
  EXPECT_EQ(text.find("did not specialize"), std::string::npos) << text;
  run.verdict.roles.push_back({"looks at the start", "first", {"L0H0"}});
  EXPECT_NE(verdict_text(run).find("2 of 2 (but the heads did not specialize"), std::string::npos);
}

TEST(HtmlEscape, EscapesTheFiveSpecialCharacters) {
  EXPECT_EQ(html_escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
}

TEST(ReportHtml, IsSelfContainedWithNoNetworkReferences) {
  const std::string html = report_html(planted_run(), history(), {{"task", "first-prev-pair"}});
  expect_self_contained(html);
  EXPECT_NE(html.find("Heads specialized"), std::string::npos) << "the verdict shows without JavaScript";
}

TEST(ReportHtml, MaliciousStringsStayDataAndRoundTrip) {
  RunAnalysis run = planted_run();
  const std::string evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>";
  run.example.token_labels = {evil, "b", "c", "d", "e", "f"};
  ReportOptions options;
  options.title = "<b>run</b>";
  const std::string html = report_html(run, history(), {{"task", evil}}, options);
  EXPECT_EQ(html.find("alert(1)</script>"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>run"), std::string::npos);
  EXPECT_NE(html.find("<title>&lt;b&gt;run&lt;/b&gt;</title>"), std::string::npos);
  EXPECT_EQ(count(html, "<script"), 3u);
  const nlohmann::json data = page_data_of(html);
  EXPECT_EQ(data.at("run").at("example").at("token_labels")[0], evil);
  EXPECT_EQ(data.at("config").at("task"), evil);
}

// Two open reports can be told apart by their tabs.
TEST(ReportHtml, TitleNamesTheRunAndItsTask) {
  ReportOptions options;
  options.run_name = "first-prev-pair-20261201-1200";
  const std::string html = report_html(planted_run(), history(), {{"task", "previous"}}, options);
  EXPECT_NE(html.find("<title>first-prev-pair-20261201-1200 · previous · headlab</title>"), std::string::npos);
  EXPECT_EQ(page_data_of(html).at("title"), "first-prev-pair-20261201-1200 · previous · headlab");
  EXPECT_NE(report_html(planted_run(), {}, {}).find("<title>headlab report</title>"), std::string::npos);
}

TEST(ReportHtml, InvalidUtf8InALabelIsReplacedNotFatal) {
  RunAnalysis run = planted_run();
  run.example.token_labels = {std::string("\xff\xfe"), "b", "c", "d", "e", "f"};
  EXPECT_NO_THROW(page_data_of(report_html(run, {}, nlohmann::json())));
}

TEST(ReportHtml, CarriesTheAnalysisHistoryAndEmergenceSteps) {
  ReportOptions options;
  options.max_positions = 4;
  const nlohmann::json data = page_data_of(report_html(planted_run(), history(), {}, options));
  EXPECT_EQ(data.at("run").at("heads")[0].at("label"), "previous-token");
  EXPECT_EQ(data.at("history").size(), 5u);
  EXPECT_EQ(data.at("heads_extra")[0].at("pattern"), "previous_token");
  EXPECT_EQ(data.at("heads_extra")[0].at("emerged"), 200);
  EXPECT_TRUE(data.at("heads_extra")[1].at("emerged").is_null());  // first-token stays at 0.3
  const nlohmann::json& maps = data.at("run").at("example").at("attention");
  EXPECT_EQ(maps[0][0].size(), 4u);
  EXPECT_EQ(maps[0][0][0].size(), 4u);
  EXPECT_EQ(data.at("options").at("score_threshold"), 0.5);
}

TEST(ReportHtml, CarriesTheCircuitViewsData) {
  RunAnalysis run = planted_run();
  run.at(0, 0).copying = 0.9;
  run.at(0, 1).importance_normalized = 0.8;
  PruningCurve p;
  p.order = {1, 0};
  p.loss = {0.05, 0.4, 2.0};
  p.accuracy = {0.98, 0.6, 0.1};
  p.random_loss = {0.05, 0.9, 2.0};
  p.random_accuracy = {0.98, 0.4, 0.1};
  p.random_orders = 5;
  run.pruning = p;
  const std::string html = report_html(run, history(), {});
  const nlohmann::json data = page_data_of(html);
  EXPECT_EQ(data.at("run").at("heads")[0].at("copying"), 0.9);
  EXPECT_EQ(data.at("run").at("heads")[1].at("importance_normalized"), 0.8);
  EXPECT_EQ(data.at("run").at("pruning").at("order"), (nlohmann::json{"L0H1", "L0H0"}));
  EXPECT_TRUE(data.at("run").at("circuits").at("composition").empty());
  EXPECT_NE(html.find("function circuitSection"), std::string::npos);
}

TEST(EmergenceStep, IsTheStartOfTheLastRunAtOrAboveTheThreshold) {
  std::vector<nlohmann::json> h;
  const double scores[] = {0.1, 0.6, 0.4, 0.55, 0.7};
  for (int i = 0; i < 5; ++i) h.push_back({{"step", 10 * i}, {"heads", {{"L0H0", {{"self", scores[i]}}}}}});
  h.push_back({{"step", 50}, {"loss", 0.1}});  // a line without head metrics changes nothing
  EXPECT_EQ(emergence_step(h, "L0H0", "self", 0.5), 30);
  EXPECT_EQ(emergence_step(h, "L0H0", "self", 0.05), 0);
  EXPECT_FALSE(emergence_step(h, "L0H0", "self", 0.8).has_value());
  EXPECT_FALSE(emergence_step(h, "L0H1", "self", 0.5).has_value());
}

}  // namespace
}  // namespace headlab::analysis
