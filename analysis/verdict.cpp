#include "analysis/verdict.h"

#include <algorithm>

#include "analysis/attend.h"
#include "analysis/fixed.h"
#include "analysis/run_analysis.h"

namespace headlab::analysis {
namespace {

std::string points(double fraction) { return fixed(100.0 * fraction, 1) + " pts"; }

// The indices of the heads that count towards specialization, with the reasons
// for leaving pattern-labelled heads out.
bool set_costs(const SetAblation& set, const LabelOptions& options) {
  return -set.delta_accuracy >= options.min_ablation_acc_drop || set.delta_loss >= options.min_ablation_loss_rise;
}

std::string set_names(const RunAnalysis& run, const SetAblation& set) {
  std::string names;
  for (std::size_t i : set.heads)
    if (i < run.heads.size()) names += (names.empty() ? "" : "+") + head_name(run.heads[i].layer, run.heads[i].head);
  return names;
}

// The set of the head's role that costs enough, if any: redundant heads doing
// one job are counted together.
const SetAblation* costly_role_set(const RunAnalysis& run, std::size_t i, const LabelOptions& options) {
  for (const SetAblation& set : run.set_ablations)
    if (set.role == label_name(run.heads[i].label) && set_costs(set, options) &&
        std::find(set.heads.begin(), set.heads.end(), i) != set.heads.end())
      return &set;
  return nullptr;
}

std::vector<std::size_t> counted_heads(const RunAnalysis& run, const LabelOptions& options,
                                       std::vector<std::string>& left_out) {
  std::vector<std::size_t> counted;
  for (std::size_t i = 0; i < run.heads.size(); ++i) {
    const HeadAnalysis& h = run.heads[i];
    if (!is_pattern(h.label)) continue;
    const bool costs_accuracy = !h.ablation_delta_acc || -*h.ablation_delta_acc >= options.min_ablation_acc_drop;
    const bool costs_loss = h.ablation_delta_loss && *h.ablation_delta_loss >= options.min_ablation_loss_rise;
    if (!costs_accuracy && !costs_loss && costly_role_set(run, i, options) == nullptr) {
      left_out.push_back(head_name(h.layer, h.head) + " " + label_name(h.label) + ": ablation costs only " +
                         points(-*h.ablation_delta_acc) + " of accuracy and " +
                         fixed(h.ablation_delta_loss.value_or(0.0), 3) + " nats of loss (need " +
                         points(options.min_ablation_acc_drop) + " or " + fixed(options.min_ablation_loss_rise, 2) +
                         " nats), not counted");
      continue;
    }
    counted.push_back(i);
  }
  return counted;
}

}  // namespace

Verdict judge(const RunAnalysis& run, const LabelOptions& options) {
  Verdict v;
  std::vector<std::string> left_out;
  const std::vector<std::size_t> counted = counted_heads(run, options, left_out);
  v.counted_heads = static_cast<int64_t>(counted.size());

  std::vector<Label> labels;
  std::string listed;
  for (std::size_t i : counted) {
    const HeadAnalysis& h = run.heads[i];
    if (std::find(labels.begin(), labels.end(), h.label) == labels.end()) labels.push_back(h.label);
    const double score = label_score(h.scores, h.label);
    listed += (listed.empty() ? "" : ", ") + head_name(h.layer, h.head) + " " + label_name(h.label) + " " +
              fixed(score, 2);
  }
  v.distinct_labels = static_cast<int64_t>(labels.size());
  const int64_t needed = std::max<int64_t>(1, options.min_distinct_labels);

  const std::size_t n_heads = run.heads.size();
  v.reasons.push_back(std::to_string(counted.size()) + " of " + std::to_string(n_heads) +
                      " heads have a role (a clear pattern)" + (listed.empty() ? "" : ": " + listed));
  for (const std::string& s : left_out) v.reasons.push_back(s);
  for (const SetAblation& set : run.set_ablations)
    v.reasons.push_back("ablating " + set_names(run, set) + " (" + set.role + ") together costs " +
                        points(-set.delta_accuracy) + " of accuracy and " + fixed(set.delta_loss, 3) +
                        " nats of loss" +
                        (set.role == "induction circuit" ? ""
                         : set_costs(set, options)
                             ? ": counted as one role, whatever each head alone costs"
                             : " (need " + points(options.min_ablation_acc_drop) + " or " +
                                   fixed(options.min_ablation_loss_rise, 2) + " nats)"));
  const bool enough_labels = v.distinct_labels >= needed;
  v.reasons.push_back(std::to_string(v.distinct_labels) + " distinct pattern label" +
                      (v.distinct_labels == 1 ? "" : "s") + " (need " + std::to_string(needed) + ")");

  // The weakest separation between two roles, each represented by its
  // clearest head (the highest score of its label): redundant heads sharing
  // a role count as one role, so a weaker copy that still leans towards
  // another role does not sink the verdict.
  std::vector<std::size_t> representatives;
  for (const Label& label : labels) {
    std::optional<std::size_t> best;
    for (std::size_t i : counted)
      if (run.heads[i].label == label &&
          (!best || label_score(run.heads[i].scores, label) > label_score(run.heads[*best].scores, label)))
        best = i;
    representatives.push_back(*best);
  }
  bool separated = true;
  std::string closest;
  for (std::size_t a = 0; a < representatives.size(); ++a)
    for (std::size_t b = a + 1; b < representatives.size(); ++b) {
      const std::size_t ia = representatives[a], ib = representatives[b];
      const HeadAnalysis& ha = run.heads[ia];
      const HeadAnalysis& hb = run.heads[ib];
      if (ia >= run.js.size() || ib >= run.js[ia].size()) continue;
      const double js = run.js[ia][ib];
      if (!v.min_js || js < *v.min_js) {
        v.min_js = js;
        closest = head_name(ha.layer, ha.head) + "-" + head_name(hb.layer, hb.head);
      }
    }
  if (v.min_js) {
    separated = *v.min_js >= options.min_js;
    v.reasons.push_back("JS divergence between the roles' clearest heads: min " + fixed(*v.min_js, 2) +
                        " bits (" + closest + "; need " + fixed(options.min_js, 2) + ")");
  }

  bool any_ablation = false;
  std::string costs;
  for (std::size_t i : counted) {
    const HeadAnalysis& h = run.heads[i];
    if (!h.ablation_delta_acc) continue;
    any_ablation = true;
    costs += (costs.empty() ? "" : ", ") + head_name(h.layer, h.head) + " " + fixed(100.0 * *h.ablation_delta_acc, 1);
  }
  if (any_ablation)
    v.reasons.push_back("ablating each counted head changes accuracy by: " + costs + " pts (need a drop of " +
                        points(options.min_ablation_acc_drop) + ", or a loss rise of " +
                        fixed(options.min_ablation_loss_rise, 2) + " nats)");
  else if (!counted.empty())
    v.reasons.push_back("ablation not measured");

  v.specialized = !counted.empty() && enough_labels && separated;

  // The task's expected roles: each filled by the counted heads carrying its
  // pattern's label (a costly set of redundant heads counts as one role).
  int64_t found = 0;
  std::string listed_roles;
  for (const ExpectedRole& role : run.expected_roles) {
    RoleFound r{role.role, role.pattern, {}};
    for (std::size_t i : counted)
      if (label_name(run.heads[i].label) == role.pattern)
        r.heads.push_back(head_name(run.heads[i].layer, run.heads[i].head));
    std::string heads;
    for (const std::string& h : r.heads) heads += (heads.empty() ? "" : "+") + h;
    listed_roles += (listed_roles.empty() ? "" : ", ") + role.role +
                    (role.role == role.pattern ? "" : " [" + role.pattern + "]") + ": " +
                    (heads.empty() ? "none" : heads);
    if (!r.heads.empty()) ++found;
    v.roles.push_back(std::move(r));
  }
  if (!run.expected_roles.empty()) {
    v.roles_found = found == static_cast<int64_t>(run.expected_roles.size());
    v.reasons.insert(v.reasons.begin(), "expected roles found: " + std::to_string(found) + " of " +
                                            std::to_string(run.expected_roles.size()) + " (" + listed_roles + ")");
  }
  return v;
}

}  // namespace headlab::analysis
