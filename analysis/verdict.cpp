#include "analysis/verdict.h"

#include <algorithm>
#include <cmath>

#include "analysis/attend.h"
#include "analysis/fixed.h"
#include "analysis/nesting.h"
#include "analysis/run_analysis.h"

namespace headlab::analysis {
namespace {

// A cost that rounds to nothing reads 0.0, not -0.0.
std::string points(double fraction) {
  const std::string s = fixed(100.0 * fraction, 1);
  return (s == "-0.0" ? "0.0" : s) + " pts";
}

// "costs 31.4 pts of accuracy and 2.933 nats of loss"; an ablation that
// helps on either count says how it changes them instead ("costs -0.511
// nats" reads as a typo).
std::string cost_text(double delta_accuracy, double delta_loss) {
  if (-delta_accuracy >= 0 && delta_loss >= 0)
    return "costs " + points(-delta_accuracy) + " of accuracy and " + fixed(delta_loss, 3) + " nats of loss";
  const std::string acc = points(delta_accuracy), loss = fixed(delta_loss, 3);
  return "changes accuracy by " + (acc[0] == '-' ? acc : "+" + acc) + " and the loss by " +
         (loss[0] == '-' ? loss : "+" + loss) + " nats";
}

// Whether an ablation's cost reaches the thresholds a counted head's must.
bool costs(double delta_loss, double delta_accuracy, const LabelOptions& options) {
  return -delta_accuracy >= options.min_ablation_acc_drop || delta_loss >= options.min_ablation_loss_rise;
}

std::string names(const RunAnalysis& run, const std::vector<std::size_t>& heads) {
  std::string out;
  for (std::size_t i : heads)
    if (i < run.heads.size()) out += (out.empty() ? "" : "+") + head_name(run.heads[i].layer, run.heads[i].head);
  return out;
}

// The costly set of the head's role that holds it, if any (one at most: a
// head has one label).
const SetAblation* costly_role_set(const RunAnalysis& run, std::size_t i, const LabelOptions& options) {
  for (const SetAblation& set : run.set_ablations)
    if (set.role == label_name(run.heads[i].label) && costs(set.delta_loss, set.delta_accuracy, options) &&
        std::find(set.heads.begin(), set.heads.end(), i) != set.heads.end())
      return &set;
  return nullptr;
}

// The indices of the heads that count towards specialization, with the reasons
// for leaving pattern-labelled heads out. Redundant heads doing one job each
// cost little alone and are credited through the costly set of their role,
// but only if they add to its cost (or, in a set of three, to one partner's:
// added_beside_partners): a head that writes nothing adds nothing to its
// partners' cost. A set not measured without the head (a heads.json from
// before) credits it, as it did then.
std::vector<std::size_t> counted_heads(const RunAnalysis& run, const LabelOptions& options,
                                       std::vector<std::string>& left_out) {
  std::vector<std::size_t> counted;
  for (std::size_t i = 0; i < run.heads.size(); ++i) {
    const HeadAnalysis& h = run.heads[i];
    if (!is_pattern(h.label)) continue;
    const bool costs_accuracy = !h.ablation_delta_acc || -*h.ablation_delta_acc >= options.min_ablation_acc_drop;
    const bool costs_loss = h.ablation_delta_loss && *h.ablation_delta_loss >= options.min_ablation_loss_rise;
    const SetAblation* set = costly_role_set(run, i, options);
    const std::optional<SetAblation::Cost> added = set ? added_cost(run, *set, i) : std::nullopt;
    // Beside one partner (a set of three): the first that reaches the thresholds, else the largest.
    std::optional<SetAblation::Cost> beside;
    for (const SetAblation::Cost& c : set ? added_beside_partners(run, *set, i) : std::vector<SetAblation::Cost>{}) {
      if (beside && costs(beside->delta_loss, beside->delta_accuracy, options)) break;
      if (!beside || costs(c.delta_loss, c.delta_accuracy, options) || c.delta_loss > beside->delta_loss) beside = c;
    }
    const bool credited = set && (!added || costs(added->delta_loss, added->delta_accuracy, options) ||
                                  (beside && costs(beside->delta_loss, beside->delta_accuracy, options)));
    if (!costs_accuracy && !costs_loss && !credited) {
      const SetAblation::Cost to_set = added.value_or(SetAblation::Cost{});  // measured when set and not credited
      left_out.push_back(head_name(h.layer, h.head) + " " + label_name(h.label) + ": ablation costs only " +
                         points(-*h.ablation_delta_acc) + " of accuracy and " +
                         fixed(h.ablation_delta_loss.value_or(0.0), 3) + " nats of loss" +
                         (set ? ", and adds only " + points(-to_set.delta_accuracy) + " and " +
                                    fixed(to_set.delta_loss, 3) + " nats to ablating " + names(run, set->heads)
                              : "") +
                         (beside ? " (at most " + points(-beside->delta_accuracy) + " and " +
                                       fixed(beside->delta_loss, 3) + " nats beside one other of them)"
                                 : "") +
                         " (need " + points(options.min_ablation_acc_drop) + " or " +
                         fixed(options.min_ablation_loss_rise, 2) + " nats), not counted" +
                         (set ? ": it has the pattern, but ablating it changes too little, alone or within its set"
                              : ""));
      continue;
    }
    counted.push_back(i);
  }
  return counted;
}

// What a set ablated together means for the verdict, after its cost.
std::string set_outcome(const RunAnalysis& run, const SetAblation& set, const std::vector<std::size_t>& counted,
                        const LabelOptions& options) {
  if (set.role == "induction circuit") return "";  // it credits no head
  if (!costs(set.delta_loss, set.delta_accuracy, options))
    return " (need " + points(options.min_ablation_acc_drop) + " or " + fixed(options.min_ablation_loss_rise, 2) +
           " nats)";
  // Its members left out (above) add too little to it.
  std::vector<std::size_t> in, out;
  for (std::size_t i : set.heads)
    (std::find(counted.begin(), counted.end(), i) != counted.end() ? in : out).push_back(i);
  if (out.empty()) return ": counted as one role, whatever each head alone costs";
  if (in.empty()) return ": no head of it counted, as none adds enough to it";
  return ": counted as one role for " + names(run, in) + " only (" + names(run, out) +
         (out.size() == 1 ? " adds" : " add") + " too little to it)";
}

// Whether a head labelled `label` fills a role whose pattern is `pattern`, and how: "" when its label is that
// pattern; "the same pattern" when the label's pattern coincides with it on the set (the same keys at every query
// either scores, so the same score on every head and under uniform attention, within kSameScore: a file's
// "two-back" and offset:2); "nested with it" when the label is a user pattern nested with that built-in pattern
// (it took the label under "Nested patterns": offset:1 and previous-token); absent when it does not fill it.
std::optional<std::string> fills(const RunAnalysis& run, const Label& label, const std::string& pattern) {
  if (label_name(label) == pattern) return "";
  if (!label.is_pattern() || run.heads.empty()) return std::nullopt;
  const auto same = [&](const HeadScores& s) {
    const std::optional<double> a = pattern_score(s, label_name(label)), b = pattern_score(s, pattern);
    return a && b && std::abs(*a - *b) <= kSameScore;
  };
  if (std::all_of(run.heads.begin(), run.heads.end(), [&](const HeadAnalysis& h) { return same(h.scores); }) &&
      (!run.chance || same(*run.chance)))
    return "the same pattern";
  for (const PatternInfo& p : run.user_patterns)
    if (label.is_user() && p.name == label.user_name() && nests(p.nests_with, pattern)) return "nested with it";
  return std::nullopt;
}

}  // namespace

Verdict judge(const RunAnalysis& run, const LabelOptions& options) {
  Verdict v;
  std::vector<std::string> left_out;
  const std::vector<std::size_t> counted = counted_heads(run, options, left_out);
  v.counted_heads = static_cast<int64_t>(counted.size());
  for (std::size_t i : counted) v.counted.push_back(head_name(run.heads[i].layer, run.heads[i].head));

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
    v.reasons.push_back("ablating " + names(run, set.heads) + " (" + set.role + ") together " +
                        cost_text(set.delta_accuracy, set.delta_loss) + set_outcome(run, set, counted, options));
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
    std::vector<std::string> as;  // the other labels that fill it, and how
    for (std::size_t i : counted) {
      const Label& label = run.heads[i].label;
      const std::optional<std::string> how = fills(run, label, role.pattern);
      if (!how) continue;
      r.heads.push_back(head_name(run.heads[i].layer, run.heads[i].head));
      const std::string as_label = label_name(label) + ", " + *how + " on this set";
      if (!how->empty() && std::find(as.begin(), as.end(), as_label) == as.end()) as.push_back(as_label);
    }
    std::string heads;
    for (const std::string& h : r.heads) heads += (heads.empty() ? "" : "+") + h;
    for (std::size_t a = 0; a < as.size(); ++a) heads += (a == 0 ? " (labelled " : "; ") + as[a];
    if (!as.empty()) heads += ")";
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
