// `headlab sweep`: what is measured across many training runs of one task --
// the seed and head-count lists it takes, each run's result as read from its
// heads.json, the aggregates per configuration (a cell of the grid,
// train/sweep_grid.h) and per value of each varied flag, and sweep.json.
//
// Launching the runs (one `headlab train` process each) is
// train/sweep_supervisor.h's job; everything here is plain data and arithmetic.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/run_analysis.h"
#include "train/wilson.h"

namespace headlab::train {

using analysis::Label;

// "0-9", "0,3,5-7", "2": comma-separated numbers and inclusive ranges, in the
// order given. A UsageError names `flag` and the offending text when the list
// is empty, an item is not a number, a range runs backwards, a value is below
// `min_value`, a value repeats, or the list expands to more than `max_items`.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag, int64_t min_value,
                                    std::size_t max_items = 10000);

// One head of a finished run.
struct SweepHead {
  std::string name;  // "L0H1"
  Label label = Label::mixed();
  double score = 0;  // the top pattern score (for a pattern label, that pattern's)
  // By pattern name, the patterns of analysis::kPatterns marked in_sweep.
  std::map<std::string, double, std::less<>> scores;
  // For a head with a pattern label: the logged step from which that
  // pattern's score stayed at or above the label threshold (record_history).
  std::optional<int64_t> emerged;
  // The user pattern (a data file's "attend") this head scores highest on,
  // and that score: what a data run's unlabelled head comes nearest to, in
  // its run's line. Empty without user patterns; not in sweep.json.
  std::string nearest_user;
  double nearest_user_score = 0;
  // By name, the head's score on each user pattern the run scored (a data
  // file's "attend" patterns): what a data run's summary shows in place of
  // the in_sweep patterns, which its data may not be about.
  std::map<std::string, double, std::less<>> user_scores;
};

// One configuration of the sweep: the values of the varied flags other than
// seed and heads (by flag name, in the plan's order), and the head count.
struct SweepCell {
  nlohmann::ordered_json settings = nlohmann::ordered_json::object();  // {"lr": 0.001, "layers": 2}
  int64_t heads = 0;
  // "lr 0.001, layers 2, h2"; "h2" without settings.
  std::string name() const;
  bool operator==(const SweepCell&) const = default;
};

enum class RunStatus { done, failed, interrupted };
std::string status_name(RunStatus status);  // "done", "failed", "interrupted"

// One training run of the sweep.
struct SweepRun {
  nlohmann::ordered_json settings = nlohmann::ordered_json::object();  // as SweepCell's
  int64_t heads = 0;
  int64_t seed = 0;
  std::string dir;  // the run folder, relative to the sweep folder: "h2-s4", "lr0.001-layers2-h2-s4"
  RunStatus status = RunStatus::failed;
  int exit_code = 0;   // of the `headlab train` process; 128 + signal when killed
  std::string error;   // why a run failed (empty when done)
  double seconds = 0;  // wall time of the process
  // Read from heads.json (status done only):
  std::optional<double> loss, accuracy;
  bool specialized = false;
  // Whether the verdict found every role the run's task expects (heads.json's
  // verdict.roles_found): a run can find its one expected role, the task's
  // goal, and still not be "specialized", which wants two distinct roles.
  // Absent when the analysis expects no roles (first-prev-sum, a data file
  // without attend patterns), whose runs the roles' rate leaves out.
  std::optional<bool> roles_found;
  std::vector<SweepHead> head_results;
  // Read from metrics.jsonl (record_history): the analysed step from which
  // the verdict stayed "specialized" to the end of training.
  std::optional<int64_t> specialized_step;

  SweepCell cell() const { return {settings, heads}; }
};

// The text of a setting's value in names and messages: 0.001, 2, adamw, and
// on or off for a switch (--attn-only true,false).
std::string setting_text(const nlohmann::json& value);

// The name of a run's folder: "h2-s4"; with settings, their flags and values
// first: "lr0.001-layers2-h2-s4" (a switch with a dash: "attn-only-on-h2-s4").
std::string run_dir_name(int64_t heads, int64_t seed);
std::string run_dir_name(const SweepCell& cell, int64_t seed);

// Fills a run's results from its analysis and marks it done. Throws
// std::invalid_argument, changing nothing, when the analysis holds what no
// run can have (an accuracy outside [0, 1], a loss that is negative or not finite).
void record_analysis(SweepRun& run, const analysis::RunAnalysis& analysis);

// Fills the emergence steps from the run's metrics.jsonl lines (after
// record_analysis of `heads`, its heads.json): each pattern-labelled head's
// by the labels' own rule (analysis::pattern_emergence_step: the threshold,
// or the pattern's chance score on the run's set plus the margin where that
// is higher) and the run's specialized_step. Both stay absent when the run
// logged no analysis that shows them (--analyze-every 0).
void record_history(SweepRun& run, const std::vector<nlohmann::json>& history, const analysis::RunAnalysis& heads,
                    const analysis::LabelOptions& options = {});

