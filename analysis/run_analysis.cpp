#include "analysis/run_analysis.h"

#include <algorithm>
#include <stdexcept>

#include "core/shortest.h"

namespace headlab::analysis {

std::string head_name(int64_t layer, int64_t head) { return "L" + std::to_string(layer) + "H" + std::to_string(head); }

std::string AttentionExample::token_label(int64_t position) const {
  const auto p = static_cast<std::size_t>(position);
  if (p < token_labels.size()) return token_labels[p];
  if (p < tokens.size()) return std::to_string(tokens[p]);
  return "?";
}

const HeadAnalysis& RunAnalysis::at(int64_t layer, int64_t head) const {
  if (layer < 0 || layer >= num_layers || head < 0 || head >= num_heads ||
      static_cast<std::size_t>(layer * num_heads + head) >= heads.size())
    throw std::invalid_argument("RunAnalysis::at: no head " + head_name(layer, head) + " in a run of " +
                                std::to_string(num_layers) + " layers x " + std::to_string(num_heads) + " heads");
  return heads[static_cast<std::size_t>(layer * num_heads + head)];
}

HeadAnalysis& RunAnalysis::at(int64_t layer, int64_t head) {
  return const_cast<HeadAnalysis&>(static_cast<const RunAnalysis&>(*this).at(layer, head));
}

namespace {

// [B, 1, T, T]: each query's mass spread evenly over the keys it sees (its row's real ones; at most q when
// causal); a padded query sees every real key, as a real last one does.
core::Tensor uniform_attention(int64_t B, int64_t T, bool causal, std::span<const int32_t> lengths) {
  std::vector<double> v(static_cast<std::size_t>(B * T * T), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lengths.empty() ? T : lengths[static_cast<std::size_t>(b)];
    for (int64_t q = 0; q < T; ++q) {
      const int64_t keys = causal ? std::min(q + 1, len) : len;
      for (int64_t k = 0; k < keys; ++k)
        v[static_cast<std::size_t>((b * T + q) * T + k)] = 1.0 / static_cast<double>(keys);
    }
  }
  return core::Tensor::from_vector(v, {B, 1, T, T}, core::DType::f64);
}

}  // namespace

RunAnalysis analyze_attention(const std::vector<core::Tensor>& layers, std::span<const int32_t> tokens, bool causal,
                              const LabelOptions& options, int64_t example, const BatchContext& context) {
  AttentionSums sums(causal, example);
  sums.add(layers, tokens, 0, context);
  return sums.value(options);
}

void AttentionSums::add(const std::vector<core::Tensor>& layers, std::span<const int32_t> tokens, int64_t first,
                        const BatchContext& context) {
  const int64_t heads = !layers.empty() && layers[0].dim() == 4 ? layers[0].size(1) : 0;
  add(static_cast<int64_t>(layers.size()), heads, [&](int64_t l) { return layers[static_cast<std::size_t>(l)]; },
      tokens, first, context);
}

void AttentionSums::add(int64_t layers, int64_t heads, const LayerAttention& attention,
                        std::span<const int32_t> tokens, int64_t first, const BatchContext& context,
                        const LayerVisit& visit) {
  if (layers < 1) throw std::invalid_argument("analyze_attention: no layers given");
  std::vector<PatternInfo> patterns;
  for (const AttendPattern& p : context.attend) {
    check_pattern_name(p.name);
    for (const PatternInfo& seen : patterns)
      if (seen.name == p.name) throw std::invalid_argument("analyze_attention: two patterns called '" + p.name + "'");
    patterns.push_back({p.name, p.definition, {}});
  }
  const auto L = static_cast<std::size_t>(layers);
  if (rows_ == 0) {
    run_.user_patterns = patterns;
    run_.expected_roles.assign(context.roles.begin(), context.roles.end());
    run_.num_layers = layers;
    run_.num_heads = heads;
    run_.causal = causal_;
    scores_.resize(L);
    user_.assign(L, std::vector<AttendScoreSums>(patterns.size()));
    chance_user_.assign(patterns.size(), AttendScoreSums());
  } else if (run_.num_layers != layers || run_.num_heads != heads || run_.user_patterns != patterns) {
    throw std::invalid_argument("analyze_attention: a chunk of " + std::to_string(layers) + " layers of " +
                                std::to_string(heads) + " heads (" + std::to_string(patterns.size()) +
                                " user patterns) after chunks of " + std::to_string(run_.num_layers) + " x " +
                                std::to_string(run_.num_heads) + " (" + std::to_string(run_.user_patterns.size()) + ")");
  }
  int64_t batch = 0, T = 0;    // layer 0's
  bool has_example = false;
  int64_t row = 0;             // the example's row in this chunk
  int64_t example_length = 0;  // the heatmaps' example's real positions
  const LayerVisit each = [&](int64_t layer, const core::Tensor& a) {
    const auto l = static_cast<std::size_t>(layer);
    if (a.dim() != 4 || a.size(1) != run_.num_heads)
      throw std::invalid_argument("analyze_attention: layer " + std::to_string(l) + " has attention " +
                                  core::to_string(a.shape()) + " but layer 0 has " + std::to_string(run_.num_heads) +
                                  " heads; every layer needs [B, " + std::to_string(run_.num_heads) + ", T, T]");
    if (example_ < 0)
      throw std::invalid_argument("analyze_attention: example " + std::to_string(example_) +
                                  " is outside the batch of " + std::to_string(a.size(0)));
    if (layer == 0) {
      batch = a.size(0);
      T = a.size(2);
      has_example = example_ >= first && example_ < first + batch;
      row = example_ - first;
    }
    scores_[l].add(a, tokens, causal_, context.targets, context.lengths);
    for (std::size_t p = 0; p < context.attend.size(); ++p) user_[l][p].add(a, context.attend[p], causal_);
    if (visit) visit(layer, a);
    if (!has_example) return;
    // The example's maps over its real positions, copied (as doubles) so
    // that the analysis outlives the tensors.
    example_length = context.lengths.empty() ? a.size(2) : context.lengths[static_cast<std::size_t>(row)];
    const core::Tensor ex = a.select(0, row).contiguous();
    const int64_t n = example_length, len = ex.size(1);
    std::vector<std::vector<double>> maps;
    core::dispatch(ex.dtype(), [&](auto zero) {
      const auto* d = ex.data<decltype(zero)>();
      for (int64_t h = 0; h < run_.num_heads; ++h) {
        std::vector<double> map;
        for (int64_t q = 0; q < n; ++q) map.insert(map.end(), d + (h * len + q) * len, d + (h * len + q) * len + n);
        maps.push_back(std::move(map));
      }
    });
    run_.example.attention.push_back(std::move(maps));
  };
  js_.add(std::vector<int64_t>(L, heads), attention, causal_, context.lengths, each);
  const core::Tensor uniform = uniform_attention(batch, T, causal_, context.lengths);
  chance_.add(uniform, tokens, causal_, context.targets, context.lengths);
  for (std::size_t p = 0; p < context.attend.size(); ++p) chance_user_[p].add(uniform, context.attend[p], causal_);
  nesting_.add(context.attend, tokens, causal_, context.targets, context.lengths);
  if (has_example) {
    if (!tokens.empty()) {
      const auto at = tokens.begin() + row * T;
      run_.example.tokens.assign(at, at + example_length);
    } else {
      for (int32_t t = 0; t < static_cast<int32_t>(example_length); ++t) run_.example.tokens.push_back(t);
    }
    has_example_ = true;
  }
  rows_ += batch;
}

RunAnalysis AttentionSums::value(const LabelOptions& options) const {
  if (!has_example_)
    throw std::invalid_argument("analyze_attention: example " + std::to_string(example_) +
                                " is outside the batch of " + std::to_string(rows_));
  RunAnalysis run = run_;
  const std::vector<std::vector<std::string>> nests_with = nesting_.value();
  for (std::size_t p = 0; p < nests_with.size(); ++p) run.user_patterns[p].nests_with = nests_with[p];
  for (std::size_t l = 0; l < scores_.size(); ++l) {
    const std::vector<HeadScores> scores = scores_[l].value();
    std::vector<std::vector<std::optional<double>>> user;  // [pattern][head]
    for (const AttendScoreSums& p : user_[l]) user.push_back(p.value());
    for (int64_t h = 0; h < run.num_heads; ++h) {
      HeadAnalysis head;
      head.layer = static_cast<int64_t>(l);
      head.head = h;
      head.scores = scores[static_cast<std::size_t>(h)];
      for (std::size_t p = 0; p < user.size(); ++p)
        head.scores.user.push_back({run.user_patterns[p].name, user[p][static_cast<std::size_t>(h)], nests_with[p]});
      run.heads.push_back(head);
    }
  }
  run.js = js_.value();
  run.chance = chance_.value()[0];
  for (std::size_t p = 0; p < chance_user_.size(); ++p)
    run.chance->user.push_back({run.user_patterns[p].name, chance_user_[p].value()[0], nests_with[p]});
  relabel(run, options);
  return run;
}

LabelSet label_set(const RunAnalysis& run) {
  LabelSet set{run.chance ? &*run.chance : nullptr, {}};
  for (const ExpectedRole& r : run.expected_roles) set.roles.push_back(r.pattern);
  return set;
}

std::string label_options_departures(const RunAnalysis& run, const LabelOptions& expected) {
  std::string out;
  if (!run.label_options) return out;
  for (const LabelFlag& f : kLabelFlags)
    if ((*run.label_options).*f.value != expected.*f.value)
      out += (out.empty() ? "" : ", ") + std::string(f.flag) + " " + core::shortest((*run.label_options).*f.value) +
             " (not " + core::shortest(expected.*f.value) + ")";
  return out;
}

void relabel(RunAnalysis& run, const LabelOptions& options) {
  run.label_options = options;
  const LabelSet known = label_set(run);
  for (std::size_t i = 0; i < run.heads.size(); ++i) {
    HeadAnalysis& h = run.heads[i];
    std::optional<double> delta = h.ablation_delta_loss;
    const Label alone = label_head(h.scores, std::nullopt, options, known);
    for (const SetAblation& set : run.set_ablations) {
      if (!delta || set.role != label_name(alone) || std::find(set.heads.begin(), set.heads.end(), i) == set.heads.end())
        continue;
      const std::optional<SetAblation::Cost> added = added_cost(run, set, i);
      delta = std::max(*delta, added ? added->delta_loss : set.delta_loss);
      for (const SetAblation::Cost& beside : added_beside_partners(run, set, i))
        delta = std::max(*delta, beside.delta_loss);
    }
    h.label = label_head(h.scores, delta, options, known);
  }
  run.verdict = judge(run, options);
}

std::vector<SetAblation> candidate_sets(const RunAnalysis& run, const LabelOptions& options) {
  std::vector<SetAblation> sets;
  std::vector<Label> labels;  // every head's label without ablation
  const LabelSet known = label_set(run);
  for (const HeadAnalysis& h : run.heads) labels.push_back(label_head(h.scores, std::nullopt, options, known));
  std::vector<Label> patterns;
  for (std::size_t p = 0; p < kPatternCount; ++p) patterns.push_back(Label::pattern_at(p));
  for (const PatternInfo& p : run.user_patterns) patterns.push_back(Label::user(p.name));
  for (const Label& pattern : patterns) {
    SetAblation set;
    set.role = label_name(pattern);
    for (std::size_t i = 0; i < run.heads.size(); ++i)
      if (labels[i] == pattern) set.heads.push_back(i);
    if (set.heads.size() >= 2) sets.push_back(std::move(set));
  }
  // The induction circuit. Where the task defines sources (task-position scores), by what each head does
  // where the circuit works: the previous-token score at the sources an induction head copies from, the
  // induction score at the targets, each reaching the threshold. The all-position labels would dilute a
  // previous-token head over the filler, on which it may do anything, and take in one that attends to the
  // previous token only there. Elsewhere, by the labels: a mixed head that happens to put half its mass on
  // the previous token is not part of it.
  const bool task = std::any_of(run.heads.begin(), run.heads.end(), [](const HeadAnalysis& h) {
    return h.task.previous_token.has_value() || h.task.induction.has_value();
  });
  const auto member = [&](std::size_t i, const char* pattern, const std::optional<double>& task_score) {
    return task ? task_score && *task_score >= options.score_threshold : labels[i] == Label::pattern(pattern);
  };
  std::vector<std::size_t> induction, previous;
  int64_t last_layer = -1;
  for (std::size_t i = 0; i < run.heads.size(); ++i)
    if (run.heads[i].layer >= 1 && member(i, "induction", run.heads[i].task.induction)) {
      induction.push_back(i);
      last_layer = std::max(last_layer, run.heads[i].layer);
    }
  for (std::size_t i = 0; i < run.heads.size(); ++i)
    if (run.heads[i].layer < last_layer && member(i, "previous-token", run.heads[i].task.previous_token))
      previous.push_back(i);
  if (!induction.empty() && !previous.empty()) {
    SetAblation circuit;
    circuit.role = "induction circuit";
    circuit.heads = previous;
    circuit.heads.insert(circuit.heads.end(), induction.begin(), induction.end());
    sets.push_back(std::move(circuit));
  }
  return sets;
}

bool ablates_without(const SetAblation& set) { return set.heads.size() > 2 && set.role != "induction circuit"; }

std::optional<SetAblation::Cost> set_without(const RunAnalysis& run, const SetAblation& set, std::size_t k) {
  if (set.without.size() == set.heads.size()) return set.without.at(k);
  if (set.heads.size() != 2) return std::nullopt;
  const std::size_t other = set.heads[1 - k];
  if (other >= run.heads.size()) return std::nullopt;
  const HeadAnalysis& h = run.heads[other];
  if (!h.ablation_delta_loss || !h.ablation_delta_acc) return std::nullopt;
  return SetAblation::Cost{*h.ablation_delta_loss, *h.ablation_delta_acc};
}

std::optional<SetAblation::Cost> added_cost(const RunAnalysis& run, const SetAblation& set, std::size_t i) {
  const auto k = static_cast<std::size_t>(std::find(set.heads.begin(), set.heads.end(), i) - set.heads.begin());
  const std::optional<SetAblation::Cost> rest = set_without(run, set, k);
  if (!rest) return std::nullopt;
  return SetAblation::Cost{set.delta_loss - rest->delta_loss, set.delta_accuracy - rest->delta_accuracy};
}

std::vector<SetAblation::Cost> added_beside_partners(const RunAnalysis& run, const SetAblation& set, std::size_t i) {
  std::vector<SetAblation::Cost> added;
  if (set.heads.size() != 3 || set.without.size() != 3) return added;
  const auto own = static_cast<std::size_t>(std::find(set.heads.begin(), set.heads.end(), i) - set.heads.begin());
  for (std::size_t x = 0; x < 3; ++x) {
    if (x == own || set.heads[x] >= run.heads.size()) continue;
    const HeadAnalysis& partner = run.heads[set.heads[x]];
    if (!partner.ablation_delta_loss || !partner.ablation_delta_acc) continue;
    const SetAblation::Cost& pair = set.without[3 - x - own];  // members 0 + 1 + 2: the third one's index
    added.push_back({pair.delta_loss - *partner.ablation_delta_loss, pair.delta_accuracy - *partner.ablation_delta_acc});
  }
  return added;
}

std::optional<double> layer_mean_js(const RunAnalysis& run, int64_t layer) {
  if (run.num_heads < 2) return std::nullopt;
  double total = 0;
  int64_t pairs = 0;
  for (int64_t a = 0; a < run.num_heads; ++a)
    for (int64_t b = a + 1; b < run.num_heads; ++b) {
      const auto i = static_cast<std::size_t>(layer * run.num_heads + a);
      const auto j = static_cast<std::size_t>(layer * run.num_heads + b);
      if (i >= run.js.size() || j >= run.js[i].size()) return std::nullopt;
      total += run.js[i][j];
      ++pairs;
    }
  return total / static_cast<double>(pairs);
}

}  // namespace headlab::analysis
