#include "analysis/intervention_text.h"

#include <cstdio>

#include "analysis/fixed.h"

namespace headlab::analysis {
namespace {

std::string cell(const std::optional<double>& v, int digits, int width, bool percent = false) {
  std::string text = v ? fixed(percent ? 100.0 * *v : *v, digits) + (percent ? "%" : "") : "-";
  if (static_cast<int>(text.size()) < width) text.insert(0, static_cast<std::size_t>(width) - text.size(), ' ');
  return text;
}

// What the rows behind the resample and patching columns were, when not
// every row: a reader must not take them for the whole set's.
std::string coverage_notes(const RunAnalysis& run) {
  std::string out;
  if (run.resample && run.resample->with_donor < run.resample->rows) {
    const auto& r = *run.resample;
    out += "resample ablation: " + std::to_string(r.with_donor) + " of " + std::to_string(r.rows) +
           " sequences have a donor (a later sequence, cyclically, " +
           (run.causal ? "at least as long" : "as long") + "); the column is over " +
           (r.with_donor == 0 ? "none: it is empty\n" : "those " + std::to_string(r.with_donor) + " alone\n");
  }
  if (run.patching && run.patching->corrupted_rows < run.patching->rows) {
    const auto& p = *run.patching;
    out += "patching: the corruption changed " + std::to_string(p.corrupted_rows) + " of " + std::to_string(p.rows) +
           " sequences (the others keep their tokens and add nothing to the gap); the shares are the changed "
           "sequences'\n";
  }
  return out;
}

}  // namespace

std::string intervention_table(const RunAnalysis& run) {
  std::string out = "Interventions";
  if (run.patching)
    out += " (corrupted run: " + run.patching->corruption + " clean loss " + fixed(run.patching->clean_loss, 4) +
           ", corrupted " + fixed(run.patching->corrupted_loss, 4) + ")";
  out += "\n" + coverage_notes(run);
  out += "head  label              prev@src  ind@tgt  dir.logit  Δloss zero  Δloss mean  Δloss resample  patch restores\n";
  for (const HeadAnalysis& h : run.heads) {
    std::string label = label_name(h.label);
    label.resize(17, ' ');
    out += head_name(h.layer, h.head) + "  " + label + cell(h.task.previous_token, 2, 10) +
           cell(h.task.induction, 2, 9) + cell(h.direct_logit, 3, 11) + cell(h.ablation_delta_loss, 3, 12) +
           cell(h.mean_ablation_delta_loss, 3, 12) + cell(h.resample_ablation_delta_loss, 3, 16) +
           cell(h.patch_restored, 1, 16, true) + "\n";
  }
  for (const SetAblation& set : run.set_ablations) {
    std::string names;
    for (std::size_t i : set.heads)
      if (i < run.heads.size()) names += (names.empty() ? "" : "+") + head_name(run.heads[i].layer, run.heads[i].head);
    out += "set " + names + " (" + set.role + "): Δloss " + fixed(set.delta_loss, 3) + ", Δaccuracy " +
           fixed(100.0 * set.delta_accuracy, 1) + " pts\n";
  }
  return out;
}

}  // namespace headlab::analysis