// "h2 s4: acc 100.0%, specialized, L0H0 previous-token 0.95, L0H1 mixed (prev 0.45, first 0.52) (3.1 s)",
// or the reason a run failed; a head without a pattern shows its in_sweep
// scores. A run whose task expects roles also says "roles found" or "roles not
// found" after the verdict.
std::string run_line(const SweepRun& run);

struct LabelStats {
  int64_t heads = 0;  // heads with this label, over the configuration's runs
  // Means over those heads (0 when there are none): the top score and, by
  // pattern name, the in_sweep pattern scores.
  double score = 0;
  std::map<std::string, double, std::less<>> scores;
  // By name, the user patterns' scores (SweepHead::user_scores), each a mean
  // over the heads that were scored on it.
  std::map<std::string, double, std::less<>> user_scores;
};

// The aggregate of the runs of one configuration (or of one value of a flag).
struct ConfigSummary {
  SweepCell cell;  // a flag's value: settings {flag: value}, heads 0 (or the value, for heads)
  int64_t heads = 0;
  int64_t runs = 0;            // runs that finished with results: the denominator of the shares
  int64_t failed = 0;          // runs that failed
  int64_t interrupted = 0;     // runs stopped by a signal
  int64_t reached_target = 0;  // finished runs whose accuracy >= the target
  int64_t specialized = 0;     // finished runs whose verdict is specialized
  // Finished runs whose task expects roles (SweepRun::roles_found present):
  // the denominator of the roles' share, and of them those that found every role.
  int64_t runs_expecting_roles = 0;
  int64_t roles_found = 0;
  std::map<Label, LabelStats> labels;  // every label, zero counts included
  double mean_seconds = 0;             // over the finished runs

  double reached_share() const;      // reached_target / runs (0 without runs)
  double specialized_share() const;  // specialized / runs (0 without runs)
  // Wilson 95% intervals of the two shares ([0, 1] without runs).
  Interval reached_interval() const;
  Interval specialized_interval() const;
  // roles_found / runs_expecting_roles and its Wilson 95% interval; absent
  // ("n/a", not 0%) when no finished run expects roles.
  std::optional<double> roles_found_share() const;
  std::optional<Interval> roles_found_interval() const;
};

// Whether a run's accuracy reaches the target (a fraction, e.g. 0.99).
bool reached_target(const SweepRun& run, double target_accuracy);

// One summary per cell (in that order) over the runs of that cell.
std::vector<ConfigSummary> summarize(std::span<const SweepRun> runs, std::span<const SweepCell> cells,
                                     double target_accuracy);

// The runs of each value of one varied flag, whatever the other flags' values:
// the rates a chart per flag shows.
struct FlagSummary {
  std::string flag;                  // "lr", or "heads"
  std::vector<ConfigSummary> values;  // per value, in the plan's order; each cell.settings is {flag: value}
};
FlagSummary summarize_flag(std::span<const SweepRun> runs, const std::string& flag,
                           std::span<const nlohmann::json> values, double target_accuracy);

// The table printed at the end of a sweep: per configuration, the runs, the share
// that reached the target, the share that specialized and the share that found
// the task's expected roles ("n/a" when it expects none), each with its Wilson
// 95% interval, and the labels; then the mean scores per label: the user
// patterns' (a data file's "attend") where the runs scored any, else the
// in_sweep patterns' (previous and first token).
std::string summary_text(std::span<const ConfigSummary> configs, double target_accuracy);

// The parts of sweep.json. The whole file (written by the CLI):
//   {"format": "headlab-sweep/1", "task": ..., "seeds": [...], "heads": [...],
//    "target_accuracy": 0.99, "jobs": 2, "seconds": 41.2, "interrupted": false,
//    "config": {the training config shared by every run; seed and heads vary},
//    "runs": [run_json...], "configs": [config_json...]}
// run_json: {"heads", "seed", "dir", "status", "exit_code", "seconds", "error",
//   "loss", "accuracy" (null unless done), "reached_target", "specialized",
//   "roles_found" (null when the run expects no roles), "specialized_step" (or null),
//   "head_results": [{"name", "label", "score", then each in_sweep pattern's key: "previous_token", "first_token",
//   then "user": {each user pattern's name: score} when the run scored any, then "emerged" (or null)}]}
// config_json: {"name", "settings", "heads", "runs", "failed", "interrupted", "reached_target", "reached_target_share",
//   "reached_target_ci": [lo, hi], "specialized", "specialized_share", "specialized_ci": [lo, hi],
//   "runs_expecting_roles", "roles_found", "roles_found_share" and "roles_found_ci" (both null without
//   runs expecting roles), "mean_seconds",
//   "labels": {"previous-token": {"heads", "score", "previous_token", "first_token", and "user": {name: mean
//   score} when the heads were scored on user patterns}, ...}}
// flag_json: {"flag", "values": [config_json with "value"...]}.
// Keys keep the order above (ordered_json).
nlohmann::ordered_json run_json(const SweepRun& run, double target_accuracy);
nlohmann::ordered_json config_json(const ConfigSummary& config);
nlohmann::ordered_json flag_json(const FlagSummary& flag);

}  // namespace headlab::train
