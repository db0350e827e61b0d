#include "analysis/html_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "analysis/heads_json.h"
#include "analysis/html_page.h"
#include "analysis/report_assets.h"

namespace headlab::analysis {
namespace {

double round4(double v) { return std::round(v * 1e4) / 1e4; }

// The example's attention cut to the first `n` positions and rounded, as
// nested [layer][head][q][k] rows: the page does not need more.
nlohmann::json example_maps(const AttentionExample& ex, int64_t n) {
  const int64_t len = ex.length();
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& layer : ex.attention) {
    nlohmann::json maps = nlohmann::json::array();
    for (const std::vector<double>& map : layer) {
      nlohmann::json rows = nlohmann::json::array();
      for (int64_t q = 0; q < n && (q + 1) * len <= static_cast<int64_t>(map.size()); ++q) {
        nlohmann::json row = nlohmann::json::array();
        for (int64_t k = 0; k < n; ++k) row.push_back(round4(map[static_cast<std::size_t>(q * len + k)]));
        rows.push_back(std::move(row));
      }
      maps.push_back(std::move(rows));
    }
    layers.push_back(std::move(maps));
  }
  return layers;
}

// How a title names a source: a task by its name, a data file ("data:PATH")
// by its file name, a pipe's (/dev/fd/63, which says nothing of what it held:
// heads.json's data_file does) as "pipe".
std::string source_name(const std::string& source) {
  if (!source.starts_with("data:")) return source;
  const std::string path = source.substr(5);
  if (path.starts_with("/dev/fd/") || path.starts_with("/proc/self/fd/")) return "pipe";
  return std::filesystem::path(path).filename().string();
}

// Names what the run trained on (its config: its data file, else its task)
// and, when the analysis read something else (analyze --data or --task),
// that: "analyzed on probe.jsonl".
std::string page_title(const RunAnalysis& run, const nlohmann::json& config, const ReportOptions& options) {
  if (!options.title.empty()) return options.title;
  std::string title = options.run_name;
  const auto text_of = [&](const char* key) {
    return config.is_object() && config.contains(key) && config.at(key).is_string() ? config.at(key).get<std::string>()
                                                                                   : std::string();
  };
  // A --data run's config keeps the unused default task beside its file.
  const std::string data = text_of("data");
  const std::string trained = !data.empty() ? "data:" + data : text_of("task");
  const bool elsewhere = !trained.empty() && !run.analyzed.empty() && run.analyzed != trained;
  const std::string source = elsewhere ? "analyzed on " + source_name(run.analyzed)
                                       : source_name(!trained.empty() ? trained : run.analyzed);
  if (!source.empty()) title += (title.empty() ? "" : " · ") + source;
  return title + (title.empty() ? "headlab report" : " · headlab");
}

// What the page draws, in one document.
nlohmann::json page_data(const RunAnalysis& run, const std::vector<nlohmann::json>& history,
                         const nlohmann::json& config, const ReportOptions& options) {
  const int64_t shown = std::min<int64_t>(run.example.length(), std::max<int64_t>(1, options.max_positions));
  nlohmann::json r = run;
  r["example"]["attention"] = example_maps(run.example, shown);
  // The page reads every pattern's score from a head's "scores" by key: the
  // user patterns' join the built-in ones there.
  nlohmann::json patterns = patterns_json();
  for (const PatternInfo& p : run.user_patterns) {
    std::string definition = p.definition.empty() ? "a user-defined pattern." : p.definition;
    // Why a head may carry its label below a built-in score (docs/head-metrics.md, "Nested patterns").
    for (std::size_t i = 0; i < p.nests_with.size(); ++i)
      definition += (i == 0 ? " Nested on this set with " : ", ") + p.nests_with[i] +
                    (i + 1 == p.nests_with.size() ? ", from which it may take the label within the margin." : "");
    patterns.push_back({{"key", p.name},
                        {"name", p.name},
                        {"short_name", p.name},
                        {"colour", user_html_colour(p.name)},
                        {"definition", definition}});
  }
  for (nlohmann::json& h : r["heads"])
    for (const auto& [name, score] : h["scores"]["user"].items()) h["scores"][name] = score;

  nlohmann::json extra = nlohmann::json::array();
  for (const HeadAnalysis& h : run.heads) {
    // The label's pattern: a user pattern nested with a higher one keeps its own.
    const Label pattern = h.label.is_pattern() ? h.label : ranked_patterns(h.scores)[0].pattern;
    const std::string name = head_name(h.layer, h.head);
    const std::string key = label_key(pattern);
    // At the score that labels: uniform attention's 2/3 on modular-addition's operands is no emergence.
    const auto emerged = pattern_emergence_step(history, name, pattern, run, options.labels);
    nlohmann::json task_emerged = nlohmann::json::object();
    for (const char* task_key : {"task_induction", "task_previous_token"}) {
      const auto step = emergence_step(history, name, task_key, options.labels.score_threshold);
      task_emerged[task_key] = step ? nlohmann::json(*step) : nlohmann::json();
    }
    extra.push_back({{"name", name},
                     {"pattern", key},
                     {"pattern_label", label_name(pattern)},
                     {"emerged", emerged ? nlohmann::json(*emerged) : nlohmann::json()},
                     {"task_emerged", std::move(task_emerged)}});
  }
  nlohmann::json snapshots = nlohmann::json::array();
  for (const SnapshotView& v : options.snapshots)
    if (v.example.tokens == run.example.tokens)  // the same example, or the slider would mislead
      snapshots.push_back({{"step", v.step}, {"attention", example_maps(v.example, shown)}, {"labels", v.labels}});
  const LabelOptions& l = options.labels;
  const std::optional<int64_t> drop = loss_drop_step(history);
  return {{"title", page_title(run, config, options)},
          {"patterns", std::move(patterns)},
          {"run", std::move(r)},
          {"heads_extra", std::move(extra)},
          {"loss_drop_step", drop ? nlohmann::json(*drop) : nlohmann::json()},
          {"history", history},
          {"snapshots", std::move(snapshots)},
          {"config", config.is_null() ? nlohmann::json::object() : config},
          {"options",
           {{"score_threshold", l.score_threshold},
            {"margin", l.margin},
            {"diffuse_entropy", l.diffuse_entropy},
            {"sink_max_delta_loss", l.sink_max_delta_loss},
            {"min_distinct_labels", l.min_distinct_labels},
            {"min_js", l.min_js},
            {"min_ablation_acc_drop", l.min_ablation_acc_drop},
            {"max_positions", shown}}}};
}

}  // namespace

