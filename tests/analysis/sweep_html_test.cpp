// sweep.html as a document: self-contained, carrying sweep.json whole, safe
// against hostile strings, and stating the rates without JavaScript. (What the
// page draws is checked in headless Chromium by tests/cli/sweep_page_test.sh.)
#include "analysis/sweep_html.h"

#include <gtest/gtest.h>

#include <string>

#include "page_test_util.h"

namespace headlab::analysis {
namespace {

// A sweep.json as `headlab sweep` writes it (train/sweep.h), two head counts.
nlohmann::ordered_json planted_sweep() {
  nlohmann::ordered_json run = {{"heads", 2}, {"seed", 0}, {"dir", "h2-s0"}, {"status", "done"},
                                {"exit_code", 0}, {"error", ""}, {"seconds", 1.5}, {"loss", 0.01},
                                {"accuracy", 1.0}, {"reached_target", true}, {"specialized", true},
                                {"specialized_step", 300},
                                {"head_results", {{{"name", "L0H0"}, {"label", "previous-token"}, {"score", 0.9},
                                                   {"previous_token", 0.9}, {"first_token", 0.0}, {"emerged", 200}}}}};
  nlohmann::ordered_json config = {{"heads", 2}, {"runs", 10}, {"failed", 0}, {"interrupted", 0},
                                   {"reached_target", 10}, {"reached_target_share", 1.0},
                                   {"reached_target_ci", {0.7225, 1.0}}, {"specialized", 5},
                                   {"specialized_share", 0.5}, {"specialized_ci", {0.2366, 0.7634}},
                                   {"mean_seconds", 1.5}, {"labels", nlohmann::ordered_json::object()}};
  return {{"format", "headlab-sweep/1"}, {"task", "first-prev-pair"}, {"seeds", {0}}, {"heads", {2}},
          {"target_accuracy", 0.99}, {"jobs", 1}, {"planned_runs", 1}, {"seconds", 1.6},
          {"interrupted", false}, {"config", {{"steps", 600}}}, {"runs", {run}}, {"configs", {config}}};
}

TEST(SweepHtml, IsSelfContainedWithNoNetworkReferences) {
  const std::string html = sweep_html(planted_sweep());
  expect_self_contained(html);
}

TEST(SweepHtml, CarriesTheSweepAndThePatternTable) {
  const nlohmann::ordered_json sweep = planted_sweep();
  const nlohmann::json data = page_data_of(sweep_html(sweep, "my sweep"));
  EXPECT_EQ(data.at("title"), "my sweep");
  EXPECT_EQ(data.at("sweep"), nlohmann::json(sweep));
  EXPECT_EQ(data.at("patterns")[0].at("name"), "previous-token");
}

TEST(SweepHtml, StatesEachRateAndItsIntervalWithoutJavaScript) {
  const std::string html = sweep_html(planted_sweep());
  const std::string noscript = html.substr(html.find("<noscript>"), html.find("</noscript>") - html.find("<noscript>"));
  EXPECT_NE(noscript.find("<li>h2: 5 of 10 runs specialized (95% CI 24-76%)</li>"), std::string::npos) << noscript;
}

TEST(SweepHtml, SaysNoneFinishedForAConfigurationWithoutAFinishedRun) {
  nlohmann::ordered_json sweep = planted_sweep();
  nlohmann::ordered_json& c = sweep["configs"][0];
  c["runs"] = 0;
  c["interrupted"] = 10;
  for (const char* key : {"reached_target", "specialized"}) c[key] = 0;
  for (const char* key : {"reached_target_share", "reached_target_ci", "specialized_share", "specialized_ci"})
    c[key] = nullptr;
  const std::string html = sweep_html(sweep);
  const std::string noscript = html.substr(html.find("<noscript>"), html.find("</noscript>") - html.find("<noscript>"));
  EXPECT_NE(noscript.find("<li>h2: none finished</li>"), std::string::npos) << noscript;
  EXPECT_EQ(noscript.find("0 of 0"), std::string::npos) << noscript;
}

TEST(SweepHtml, HostileStringsStayData) {
  nlohmann::ordered_json sweep = planted_sweep();
  const std::string evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>";
  sweep["task"] = evil;
  sweep["runs"][0]["dir"] = evil;
  sweep["runs"][0]["error"] = evil;
  sweep["configs"][0]["specialized_ci"] = evil;  // not a pair of numbers: no interval stated
  const std::string html = sweep_html(sweep, "<b>sweep</b>");
  EXPECT_EQ(html.find("alert(1)</script>"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>sweep"), std::string::npos);
  EXPECT_NE(html.find("<title>&lt;b&gt;sweep&lt;/b&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("<li>h2: 5 of 10 runs specialized</li>"), std::string::npos);
  EXPECT_EQ(count(html, "<script"), 3u);
  EXPECT_EQ(page_data_of(html).at("sweep").at("task"), evil);
}

TEST(SweepHtml, ToleratesAnEmptyOrStrangeDocument) {
  EXPECT_NO_THROW(page_data_of(sweep_html(nlohmann::ordered_json::object())));
  EXPECT_NO_THROW(page_data_of(sweep_html({{"configs", {1, "x", nullptr}}})));
  nlohmann::ordered_json sweep = planted_sweep();
  sweep["task"] = std::string("\xff\xfe");  // invalid UTF-8 is replaced, not fatal
  EXPECT_NO_THROW(page_data_of(sweep_html(sweep)));
}

}  // namespace
}  // namespace headlab::analysis
