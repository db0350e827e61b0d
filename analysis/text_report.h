// The head analysis as terminal text: the table, shaded attention heatmaps,
// the verdict, and the one-line-per-layer summary of the training log.
//
// Plain text unless TextOptions::color asks for ANSI colours (the caller
// decides, e.g. stdout is a TTY and NO_COLOR is unset). Token labels are
// printed with control characters replaced, so a label cannot move the cursor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/run_analysis.h"

namespace headlab::analysis {

struct TextOptions {
  bool color = false;          // ANSI colours
  int64_t max_positions = 24;  // a heatmap shows at most this many (the first) positions
  int64_t width = 100;         // terminal columns; one layer's heatmaps sit side by side when they fit
  // Per head, in run.heads' order: the training step its label emerged at
  // (label_emergence_steps), shown as the table's "emerged" column; empty:
  // no such column (no training history: --analyze-every 0, a checkpoint file).
  std::vector<std::optional<int64_t>> emerged;
};

// "L0H0 previous-token 0.95 | L0H1 first-token 0.86 | JS 0.61" (JS = mean
// divergence between the layer's heads, omitted with one head). Heads without a
// pattern show their best score or entropy: "mixed (prev 0.41)", "diffuse (H 0.93)".
std::string layer_summary(const RunAnalysis& run, int64_t layer);

// Verdict line and its reasons, one per line.
std::string verdict_text(const RunAnalysis& run, const TextOptions& options = {});

// One row per head: layer, head, label, top two scores, entropy, distance,
// ablation delta accuracy (points), importance (the per-layer normalized
// margin importance; the raw loss gradient only for files without it), and
// with options.emerged the step the label emerged at ("-": never held).
std::string head_table(const RunAnalysis& run, const TextOptions& options = {});

// One head's attention on the example, queries down, keys across, each cell
// two columns shaded by probability (' ' hidden by the mask, '·' < 0.05,
// '░' < 0.25, '▒' < 0.5, '▓' < 0.75, '█' above), token labels on both axes.
std::string attention_heatmap(const RunAnalysis& run, int64_t layer, int64_t head, const TextOptions& options = {});

// Every head's heatmap, layer by layer, side by side where the width allows.
std::string attention_heatmaps(const RunAnalysis& run, const TextOptions& options = {});

// verdict_text + head_table + circuit_text (circuit_text.h) + attention_heatmaps.
std::string text_report(const RunAnalysis& run, const TextOptions& options = {});

}  // namespace headlab::analysis
