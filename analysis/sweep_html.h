// sweep.html: the self-contained page of a `headlab sweep` (analysis/html_page.h's
// frame, report.html's stylesheet plus analysis/report/sweep.css, drawn by
// analysis/report/sweep.js): per configuration (a head count, or a cell of a
// grid) and per value of each varied flag the specialization, expected-roles
// and target-accuracy rates with their Wilson 95% intervals, the distribution of
// head labels, the emergence steps, the final losses, and a table of the runs
// linking each run's report.html by a relative address (h2-s4/report.html),
// so the sweep folder can be moved or copied whole.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace headlab::analysis {

// `sweep`: the document written to sweep.json (train/sweep.h describes its
// keys); the page reads "task", "seeds", "heads", "grid", "target_accuracy",
// "planned_runs", "seconds", "interrupted", "config", "runs", "configs" and "flags".
std::string sweep_html(const nlohmann::ordered_json& sweep, std::string_view title = "headlab sweep");

}  // namespace headlab::analysis