std::optional<int64_t> last_record_step(const std::vector<nlohmann::json>& history, const std::string& head,
                                        const std::string& pattern) {
  std::optional<int64_t> last;
  for (const nlohmann::json& line : history) {
    if (!line.is_object() || !line.contains("heads") || !line.contains("step") || !line.at("step").is_number()) continue;
    const nlohmann::json& heads = line.at("heads");
    if (heads.is_object() && heads.contains(head) && heads.at(head).is_object() && heads.at(head).contains(pattern) &&
        heads.at(head).at(pattern).is_number())
      last = line.at("step").get<int64_t>();
  }
  return last;
}

std::optional<int64_t> emergence_step(const std::vector<nlohmann::json>& history, const std::string& head,
                                      const std::string& pattern, double threshold) {
  std::optional<int64_t> since;
  for (const nlohmann::json& line : history) {
    if (!line.is_object() || !line.contains("heads") || !line.contains("step")) continue;
    const nlohmann::json& heads = line.at("heads");
    if (!heads.is_object() || !heads.contains(head) || !heads.at(head).is_object()) continue;
    const nlohmann::json& h = heads.at(head);
    if (!h.contains(pattern) || !h.at(pattern).is_number() || !line.at("step").is_number()) continue;
    if (h.at(pattern).get<double>() >= threshold) {
      if (!since) since = line.at("step").get<int64_t>();
    } else {
      since.reset();
    }
  }
  return since;
}

