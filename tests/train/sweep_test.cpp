// `headlab sweep`'s arithmetic: seed and head lists, per-run results read
// from an analysis, the aggregates per head count, and sweep.json's parts.
// (The processes themselves are tested end to end by tests/cli/sweep_test.sh.)
#include "train/sweep.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "train/errors.h"

namespace headlab::train {
namespace {

using analysis::HeadAnalysis;
using analysis::RunAnalysis;

// The UsageError message of parse_int_list, or "" if it parsed.
std::string parse_error(const std::string& text, int64_t min_value = 0) {
  try {
    (void)parse_int_list(text, "--seeds", min_value, 100);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ParseIntList, ExpandsRangesAndListsInTheOrderGiven) {
  EXPECT_EQ(parse_int_list("0-3", "--seeds", 0), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(parse_int_list("0,3,5-7", "--seeds", 0), (std::vector<int64_t>{0, 3, 5, 6, 7}));
  EXPECT_EQ(parse_int_list("4, 1 ,2", "--heads", 1), (std::vector<int64_t>{4, 1, 2}));
  EXPECT_EQ(parse_int_list("7", "--seeds", 0), (std::vector<int64_t>{7}));
  EXPECT_EQ(parse_int_list("5-5", "--seeds", 0), (std::vector<int64_t>{5}));
}

TEST(ParseIntList, RejectsBadListsNamingTheFlagAndTheValue) {
  EXPECT_NE(parse_error("").find("--seeds '': the list is empty"), std::string::npos);
  EXPECT_NE(parse_error("5-3").find("the range 5-3 runs backwards (write 3-5)"), std::string::npos);
  EXPECT_NE(parse_error("-1").find("-1 is negative"), std::string::npos);
  EXPECT_NE(parse_error("1,-2").find("-2 is negative"), std::string::npos);
  EXPECT_NE(parse_error("a").find("'a' is not a whole number"), std::string::npos);
  EXPECT_NE(parse_error("1.5").find("'1.5' is not a whole number"), std::string::npos);
  EXPECT_NE(parse_error("1-").find("'' is not a whole number"), std::string::npos);
  EXPECT_NE(parse_error("1,,2").find("an empty item"), std::string::npos);
  EXPECT_NE(parse_error("1,").find("an empty item"), std::string::npos);
  EXPECT_NE(parse_error("0-3,2").find("2 is listed twice"), std::string::npos);
  EXPECT_NE(parse_error("0,1", 1).find("at least 1, got 0"), std::string::npos);
  EXPECT_NE(parse_error("0-100").find("more than 100 values"), std::string::npos);
  EXPECT_NE(parse_error("99999999999999999999").find("too large"), std::string::npos);
  EXPECT_EQ(parse_error("0-99"), "");
}

// The cells of a sweep over head counts only.
std::vector<SweepCell> head_cells(const std::vector<int64_t>& heads) {
  std::vector<SweepCell> out;
  for (const int64_t h : heads) out.push_back({nlohmann::ordered_json::object(), h});
  return out;
}

SweepHead head(const char* name, Label label, double score, double prev, double first) {
  return {name, label, score, {{"previous-token", prev}, {"first-token", first}}, std::nullopt, "", 0.0, {}};
}

SweepRun done_run(int64_t heads, int64_t seed, double accuracy, bool specialized, std::vector<SweepHead> results) {
  SweepRun r;
  r.heads = heads;
  r.seed = seed;
  r.dir = run_dir_name(heads, seed);
  r.status = RunStatus::done;
  r.accuracy = accuracy;
  r.loss = 0.01;
  r.specialized = specialized;
  r.head_results = std::move(results);
  r.seconds = 2.0;
  return r;
}

TEST(RecordAnalysis, TakesAccuracyVerdictAndEachHeadsLabelAndTopScore) {
  RunAnalysis a;
  a.num_layers = 1;
  a.num_heads = 2;
  a.accuracy = 0.995;
  a.loss = 0.02;
  a.verdict.specialized = true;
  HeadAnalysis prev;
  prev.head = 0;
  prev.label = Label::pattern("previous-token");
  prev.scores["previous-token"] = 0.95;
  prev.scores["first-token"] = 0.03;
  HeadAnalysis mixed;
  mixed.head = 1;
  mixed.label = Label::mixed();
  mixed.scores["previous-token"] = 0.45;
  mixed.scores["first-token"] = 0.52;
  a.heads = {prev, mixed};

  SweepRun r;
  r.heads = 2;
  r.seed = 4;
  r.dir = run_dir_name(2, 4);
  r.seconds = 3.14;
  record_analysis(r, a);
  EXPECT_EQ(r.dir, "h2-s4");
  EXPECT_EQ(r.status, RunStatus::done);
  EXPECT_EQ(r.accuracy, 0.995);
  EXPECT_TRUE(r.specialized);
  ASSERT_EQ(r.head_results.size(), 2u);
  EXPECT_EQ(r.head_results[0].name, "L0H0");
  EXPECT_EQ(r.head_results[0].label, Label::pattern("previous-token"));
  EXPECT_DOUBLE_EQ(r.head_results[0].score, 0.95);
  EXPECT_DOUBLE_EQ(r.head_results[1].score, 0.52);  // a mixed head's best pattern: first-token
  EXPECT_EQ(run_line(r),
            "h2 s4: acc 99.5%, specialized, L0H0 previous-token 0.95, L0H1 mixed (prev 0.45, first 0.52) (3.1 s)");

  // With a data file's patterns, an unlabelled head's line leads with the one it comes nearest to
  // (QA26: a data run's line showed only prev and first, none of the researcher's own patterns).
  a.heads[1].scores.user = {{"latest-marker", 0.31, {}}, {"marker-prev", 0.42, {}}, {"none-scored", std::nullopt, {}}};
  record_analysis(r, a);
  EXPECT_EQ(r.head_results[1].nearest_user, "marker-prev");
  EXPECT_NE(run_line(r).find("L0H1 mixed (marker-prev 0.42, prev 0.45, first 0.52)"), std::string::npos)
      << run_line(r);
  EXPECT_EQ(nlohmann::json(run_json(r, 0.99)["head_results"][1]["user"]),
            nlohmann::json::parse(R"({"latest-marker": 0.31, "marker-prev": 0.42})"))
      << "a pattern no head was scored on has no score";
  EXPECT_FALSE(run_json(r, 0.99)["head_results"][0].contains("user")) << "no user pattern: sweep.json as before";
}

// A data sweep's summary shows the mean score of each of the data's own
// patterns per label, where a task's shows previous and first token (QA27:
// it showed prev and first only); sweep.json's labels hold the same numbers.
TEST(Summarize, ADataSweepShowsTheDatasPatternsPerLabel) {
  const auto user = [](Label label, double score, double marker_prev, double latest) {
    SweepHead h = head("L0H0", label, score, 0.1, 0.2);
    h.user_scores = {{"marker-prev", marker_prev}, {"latest-marker", latest}};
    return h;
  };
  const std::vector<SweepRun> runs = {
      done_run(2, 0, 1.0, true,
               {user(Label::user("marker-prev"), 0.8, 0.8, 0.1), user(Label::user("latest-marker"), 0.9, 0.2, 0.9)}),
      done_run(2, 1, 1.0, true,
               {user(Label::user("marker-prev"), 0.6, 0.6, 0.3), user(Label::user("latest-marker"), 0.7, 0.0, 0.7)})};
  const std::vector<ConfigSummary> s = summarize(runs, head_cells({2}), 0.99);
  const LabelStats& marker = s[0].labels.at(Label::user("marker-prev"));
  EXPECT_DOUBLE_EQ(marker.user_scores.at("marker-prev"), 0.7);
  EXPECT_DOUBLE_EQ(marker.user_scores.at("latest-marker"), 0.2);
  const std::string text = summary_text(s, 0.99);
  EXPECT_NE(text.find("mean scores per label (top pattern score; each of the data's patterns):"), std::string::npos)
      << text;
  EXPECT_NE(text.find("h2   marker-prev         2 heads  top 0.70  latest-marker 0.20  marker-prev 0.70\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("h2   latest-marker       2 heads  top 0.80  latest-marker 0.80  marker-prev 0.10\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("  prev 0."), std::string::npos) << "the built-in patterns give way to the data's: " << text;
  const nlohmann::json labels = config_json(s[0])["labels"];
  EXPECT_EQ(labels["marker-prev"]["user"], nlohmann::json::parse(R"({"latest-marker": 0.2, "marker-prev": 0.7})"));
  EXPECT_EQ(labels["latest-marker"]["user"], nlohmann::json::parse(R"({"latest-marker": 0.8, "marker-prev": 0.1})"));
  EXPECT_FALSE(labels["mixed"].contains("user")) << "no head of the label: no scores";
}

// F14: on `induction` a run can find the task's one expected role (its
// induction heads) and so succeed, while "specialized" wants two distinct
// roles. The sweep counts the roles found beside the specialized runs.
TEST(RecordAnalysis, TakesWhetherTheExpectedRolesWereFoundAndNothingWithoutRoles) {
  RunAnalysis a;
  a.num_layers = 1;
  a.num_heads = 1;
  a.accuracy = 0.948;
  HeadAnalysis induction;
  induction.label = Label::pattern("induction");
  induction.scores["induction"] = 0.8;
  a.heads = {induction};
  a.expected_roles = {{"the token after the earlier copy", "induction"}};
  a.verdict.specialized = false;
  a.verdict.roles_found = true;

  SweepRun r;
  r.heads = 1;
  record_analysis(r, a);
  EXPECT_FALSE(r.specialized);
  ASSERT_TRUE(r.roles_found.has_value());
  EXPECT_TRUE(*r.roles_found);
  EXPECT_NE(run_line(r).find("acc 94.8%, not specialized, roles found, L0H0 induction 0.80"), std::string::npos)
      << run_line(r);
  EXPECT_EQ(run_json(r, 0.9)["roles_found"], true);

  a.verdict.roles_found = false;
  record_analysis(r, a);
  EXPECT_EQ(r.roles_found, std::optional<bool>(false));
  EXPECT_NE(run_line(r).find("not specialized, roles not found,"), std::string::npos) << run_line(r);

  // A task that expects no roles (first-prev-sum): nothing to find, not "not found".
  a.expected_roles.clear();
  record_analysis(r, a);
  EXPECT_FALSE(r.roles_found.has_value());
  EXPECT_EQ(run_line(r).find("roles"), std::string::npos) << run_line(r);
  EXPECT_TRUE(run_json(r, 0.9)["roles_found"].is_null());
}

TEST(Summarize, CountsTheRunsThatFoundTheirRolesOverTheRunsExpectingThemAndSaysNAWithout) {
  // The repro's lr 0.001 runs: 94.8% and 97.7% accuracy, roles found, not specialized.
  std::vector<SweepRun> runs = {done_run(2, 0, 0.977, false, {}), done_run(2, 1, 0.948, false, {}),
                                done_run(4, 0, 1.0, true, {}), done_run(4, 1, 1.0, false, {}),
                                done_run(1, 0, 1.0, false, {})};
  runs[0].roles_found = runs[1].roles_found = runs[2].roles_found = true;
  runs[3].roles_found = false;  // h1: the task expects no roles
  const std::vector<ConfigSummary> s = summarize(runs, head_cells({2, 4, 1}), 0.9);
  EXPECT_EQ(s[0].specialized, 0);
  EXPECT_EQ(s[0].runs_expecting_roles, 2);
  EXPECT_EQ(s[0].roles_found, 2);
  EXPECT_EQ(s[0].roles_found_share(), 1.0);
  EXPECT_NEAR(s[0].roles_found_interval()->lo, 0.3424, 1e-4);  // 2 of 2
  EXPECT_EQ(s[1].roles_found, 1);
  EXPECT_EQ(s[1].roles_found_share(), 0.5);
  EXPECT_EQ(s[2].runs, 1);
  EXPECT_EQ(s[2].runs_expecting_roles, 0);
  EXPECT_FALSE(s[2].roles_found_share()) << "n/a, not 0%";
  EXPECT_FALSE(s[2].roles_found_interval());

  const std::string text = summary_text(s, 0.9);
  EXPECT_NE(text.find("heads  runs  failed  acc >= 90.0%             specialized              roles found              s/run"),
            std::string::npos) << text;
  // 2 of 2 reached 90% and found their roles; none specialized.
  EXPECT_NE(text.find("    2     2       0      2 (100%) [34-100%]       0 (0%)   [0-66%]         2 (100%) [34-100%]     2.0"),
            std::string::npos) << text;
  EXPECT_NE(text.find("1 (50%)  [9-91%]"), std::string::npos) << text;
  EXPECT_NE(text.find("    1     1       0      1 (100%) [21-100%]       0 (0%)   [0-79%]       n/a                      2.0"),
            std::string::npos) << text;
  EXPECT_NE(text.find("roles found: the runs whose verdict found every role"), std::string::npos) << text;

  const nlohmann::json c = config_json(s[0]);
  EXPECT_EQ(c["runs_expecting_roles"], 2);
  EXPECT_EQ(c["roles_found"], 2);
  EXPECT_EQ(c["roles_found_share"], 1.0);
  EXPECT_EQ(c["roles_found_ci"], nlohmann::json({0.3424, 1.0}));
  const nlohmann::json none = config_json(s[2]);
  EXPECT_EQ(none["runs_expecting_roles"], 0);
  EXPECT_TRUE(none["roles_found_share"].is_null());
  EXPECT_TRUE(none["roles_found_ci"].is_null());
  // And per value of a varied flag (here heads), with the same keys.
  const std::vector<nlohmann::json> heads = {2, 1};
  const nlohmann::json flag = flag_json(summarize_flag(runs, "heads", heads, 0.9));
  EXPECT_EQ(flag["values"][0]["roles_found_share"], 1.0);
  EXPECT_EQ(flag["values"][0]["roles_found_ci"], nlohmann::json({0.3424, 1.0}));
  EXPECT_TRUE(flag["values"][1]["roles_found_share"].is_null());

  // A sweep whose task expects no roles at all says so once.
  const std::vector<ConfigSummary> only_none = summarize(runs, head_cells({1}), 0.9);
  EXPECT_NE(summary_text(only_none, 0.9).find("roles found: n/a, the runs' task expects no roles"), std::string::npos);
}

// A configuration none of whose runs finished has no share to show in any
// column (QA25: "0 (0%) [0-100%]" beside "none finished"): each rate says
// "none finished", the mean time and the labels "-"; and it cannot say
// whether its task expects roles: not the n/a of a task that expects none.
TEST(Summarize, AConfigurationWithoutAFinishedRunSaysNoneFinishedInEveryRate) {
  SweepRun stopped;
  stopped.heads = 2;
  stopped.status = RunStatus::interrupted;
  const std::vector<SweepRun> runs = {stopped, done_run(1, 0, 1.0, true, {})};
  const std::string text = summary_text(summarize(runs, head_cells({2, 1}), 0.9), 0.9);
  // The table's row of a head count ("    2  ...").
  const auto row_of = [&](const std::string& heads) {
    const std::size_t at = text.find("\n    " + heads + "  ") + 1;
    return at == 0 ? std::string() : text.substr(at, text.find('\n', at) - at);
  };
  const std::string none = "  none finished        ";  // a rate's 23 characters
  EXPECT_EQ(row_of("2"), "    2     0       0  " + none + "  " + none + "  " + none + "      -  -") << text;
  EXPECT_EQ(text.find("(0%)"), std::string::npos) << text;
  EXPECT_EQ(text.find("[0-100%]"), std::string::npos) << text;
  // The finished configuration's columns start where the other's do.
  EXPECT_EQ(row_of("1").substr(0, 21 + 23 + 2), "    1     1       0      1 (100%) [21-100%]   ") << text;
  // sweep.json says the same: no share and no interval, not 0 and [0, 1].
  const std::vector<ConfigSummary> configs = summarize(runs, head_cells({2, 1}), 0.9);
  const nlohmann::json stopped_json = config_json(configs[0]), finished_json = config_json(configs[1]);
  EXPECT_EQ(stopped_json["runs"], 0);
  for (const char* key : {"specialized_share", "specialized_ci", "reached_target_share", "reached_target_ci",
                          "roles_found_share", "roles_found_ci"})
    EXPECT_TRUE(stopped_json[key].is_null()) << key << ": " << stopped_json[key];
  EXPECT_EQ(finished_json["reached_target_share"], 1.0);
  EXPECT_TRUE(finished_json["specialized_ci"].is_array());
}

TEST(RunLine, SaysWhyARunFailed) {
  SweepRun r;
  r.heads = 1;
  r.seed = 2;
  r.status = RunStatus::failed;
  r.error = "exit status 1: boom";
  EXPECT_EQ(run_line(r), "h1 s2: failed: exit status 1: boom (0.0 s)");
}

TEST(ReachedTarget, CountsAnAccuracyEqualToTheTargetAndNeverAFailedRun) {
  EXPECT_TRUE(reached_target(done_run(2, 0, 0.99, true, {}), 0.99));
  EXPECT_FALSE(reached_target(done_run(2, 0, 0.9899, true, {}), 0.99));
  SweepRun failed = done_run(2, 0, 1.0, true, {});
  failed.status = RunStatus::failed;
  EXPECT_FALSE(reached_target(failed, 0.99));
}

TEST(Summarize, CountsRunsSharesAndLabelsPerHeadCount) {
  std::vector<SweepRun> runs = {
      done_run(2, 0, 1.0, true,
               {head("L0H0", Label::pattern("previous-token"), 0.96, 0.96, 0.01),
                head("L0H1", Label::pattern("first-token"), 0.80, 0.10, 0.80)}),
      done_run(2, 1, 1.0, true,
               {head("L0H0", Label::pattern("first-token"), 0.90, 0.02, 0.90),
                head("L0H1", Label::pattern("previous-token"), 0.94, 0.94, 0.03)}),
      done_run(2, 2, 0.5, false,
               {head("L0H0", Label::mixed(), 0.5, 0.5, 0.4), head("L0H1", Label::mixed(), 0.6, 0.3, 0.6)}),
      done_run(1, 0, 1.0, false, {head("L0H0", Label::mixed(), 0.55, 0.45, 0.55)}),
  };
  SweepRun failed = done_run(2, 3, 0, false, {});
  failed.status = RunStatus::failed;
  runs.push_back(failed);
  SweepRun stopped = done_run(2, 4, 0, false, {});
  stopped.status = RunStatus::interrupted;
  runs.push_back(stopped);

  const std::vector<ConfigSummary> s = summarize(runs, head_cells({1, 2, 4}), 0.99);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].heads, 2);
  EXPECT_EQ(s[1].runs, 3);  // failed and interrupted runs are not in the denominator
  EXPECT_EQ(s[1].failed, 1);
  EXPECT_EQ(s[1].interrupted, 1);
  EXPECT_EQ(s[1].reached_target, 2);
  EXPECT_EQ(s[1].specialized, 2);
  EXPECT_DOUBLE_EQ(s[1].specialized_share(), 2.0 / 3.0);
  EXPECT_EQ(s[1].labels.at(Label::pattern("previous-token")).heads, 2);
  EXPECT_DOUBLE_EQ(s[1].labels.at(Label::pattern("previous-token")).score, 0.95);
  EXPECT_EQ(s[1].labels.at(Label::pattern("first-token")).heads, 2);
  EXPECT_DOUBLE_EQ(s[1].labels.at(Label::pattern("first-token")).score, 0.85);
  EXPECT_EQ(s[1].labels.at(Label::mixed()).heads, 2);
  EXPECT_EQ(s[1].labels.at(Label::sink()).heads, 0);
  EXPECT_DOUBLE_EQ(s[1].mean_seconds, 2.0);

  EXPECT_EQ(s[0].runs, 1);
  EXPECT_EQ(s[0].specialized, 0);
  EXPECT_DOUBLE_EQ(s[0].labels.at(Label::mixed()).scores.at("first-token"), 0.55);
  EXPECT_EQ(s[2].runs, 0);  // no runs with 4 heads: zero shares, no division by zero
  EXPECT_EQ(s[2].reached_share(), 0.0);
  const Interval ci = s[1].specialized_interval();  // 2 of 3
  EXPECT_NEAR(ci.lo, 0.2077, 1e-4);
  EXPECT_NEAR(ci.hi, 0.9385, 1e-4);
  EXPECT_EQ(s[0].specialized_interval().lo, 0.0);  // 0 of 1
  EXPECT_NEAR(s[0].specialized_interval().hi, 0.7935, 1e-4);
  EXPECT_EQ(s[2].specialized_interval().lo, 0.0);  // no runs: nothing known
  EXPECT_EQ(s[2].specialized_interval().hi, 1.0);

  const std::string text = summary_text(s, 0.99);
  EXPECT_NE(text.find("acc >= 99.0%"), std::string::npos) << text;
  // 2 of 3 reached the target and 2 of 3 specialized: Wilson 95% [21%, 94%].
  EXPECT_NE(text.find("    2 (67%)  [21-94%]        2 (67%)  [21-94%]"), std::string::npos) << text;
  EXPECT_NE(text.find("    1 (100%) [21-100%]       0 (0%)   [0-79%]"), std::string::npos) << text;
  EXPECT_NE(text.find("[lo-hi%]: the Wilson 95% interval"), std::string::npos) << text;
  EXPECT_NE(text.find("previous-token 2, first-token 2, mixed 2"), std::string::npos) << text;
  EXPECT_NE(text.find("h2   previous-token      2 heads  top 0.95"), std::string::npos) << text;
  EXPECT_NE(text.find("(1 run(s) stopped by a signal are not counted)"), std::string::npos) << text;
}

TEST(SweepJson, HoldsEveryLabelAndTheSharesPerHeadCount) {
  const std::vector<SweepRun> runs = {done_run(1, 0, 1.0, true, {head("L0H0", Label::pattern("previous-token"), 0.9, 0.9, 0.1)})};
  const nlohmann::json c = config_json(summarize(runs, head_cells({1}), 0.99)[0]);
  EXPECT_EQ(c["runs"], 1);
  EXPECT_EQ(c["specialized_share"], 1.0);
  EXPECT_EQ(c["labels"].size(), analysis::all_labels().size());  // the table's patterns, diffuse, mixed, sink
  EXPECT_EQ(c["labels"]["previous-token"]["heads"], 1);
  EXPECT_EQ(c["labels"]["mixed"]["heads"], 0);
  EXPECT_EQ(c["specialized_ci"], nlohmann::json({0.2065, 1.0}));  // 1 of 1
  EXPECT_EQ(c["reached_target_ci"], nlohmann::json({0.2065, 1.0}));

  const nlohmann::json r = run_json(runs[0], 0.99);
  EXPECT_EQ(r["dir"], "h1-s0");
  EXPECT_EQ(r["status"], "done");
  EXPECT_EQ(r["reached_target"], true);
  EXPECT_EQ(r["head_results"][0]["label"], "previous-token");
  EXPECT_TRUE(r["specialized_step"].is_null());  // no history recorded
  EXPECT_TRUE(r["head_results"][0]["emerged"].is_null());
  SweepRun failed = runs[0];
  failed.status = RunStatus::failed;
  failed.accuracy.reset();
  EXPECT_TRUE(run_json(failed, 0.99)["accuracy"].is_null());
}

// A metrics.jsonl line that analyzed: each head's scores and the verdict.
nlohmann::json analysis_line(int64_t step, double prev0, double first1, bool specialized) {
  return {{"step", step},
          {"heads", {{"L0H0", {{"previous_token", prev0}}}, {"L0H1", {{"first_token", first1}}}}},
          {"specialized", specialized}};
}

TEST(RecordHistory, TakesTheStepFromWhichEachPatternAndTheVerdictStayed) {
  SweepRun r = done_run(2, 0, 1.0, true,
                        {head("L0H0", Label::pattern("previous-token"), 0.9, 0.9, 0.0),
                         head("L0H1", Label::pattern("first-token"), 0.8, 0.0, 0.8)});
  r.head_results.push_back(head("L0H2", Label::mixed(), 0.5, 0.5, 0.4));
  const std::vector<nlohmann::json> history = {
      {{"step", 50}, {"loss", 2.0}},  // a log line without analysis counts for nothing
      analysis_line(100, 0.6, 0.2, false),
      analysis_line(200, 0.4, 0.6, true),  // L0H0 dips below 0.5: its emergence starts again
      analysis_line(300, 0.7, 0.7, false),
      analysis_line(400, 0.9, 0.8, true),
      analysis_line(500, 0.95, 0.8, true),
  };
  record_history(r, history, analysis::RunAnalysis{});
  EXPECT_EQ(r.head_results[0].emerged, 300);
  EXPECT_EQ(r.head_results[1].emerged, 200);
  EXPECT_FALSE(r.head_results[2].emerged) << "a head without a pattern label has no emergence step";
  EXPECT_EQ(r.specialized_step, 400);
  const nlohmann::json j = run_json(r, 0.99);
  EXPECT_EQ(j["specialized_step"], 400);
  EXPECT_EQ(j["head_results"][0]["emerged"], 300);
  EXPECT_TRUE(j["head_results"][2]["emerged"].is_null());

  // Ending unspecialized, or without any analysis, leaves the steps absent.
  record_history(r, {analysis_line(100, 0.9, 0.9, true), analysis_line(200, 0.9, 0.2, false)}, analysis::RunAnalysis{});
  EXPECT_FALSE(r.specialized_step);
  EXPECT_FALSE(r.head_results[1].emerged);
  EXPECT_EQ(r.head_results[0].emerged, 100);
  record_history(r, {{{"step", 600}, {"loss", 0.1}}}, analysis::RunAnalysis{});
  EXPECT_FALSE(r.specialized_step);
  EXPECT_FALSE(r.head_results[0].emerged);
}

// A last step off the --analyze-every grid leaves no metrics line of the final
// analysis: its verdict (heads.json's, of its step) is the last point, so a
// run specialized only there is so from that step, and a run that ended
// unspecialized has no step although its last grid analysis said specialized.
TEST(RecordHistory, TheFinalAnalysisOffTheGridIsTheVerdictsLastPoint) {
  SweepRun r = done_run(2, 0, 1.0, true,
                        {head("L0H0", Label::pattern("previous-token"), 0.9, 0.9, 0.0),
                         head("L0H1", Label::pattern("first-token"), 0.8, 0.0, 0.8)});
  const std::vector<nlohmann::json> history = {analysis_line(100, 0.6, 0.2, false),
                                               analysis_line(200, 0.7, 0.6, false)};
  analysis::RunAnalysis heads;
  heads.step = 290;
  heads.verdict.specialized = true;
  record_history(r, history, heads);
  EXPECT_EQ(r.specialized_step, 290);
  heads.verdict.specialized = false;
  record_history(r, {analysis_line(100, 0.6, 0.6, true), analysis_line(200, 0.7, 0.6, true)}, heads);
  EXPECT_FALSE(r.specialized_step) << "the run ended unspecialized";
  heads.step = 200;  // the final analysis is the history's last line
  record_history(r, {analysis_line(100, 0.6, 0.6, true), analysis_line(200, 0.7, 0.6, true)}, heads);
  EXPECT_EQ(r.specialized_step, 100);
  heads.step = 290;  // no analysis in the history (--analyze-every 0): none
  heads.verdict.specialized = true;
  record_history(r, {}, heads);
  EXPECT_FALSE(r.specialized_step);
}

// The emergence strip follows the labels' rule: where uniform attention
// already scores 0.5 on first-token (the run's chance scores), a head's
// first-token score emerges once it reaches 0.5 + the margin, not 0.5.
TEST(RecordHistory, APatternEmergesAtTheScoreAtWhichItLabelsOnTheRunsSet) {
  SweepRun r = done_run(2, 0, 1.0, true,
                        {head("L0H0", Label::pattern("previous-token"), 0.9, 0.9, 0.0),
                         head("L0H1", Label::pattern("first-token"), 0.8, 0.0, 0.8)});
  const std::vector<nlohmann::json> history = {analysis_line(100, 0.6, 0.55, false),
                                               analysis_line(200, 0.7, 0.7, true),
                                               analysis_line(300, 0.9, 0.8, true)};
  analysis::RunAnalysis heads;
  heads.chance.emplace();
  (*heads.chance)["first-token"] = 0.5;
  record_history(r, history, heads);
  EXPECT_EQ(r.head_results[0].emerged, 100) << "previous-token has no chance score here: the threshold";
  EXPECT_EQ(r.head_results[1].emerged, 200) << "0.55 does not beat the chance score 0.5 by the margin";
  record_history(r, history, analysis::RunAnalysis{});
  EXPECT_EQ(r.head_results[1].emerged, 100) << "a heads.json without chance scores: the threshold";
}

}  // namespace
}  // namespace headlab::train
