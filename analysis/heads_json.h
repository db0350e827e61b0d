// A run's analysis as JSON: heads.json and the per-step record of
// metrics.jsonl (schemas in docs/head-metrics.md). Every pattern of
// kPatterns appears under its pattern_key.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/run_analysis.h"

namespace headlab::analysis {

// heads.json. from_json throws nlohmann::json exceptions or
// std::invalid_argument on a malformed document; a pattern missing from a
// head's scores (a file written before the pattern existed) reads as absent.
void to_json(nlohmann::json& j, const RunAnalysis& run);
void from_json(const nlohmann::json& j, RunAnalysis& run);

// The per-step record for metrics.jsonl, meant to be merged into the line:
// {"heads": {"L0H0": {"label", "score", "previous_token", ...}}, "layer_js": [...],
//  "specialized": bool}; values rounded to 4 decimals, no example attention.
nlohmann::json compact_json(const RunAnalysis& run);

}  // namespace headlab::analysis