std::vector<std::optional<int64_t>> label_emergence_steps(const std::vector<nlohmann::json>& history,
                                                          const RunAnalysis& run, const LabelOptions& options) {
  std::vector<std::optional<int64_t>> steps;
  for (const HeadAnalysis& h : run.heads)
    steps.push_back(h.label.is_pattern()
                        ? pattern_emergence_step(history, head_name(h.layer, h.head), h.label, run, options)
                        : std::nullopt);
  return steps;
}

std::vector<std::optional<int64_t>> logged_emergence_steps(const std::vector<nlohmann::json>& history,
                                                           const RunAnalysis& run) {
  const bool logged = std::any_of(history.begin(), history.end(),
                                  [](const nlohmann::json& line) { return line.is_object() && line.contains("heads"); });
  return logged ? label_emergence_steps(history, run) : std::vector<std::optional<int64_t>>{};
}

std::optional<int64_t> pattern_emergence_step(const std::vector<nlohmann::json>& history, const std::string& head,
                                              const Label& pattern, const RunAnalysis& run,
                                              const LabelOptions& options) {
  const std::string key = label_key(pattern);
  const double threshold = label_threshold(pattern, label_set(run), options);
  std::optional<int64_t> since = emergence_step(history, head, key, threshold);
  // The run's final analysis is an analyzed step too, but a last step off the
  // --analyze-every grid has no line of it in metrics.jsonl: it counts after
  // the history's last record of the head (when there is one: a single
  // analysis shows no emergence).
  const std::optional<int64_t> last = last_record_step(history, head, key);
  if (!last || !run.step || *run.step <= *last) return since;
  for (const HeadAnalysis& h : run.heads) {
    if (head_name(h.layer, h.head) != head) continue;
    if (label_score(h.scores, pattern) >= threshold) return since ? since : run.step;
    return std::nullopt;
  }
  return since;
}

std::optional<int64_t> loss_drop_step(const std::vector<nlohmann::json>& history, double min_drop) {
  std::vector<std::pair<int64_t, double>> points;
  for (const nlohmann::json& line : history) {
    if (!line.is_object() || !line.contains("step") || !line.at("step").is_number()) continue;
    const char* key = line.contains("eval_loss") ? "eval_loss" : "loss";
    if (line.contains(key) && line.at(key).is_number())
      points.emplace_back(line.at("step").get<int64_t>(), line.at(key).get<double>());
  }
  if (points.empty()) return std::nullopt;
  double lowest = points.front().second;
  for (const auto& [step, loss] : points) lowest = std::min(lowest, loss);
  const double first = points.front().second;
  if (!(first - lowest >= min_drop)) return std::nullopt;
  for (const auto& [step, loss] : points)
    if (loss <= first - (first - lowest) / 2) return step;
  return std::nullopt;
}

std::string report_html(const RunAnalysis& run, const std::vector<nlohmann::json>& history,
                        const nlohmann::json& config, const ReportOptions& options) {
  // Without JavaScript the page still states the verdict.
  const std::string title = page_title(run, config, options);
  std::string noscript = "<h1>" + html_escape(title) + "</h1>\n<p><strong>" +
                         std::string(run.verdict.specialized  ? "Heads specialized"
                                     : run.verdict.roles_found ? "Every expected role found"
                                                               : "Heads did not specialize") +
                         "</strong></p>\n<ul>\n";
  for (const std::string& reason : run.verdict.reasons) noscript += "<li>" + html_escape(reason) + "</li>\n";
  noscript += "</ul>\n";
  return html_page(title, kReportCss, noscript, script_json(page_data(run, history, config, options)),
                   std::string(kReportJs) + std::string(kSnapshotsJs));
}

}  // namespace headlab::analysis
