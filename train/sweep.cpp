#include "train/sweep.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <string_view>

#include "analysis/fixed.h"
#include "analysis/html_report.h"
#include "core/shortest.h"
#include "train/decimal.h"
#include "train/errors.h"

namespace headlab::train {
namespace {

using analysis::fixed;
using analysis::kPatterns;
using analysis::label_name;

// The patterns a sweep reports for every head, in the table's order.
std::vector<const analysis::Pattern*> sweep_patterns() {
  std::vector<const analysis::Pattern*> out;
  for (const analysis::Pattern& p : kPatterns)
    if (p.in_sweep) out.push_back(&p);
  return out;
}

double score_of(const std::map<std::string, double, std::less<>>& scores, std::string_view pattern) {
  const auto it = scores.find(pattern);
  return it == scores.end() ? 0.0 : it->second;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

double rounded(double value, double scale) { return std::round(value * scale) / scale; }


nlohmann::ordered_json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
}

std::string percent(int64_t count, int64_t total) {
  return "(" + fixed(total > 0 ? 100.0 * static_cast<double>(count) / static_cast<double>(total) : 0.0, 0) + "%)";
}

// "[40-89%]": an interval in whole percent.
std::string interval_text(Interval ci) { return "[" + fixed(100 * ci.lo, 0) + "-" + fixed(100 * ci.hi, 0) + "%]"; }

nlohmann::ordered_json interval_json(Interval ci) { return {rounded(ci.lo, 1e4), rounded(ci.hi, 1e4)}; }

// {name: score} at sweep.json's precision: the user patterns' scores.
nlohmann::ordered_json rounded_scores(const std::map<std::string, double, std::less<>>& scores) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [name, score] : scores) out[name] = rounded(score, 1e4);
  return out;
}

nlohmann::ordered_json optional_json(const std::optional<int64_t>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
}

// The first analysed step from which every later analysis says
// "specialized": true; absent if the last one says false or none says
// anything. The run's final analysis (`heads`, its heads.json) is the last
// one when it comes after the history's (a last step off the
// --analyze-every grid, which metrics.jsonl holds no analysis of).
std::optional<int64_t> specialized_since(const std::vector<nlohmann::json>& history,
                                         const analysis::RunAnalysis& heads) {
  std::optional<int64_t> since, last;
  for (const nlohmann::json& line : history) {
    if (!line.is_object() || !line.contains("step") || !line.at("step").is_number_integer()) continue;
    const auto it = line.find("specialized");
    if (it == line.end() || !it->is_boolean()) continue;
    last = line.at("step").get<int64_t>();
    if (it->get<bool>()) {
      if (!since) since = last;
    } else {
      since.reset();
    }
  }
  if (!last || !heads.step || *heads.step <= *last) return since;
  if (!heads.verdict.specialized) return std::nullopt;
  return since ? since : heads.step;
}

