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

}  // namespace

std::string intervention_table(const RunAnalysis& run) {
  std::string out = "Interventions";
  if (run.patching)
    out += " (corrupted run: " + run.patching->corruption + " clean loss " + fixed(run.patching->clean_loss, 4) +
           ", corrupted " + fixed(run.patching->corrupted_loss, 4) + ")";
  out += "\n";
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
