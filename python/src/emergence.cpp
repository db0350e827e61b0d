// headlab._core.emergence: when each head's pattern emerged during a run's
// training, by the rule its report.html and a sweep's sweep.json take
// (analysis::pattern_emergence_step: the first logged analysis from which the
// pattern's score stays at the score that labels a head on the run's set),
// so that headlab.Run.emergence reads the step by the engine's rule, never
// by a copy of it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/heads_json.h"
#include "analysis/html_report.h"
#include "analysis/labels.h"
#include "analysis/run_analysis.h"
#include "train/run_folder.h"

namespace headlab::python {

namespace py = pybind11;

namespace {

using Emerged = std::tuple<std::string, std::string, std::optional<int64_t>>;  // head, pattern, step

// Per head of `heads_json` (a heads.json's text): `pattern` (a label's name),
// or when it is empty the head's own label if that is a pattern (the others
// have no pattern to emerge), and the step it emerged in metrics.jsonl at
// `metrics` (none: never stably, or no analysis logged before the last).
std::vector<Emerged> emergence(const std::string& heads_json, const std::string& metrics, const std::string& pattern) {
  const analysis::RunAnalysis run = nlohmann::json::parse(heads_json).get<analysis::RunAnalysis>();
  std::vector<std::string> user;
  for (const analysis::PatternInfo& p : run.user_patterns) user.push_back(p.name);
  const std::optional<analysis::Label> asked =
      pattern.empty() ? std::nullopt : std::optional(analysis::label_from_name(pattern, user));
  if (asked && !asked->is_pattern())
    throw std::invalid_argument("emergence: '" + pattern + "' is no pattern (diffuse, mixed and sink never emerge); "
                                "give a pattern's name, or None for each head's own label");
  const std::vector<nlohmann::json> history = train::read_metrics(metrics);
  const analysis::LabelOptions options = run.label_options.value_or(analysis::LabelOptions{});
  std::vector<Emerged> out;
  for (const analysis::HeadAnalysis& h : run.heads) {
    const analysis::Label label = asked.value_or(h.label);
    if (!label.is_pattern()) continue;
    const std::string name = analysis::head_name(h.layer, h.head);
    out.emplace_back(name, analysis::label_name(label),
                     analysis::pattern_emergence_step(history, name, label, run, options));
  }
  return out;
}

}  // namespace

void bind_emergence(py::module_& m) {
  m.def(
      "emergence",
      [](const std::string& heads_json, const py::bytes& metrics, const std::string& pattern) {
        const std::string path = metrics;
        py::gil_scoped_release release;
        return emergence(heads_json, path, pattern);
      },
      py::arg("heads_json"), py::arg("metrics"), py::arg("pattern"));
}

}  // namespace headlab::python