// The summary of the runs `belongs` selects.
template <class Pred>
ConfigSummary summarize_where(std::span<const SweepRun> runs, const SweepCell& cell, double target_accuracy,
                              Pred&& belongs) {
  ConfigSummary c;
  c.cell = cell;
  c.heads = cell.heads;
  for (const Label& l : analysis::all_labels()) c.labels[l] = {};
  double seconds = 0;
  std::map<std::pair<Label, std::string>, int64_t> user_heads;  // the heads scored on each user pattern, by label
  for (const SweepRun& r : runs) {
    if (!belongs(r)) continue;
    if (r.status != RunStatus::done) {
      ++(r.status == RunStatus::interrupted ? c.interrupted : c.failed);
      continue;
    }
    ++c.runs;
    seconds += r.seconds;
    if (reached_target(r, target_accuracy)) ++c.reached_target;
    if (r.specialized) ++c.specialized;
    if (r.roles_found) {
      ++c.runs_expecting_roles;
      if (*r.roles_found) ++c.roles_found;
    }
    for (const SweepHead& head : r.head_results) {
      LabelStats& s = c.labels[head.label];
      ++s.heads;
      s.score += head.score;
      for (const analysis::Pattern* p : sweep_patterns()) s.scores[std::string(p->name)] += score_of(head.scores, p->name);
      for (const auto& [name, score] : head.user_scores) {
        s.user_scores[name] += score;
        ++user_heads[{head.label, name}];
      }
    }
  }
  for (auto& [label, s] : c.labels) {
    if (s.heads == 0) continue;
    const auto n = static_cast<double>(s.heads);
    s.score /= n;
    for (auto& [name, total] : s.scores) total /= n;
    for (auto& [name, total] : s.user_scores) total /= static_cast<double>(user_heads[{label, name}]);
  }
  if (c.runs > 0) c.mean_seconds = seconds / static_cast<double>(c.runs);
  return c;
}

}  // namespace

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag, int64_t min_value,
                                    std::size_t max_items) {
  const auto fail = [&](const std::string& why) { throw UsageError(flag + " '" + text + "': " + why); };
  const auto number = [&](std::string_view part) -> int64_t {
    part = trim(part);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (ec == std::errc::result_out_of_range) fail(std::string(part) + " is too large");
    if (std::string why = non_decimal_integer(part); !why.empty()) fail(why);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size())
      fail("'" + std::string(part) + "' is not a whole number (write numbers and ranges, like 0-9 or 0,3,5-7)");
    if (value < min_value)
      fail("every value must be at least " + std::to_string(min_value) + ", got " + std::to_string(value));
    return value;
  };

  if (trim(text).empty()) fail("the list is empty (write numbers and ranges, like 0-9 or 0,3,5-7)");
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  std::string_view rest = text;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    if (item.empty()) fail("an empty item (a comma at an end, or two in a row)");
    if (item.front() == '-')
      fail(std::string(item) + " is negative; every value must be at least " + std::to_string(min_value));
    const std::size_t dash = item.find('-');
    const int64_t lo = number(item.substr(0, dash));
    const int64_t hi = dash == std::string_view::npos ? lo : number(item.substr(dash + 1));
    if (hi < lo)
      fail("the range " + std::string(item) + " runs backwards (write " + std::to_string(hi) + "-" +
           std::to_string(lo) + ")");
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);  // values - 1
    if (span >= max_items - out.size()) fail("more than " + std::to_string(max_items) + " values");
    for (uint64_t i = 0; i <= span; ++i) {
      const int64_t v = lo + static_cast<int64_t>(i);
      if (!seen.insert(v).second) fail(std::to_string(v) + " is listed twice");
      out.push_back(v);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

std::string status_name(RunStatus status) {
  switch (status) {
    case RunStatus::done: return "done";
    case RunStatus::failed: return "failed";
    case RunStatus::interrupted: return "interrupted";
  }
  return "failed";
}

std::string setting_text(const nlohmann::json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "on" : "off";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string run_dir_name(int64_t heads, int64_t seed) {
  return "h" + std::to_string(heads) + "-s" + std::to_string(seed);
}

std::string run_dir_name(const SweepCell& cell, int64_t seed) {
  std::string prefix;
  // "lr0.001", but "attn-only-on": a switch's name ends in a letter, as on and off begin.
  for (const auto& [flag, value] : cell.settings.items())
    prefix += flag + (value.is_boolean() ? "-" : "") + setting_text(value) + "-";
  return prefix + run_dir_name(cell.heads, seed);
}

std::string SweepCell::name() const {
  std::string out;
  for (const auto& [flag, value] : settings.items()) out += flag + " " + setting_text(value) + ", ";
  return out + "h" + std::to_string(heads);
}

void record_analysis(SweepRun& run, const analysis::RunAnalysis& analysis) {
  if (analysis.accuracy && !(*analysis.accuracy >= 0 && *analysis.accuracy <= 1))
    throw std::invalid_argument("accuracy " + core::shortest(*analysis.accuracy) + " is not a fraction in [0, 1]");
  if (analysis.loss && (!(*analysis.loss >= 0) || !std::isfinite(*analysis.loss)))
    throw std::invalid_argument("loss " + core::shortest(*analysis.loss) + " is not a finite number >= 0");
  run.status = RunStatus::done;
  run.error.clear();
  run.loss = analysis.loss;
  run.accuracy = analysis.accuracy;
  run.specialized = analysis.verdict.specialized;
  run.roles_found = analysis.expected_roles.empty() ? std::nullopt : std::optional<bool>(analysis.verdict.roles_found);
  run.head_results.clear();
  for (const analysis::HeadAnalysis& h : analysis.heads) {
    SweepHead head{analysis::head_name(h.layer, h.head), h.label, analysis::label_score(h.scores, h.label), {}, std::nullopt,
                   "", 0.0, {}};
    for (const analysis::Pattern* p : sweep_patterns()) head.scores[std::string(p->name)] = h.scores[p->name].value_or(0.0);
    for (const analysis::UserScore& u : h.scores.user) {
      if (u.score) head.user_scores[u.name] = *u.score;
      if (u.score && (head.nearest_user.empty() || *u.score > head.nearest_user_score)) {
        head.nearest_user = u.name;
        head.nearest_user_score = *u.score;
      }
    }
    run.head_results.push_back(std::move(head));
  }
}

void record_history(SweepRun& run, const std::vector<nlohmann::json>& history, const analysis::RunAnalysis& heads,
                    const analysis::LabelOptions& options) {
  run.specialized_step = specialized_since(history, heads);
  for (SweepHead& h : run.head_results)
    h.emerged = h.label.is_pattern() ? analysis::pattern_emergence_step(history, h.name, h.label, heads, options)
                                     : std::nullopt;
}

bool reached_target(const SweepRun& run, double target_accuracy) {
  // Accuracy is a ratio of counts; the slack keeps 0.99 from missing 0.99.
  return run.status == RunStatus::done && run.accuracy && *run.accuracy >= target_accuracy - 1e-9;
}

std::string run_line(const SweepRun& run) {
  std::string line = run.cell().name() + " s" + std::to_string(run.seed) + ": ";
  const std::string time = " (" + fixed(run.seconds, 1) + " s)";
  if (run.status == RunStatus::interrupted) return line + "interrupted" + time;
  if (run.status == RunStatus::failed) return line + "failed: " + run.error + time;
  line += "acc " + (run.accuracy ? fixed(100 * *run.accuracy, 1) + "%" : std::string("-"));
  line += run.specialized ? ", specialized" : ", not specialized";
  if (run.roles_found) line += *run.roles_found ? ", roles found" : ", roles not found";
  for (const SweepHead& h : run.head_results) {
    line += ", " + h.name + " " + label_name(h.label);
    if (h.label.is_pattern() || h.label == Label::sink()) {
      line += " " + fixed(h.score, 2);
      continue;
    }
    // A data run's own pattern first: "(marker-prev 0.42, prev 0.04, first 0.27)".
    std::string scores = h.nearest_user.empty() ? "" : h.nearest_user + " " + fixed(h.nearest_user_score, 2);
    for (const analysis::Pattern* p : sweep_patterns())
      scores += (scores.empty() ? "" : ", ") + std::string(p->short_name) + " " + fixed(score_of(h.scores, p->name), 2);
    line += " (" + scores + ")";
  }
  return line + time;
}

double ConfigSummary::reached_share() const {
  return runs > 0 ? static_cast<double>(reached_target) / static_cast<double>(runs) : 0.0;
}

double ConfigSummary::specialized_share() const {
  return runs > 0 ? static_cast<double>(specialized) / static_cast<double>(runs) : 0.0;
}

Interval ConfigSummary::reached_interval() const { return wilson_interval(reached_target, runs); }
Interval ConfigSummary::specialized_interval() const { return wilson_interval(specialized, runs); }

std::optional<double> ConfigSummary::roles_found_share() const {
  if (runs_expecting_roles == 0) return std::nullopt;
  return static_cast<double>(roles_found) / static_cast<double>(runs_expecting_roles);
}

std::optional<Interval> ConfigSummary::roles_found_interval() const {
  if (runs_expecting_roles == 0) return std::nullopt;
  return wilson_interval(roles_found, runs_expecting_roles);
}

std::vector<ConfigSummary> summarize(std::span<const SweepRun> runs, std::span<const SweepCell> cells,
                                     double target_accuracy) {
  std::vector<ConfigSummary> out;
  for (const SweepCell& cell : cells)
    out.push_back(summarize_where(runs, cell, target_accuracy, [&](const SweepRun& r) { return r.cell() == cell; }));
  return out;
}

FlagSummary summarize_flag(std::span<const SweepRun> runs, const std::string& flag,
                           std::span<const nlohmann::json> values, double target_accuracy) {
  FlagSummary out{flag, {}};
  for (const nlohmann::json& value : values) {
    SweepCell cell;
    cell.settings[flag] = value;
    if (flag == "heads") cell.heads = value.get<int64_t>();
    out.values.push_back(summarize_where(runs, cell, target_accuracy, [&](const SweepRun& r) {
      if (flag == "heads") return r.heads == cell.heads;
      const auto it = r.settings.find(flag);
      return it != r.settings.end() && it->dump() == value.dump();  // an ordered_json against a json
    }));
  }
  return out;
}

std::string summary_text(std::span<const ConfigSummary> configs, double target_accuracy) {
  const std::string acc_head = "acc >= " + fixed(100 * target_accuracy, 1) + "%";
  // A grid names each configuration in a first column; a sweep over head counts only, by its heads.
  bool grid = false;
  std::size_t width = std::string("configuration").size();
  for (const ConfigSummary& c : configs) {
    grid = grid || !c.cell.settings.empty();
    width = std::max(width, c.cell.name().size());
  }
  const auto first_column = [&](const ConfigSummary* c) {
    if (!grid) return c ? fixed(static_cast<double>(c->heads), 0) : std::string("heads");
    std::string text = c ? c->cell.name() : std::string("configuration");
    return text + std::string(width - text.size(), ' ');
  };
  // "    2 (67%)  [21-94%] ": a count, its share and its interval, 23 characters wide.
  const auto rate = [](int64_t count, int64_t total, Interval ci) {
    char cell[64];
    std::snprintf(cell, sizeof cell, "%5lld %-6s %-10s", static_cast<long long>(count), percent(count, total).c_str(),
                  interval_text(ci).c_str());
    return std::string(cell);
  };
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "  runs  failed  %-23s  %-23s  %-23s  s/run  labels\n", acc_head.c_str(), "specialized",
                "roles found");
  out += first_column(nullptr) + buf;
  bool roles_expected = false, finished = false;
  for (const ConfigSummary& c : configs) {
    roles_expected = roles_expected || c.runs_expecting_roles > 0;
    finished = finished || c.runs > 0;
    std::string labels;
    for (const auto& [l, stats] : c.labels) {  // the built-in labels, then user patterns'
      const int64_t n = stats.heads;
      if (n == 0) continue;
      labels += (labels.empty() ? "" : ", ") + label_name(l) + " " + std::to_string(n);
    }
    // Without a finished run there is no share to show: every rate says so,
    // and the mean time is "-", as the labels are. n/a says the task expects
    // no roles, which only a finished run's analysis tells.
    const std::string none = "  none finished";
    const std::optional<Interval> roles_ci = c.roles_found_interval();
    const std::string reached = c.runs == 0 ? none : rate(c.reached_target, c.runs, c.reached_interval());
    const std::string specialized = c.runs == 0 ? none : rate(c.specialized, c.runs, c.specialized_interval());
    const std::string roles = roles_ci      ? rate(c.roles_found, c.runs_expecting_roles, *roles_ci)
                              : c.runs == 0 ? none
                                            : "  n/a";
    const std::string seconds = c.runs == 0 ? "-" : fixed(c.mean_seconds, 1);
    std::snprintf(buf, sizeof buf, "  %4lld  %6lld  %-23s  %-23s  %-23s  %5s  ", static_cast<long long>(c.runs),
                  static_cast<long long>(c.failed), reached.c_str(), specialized.c_str(), roles.c_str(),
                  seconds.c_str());
    const std::string first = first_column(&c);
    out += (grid ? first : std::string(first.size() < 5 ? 5 - first.size() : 0, ' ') + first) + buf +
           (labels.empty() ? "-" : labels) + "\n";
  }
  int64_t interrupted = 0;
  std::string scores;
  bool user = false;  // a data run's patterns shown: the note below names them so
  for (const ConfigSummary& c : configs) {
    interrupted += c.interrupted;
    for (const auto& [l, s] : c.labels) {
      if (s.heads == 0) continue;
      std::snprintf(buf, sizeof buf, "  %-*s %-16s %4lld heads  top %.2f", grid ? static_cast<int>(width) : 4, c.cell.name().c_str(),
                    label_name(l).c_str(), static_cast<long long>(s.heads), s.score);
      scores += buf;
      user = user || !s.user_scores.empty();
      for (const auto& [name, score] : s.user_scores) scores += "  " + name + " " + fixed(score, 2);
      if (s.user_scores.empty())
        for (const analysis::Pattern* p : sweep_patterns())
          scores += "  " + std::string(p->short_name) + " " + fixed(score_of(s.scores, p->name), 2);
      scores += "\n";
    }
  }
  out += "[lo-hi%]: the Wilson 95% interval of the share over the finished runs\n";
  if (roles_expected)
    out += "roles found: the runs whose verdict found every role their task expects (of the runs expecting roles), "
           "specialized or not\n";
  else if (finished)
    out += "roles found: n/a, the runs' task expects no roles\n";
  if (interrupted > 0) out += "(" + std::to_string(interrupted) + " run(s) stopped by a signal are not counted)\n";
  if (!scores.empty())
    out += user ? "\nmean scores per label (top pattern score; each of the data's patterns):\n" + scores
                : "\nmean scores per label (top pattern score; attention on the previous and on the first token):\n" +
                      scores;
  return out;
}

nlohmann::ordered_json run_json(const SweepRun& run, double target_accuracy) {
  nlohmann::ordered_json heads = nlohmann::ordered_json::array();
  for (const SweepHead& h : run.head_results) {
    nlohmann::ordered_json head = {{"name", h.name}, {"label", label_name(h.label)}, {"score", rounded(h.score, 1e4)}};
    for (const analysis::Pattern* p : sweep_patterns())
      head[analysis::pattern_key(*p)] = rounded(score_of(h.scores, p->name), 1e4);
    if (!h.user_scores.empty()) head["user"] = rounded_scores(h.user_scores);
    head["emerged"] = optional_json(h.emerged);
    heads.push_back(std::move(head));
  }
  return {{"config", run.cell().name()},
          {"settings", run.settings},
          {"heads", run.heads},
          {"seed", run.seed},
          {"dir", run.dir},
          {"status", status_name(run.status)},
          {"exit_code", run.exit_code},
          {"error", run.error},
          {"seconds", rounded(run.seconds, 1e3)},
          {"loss", optional_json(run.loss)},
          {"accuracy", optional_json(run.accuracy)},
          {"reached_target", reached_target(run, target_accuracy)},
          {"specialized", run.specialized},
          {"roles_found", run.roles_found ? nlohmann::ordered_json(*run.roles_found) : nlohmann::ordered_json()},
          {"specialized_step", optional_json(run.specialized_step)},
          {"head_results", heads}};
}

nlohmann::ordered_json config_json(const ConfigSummary& c) {
  nlohmann::ordered_json labels = nlohmann::ordered_json::object();
  for (const auto& [l, s] : c.labels) {
    nlohmann::ordered_json stats = {{"heads", s.heads}, {"score", rounded(s.score, 1e4)}};
    for (const analysis::Pattern* p : sweep_patterns())
      stats[analysis::pattern_key(*p)] = rounded(score_of(s.scores, p->name), 1e4);
    if (!s.user_scores.empty()) stats["user"] = rounded_scores(s.user_scores);
    labels[label_name(l)] = std::move(stats);
  }
  // No finished run: no rate (null), as roles_found_share has none without
  // a run that expects roles; a 0 with the interval [0, 1] would read as one.
  const bool finished = c.runs > 0;
  const nlohmann::ordered_json none;
  return {{"name", c.cell.name()},
          {"settings", c.cell.settings},
          {"heads", c.heads},
          {"runs", c.runs},
          {"failed", c.failed},
          {"interrupted", c.interrupted},
          {"reached_target", c.reached_target},
          {"reached_target_share", finished ? nlohmann::ordered_json(c.reached_share()) : none},
          {"reached_target_ci", finished ? interval_json(c.reached_interval()) : none},
          {"specialized", c.specialized},
          {"specialized_share", finished ? nlohmann::ordered_json(c.specialized_share()) : none},
          {"specialized_ci", finished ? interval_json(c.specialized_interval()) : none},
          {"runs_expecting_roles", c.runs_expecting_roles},
          {"roles_found", c.roles_found},
          {"roles_found_share", optional_json(c.roles_found_share())},
          {"roles_found_ci", c.roles_found_interval() ? interval_json(*c.roles_found_interval()) : nlohmann::ordered_json()},
          {"mean_seconds", rounded(c.mean_seconds, 1e3)},
          {"labels", labels}};
}

nlohmann::ordered_json flag_json(const FlagSummary& flag) {
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  for (const ConfigSummary& c : flag.values) {
    nlohmann::ordered_json v = config_json(c);
    v.erase("name");
    v.erase("settings");
    v.erase("heads");
    nlohmann::ordered_json entry = {{"value", c.cell.settings.at(flag.flag)}};
    entry.update(v);
    values.push_back(std::move(entry));
  }
  return {{"flag", flag.flag}, {"values", values}};
}

}  // namespace headlab::train
