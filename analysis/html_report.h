// report.html: one self-contained page (inline CSS and JS -- the files
// analysis/report/report.css and report.js, embedded at build time -- drawing
// inline SVG, no fonts, scripts or images from anywhere) showing a run's head analysis:
// the verdict, a layer-by-head grid of attention heatmaps on a real example
// (hover for values, click for a large view), metric curves over training with
// the step where each head's pattern emerged, the JS-divergence matrix and the
// head table with ablation. Every chart can be saved as an SVG file.
//
// The page's frame, its data's escaping and the script it shares with
// sweep.html are analysis/html_page.h's; the pattern list (from kPatterns)
// travels with the data, so no string from the run (token labels, config
// values) is ever parsed as HTML.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/html_page.h"  // html_escape, which the report's users call
#include "analysis/labels.h"
#include "analysis/run_analysis.h"

namespace headlab::analysis {

// The attention of the report's example at an earlier step of training (a
// snapshot, train/snapshots.h), and the label each head had then.
struct SnapshotView {
  int64_t step = 0;
  AttentionExample example;
  std::vector<std::string> labels;  // layer-major, one per head
};

struct ReportOptions {
  // The page's title; empty: "<run name> · <task> · headlab", so that two
  // open reports can be told apart.
  std::string title;
  std::string run_name;        // e.g. the run folder's name
  LabelOptions labels;         // the thresholds the report draws and states
  int64_t max_positions = 48;  // heatmaps show at most this many (the first) positions
  // Ascending steps; the page's slider steps each head's map through them
  // (analysis/report/snapshots.js) and the final analysis.
  std::vector<SnapshotView> snapshots;
};

// `history`: metrics.jsonl lines, e.g. {"step", "loss", "accuracy", "lr",
// "heads": {"L0H0": {"label", "score", "previous_token", ...}}} (the "heads"
// object is compact_json(...)["heads"]; lines without it just add to the loss
// and accuracy curves). `config`: the run's config.json (shown as given).
std::string report_html(const RunAnalysis& run, const std::vector<nlohmann::json>& history,
                        const nlohmann::json& config, const ReportOptions& options = {});

// The first logged step from which `head`'s score for `pattern` (a key of the
// compact record, e.g. "previous_token") stays at or above `threshold` in every
// later line that has it; absent if the last such line is below it.
std::optional<int64_t> emergence_step(const std::vector<nlohmann::json>& history, const std::string& head,
                                      const std::string& pattern, double threshold);

// The step of the last line of `history` that records `head`'s score for `pattern`.
std::optional<int64_t> last_record_step(const std::vector<nlohmann::json>& history, const std::string& head,
                                        const std::string& pattern);

// The emergence step of head `head`'s `pattern` by the labels' own rule: emergence_step at
// label_threshold(pattern, label_set(run), options), the score at which that pattern labels a
// head on run's set (its chance score plus the margin where that is above the threshold), with
// run's own analysis (of `run.step`) as the last point when it comes after the history's last
// record of the head (a last step off the --analyze-every grid). The run's report and
// sweep.json's emergence strip both take it.
std::optional<int64_t> pattern_emergence_step(const std::vector<nlohmann::json>& history, const std::string& head,
                                              const Label& pattern, const RunAnalysis& run,
                                              const LabelOptions& options = {});

// Per head of `run`, in its order: the pattern_emergence_step of the head's
// label, none for a head without a pattern label (mixed, diffuse): the
// terminal table's "emerged" column after training (report.html shows the
// same steps, and for unlabelled heads their top pattern's too).
std::vector<std::optional<int64_t>> label_emergence_steps(const std::vector<nlohmann::json>& history,
                                                          const RunAnalysis& run, const LabelOptions& options = {});

// TextOptions::emerged for `run` after training (train's table, analyze
// RUN's): label_emergence_steps when `history` holds a logged analysis, else
// none (no column: a run with --analyze-every 0, a checkpoint file alone).
std::vector<std::optional<int64_t>> logged_emergence_steps(const std::vector<nlohmann::json>& history,
                                                           const RunAnalysis& run);

// The step of the loss drop: the first logged step whose eval loss (the
// training loss on lines without one) is at most halfway from the first
// logged value down to the lowest; absent when the loss never falls by
// `min_drop` nats. With emergence_step, a phase change shows as one event.
std::optional<int64_t> loss_drop_step(const std::vector<nlohmann::json>& history, double min_drop = 0.05);

}  // namespace headlab::analysis
