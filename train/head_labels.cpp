#include "train/head_labels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace headlab::train {
namespace {

constexpr std::array<Label, 8> kAllLabels = {Label::previous_token, Label::first_token, Label::self,
                                             Label::induction,      Label::duplicate_token, Label::diffuse,
                                             Label::mixed,          Label::sink};

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string points(double fraction) { return fixed(100.0 * fraction, 1) + " pts"; }

// The indices of the heads that count towards specialization, with the reasons
// for leaving pattern-labelled heads out.
std::vector<std::size_t> counted_heads(const RunAnalysis& run, const LabelOptions& options,
                                       std::vector<std::string>& left_out) {
  std::vector<std::size_t> counted;
  for (std::size_t i = 0; i < run.heads.size(); ++i) {
    const HeadAnalysis& h = run.heads[i];
    if (!is_pattern(h.label)) continue;
    const bool costs_accuracy = !h.ablation_delta_acc || -*h.ablation_delta_acc >= options.min_ablation_acc_drop;
    const bool costs_loss = h.ablation_delta_loss && *h.ablation_delta_loss >= options.min_ablation_loss_rise;
    if (!costs_accuracy && !costs_loss) {
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

std::string label_name(Label label) {
  switch (label) {
    case Label::previous_token: return "previous-token";
    case Label::first_token: return "first-token";
    case Label::self: return "self";
    case Label::induction: return "induction";
    case Label::duplicate_token: return "duplicate-token";
    case Label::diffuse: return "diffuse";
    case Label::mixed: return "mixed";
    case Label::sink: return "sink";
  }
  return "mixed";
}

Label label_from_name(const std::string& name) {
  std::string valid;
  for (Label l : kAllLabels) {
    if (label_name(l) == name) return l;
    valid += (valid.empty() ? "" : ", ") + label_name(l);
  }
  throw std::invalid_argument("label_from_name: unknown head label '" + name + "'; valid labels: " + valid);
}

bool is_pattern(Label label) {
  return label != Label::diffuse && label != Label::mixed && label != Label::sink;
}

std::string head_name(int64_t layer, int64_t head) { return "L" + std::to_string(layer) + "H" + std::to_string(head); }

std::vector<PatternScore> ranked_patterns(const HeadScores& s) {
  std::vector<PatternScore> r = {
      {Label::previous_token, s.previous_token}, {Label::first_token, s.first_token}, {Label::self, s.self}};
  if (s.induction) r.push_back({Label::induction, *s.induction});
  if (s.duplicate_token) r.push_back({Label::duplicate_token, *s.duplicate_token});
  std::stable_sort(r.begin(), r.end(), [](const PatternScore& a, const PatternScore& b) { return a.score > b.score; });
  return r;
}

Label label_head(const HeadScores& scores, std::optional<double> ablation_delta_loss, const LabelOptions& options) {
  const std::vector<PatternScore> ranked = ranked_patterns(scores);
  const PatternScore& top = ranked[0];
  const double runner_up = ranked.size() > 1 ? ranked[1].score : 0.0;
  if (top.score >= options.score_threshold && top.score - runner_up >= options.margin) {
    if (top.pattern == Label::first_token && ablation_delta_loss && *ablation_delta_loss <= options.sink_max_delta_loss)
      return Label::sink;
    return top.pattern;
  }
  return scores.entropy >= options.diffuse_entropy ? Label::diffuse : Label::mixed;
}

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

RunAnalysis analyze_attention(const std::vector<core::Tensor>& layers, std::span<const int32_t> tokens, bool causal,
                              const LabelOptions& options, int64_t example) {
  if (layers.empty()) throw std::invalid_argument("analyze_attention: no layers given");
  RunAnalysis run;
  run.num_layers = static_cast<int64_t>(layers.size());
  run.num_heads = layers[0].dim() == 4 ? layers[0].size(1) : 0;
  run.causal = causal;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const core::Tensor& a = layers[l];
    if (a.dim() != 4 || a.size(1) != run.num_heads)
      throw std::invalid_argument("analyze_attention: layer " + std::to_string(l) + " has attention " +
                                  core::to_string(a.shape()) + " but layer 0 has " + std::to_string(run.num_heads) +
                                  " heads; every layer needs [B, " + std::to_string(run.num_heads) + ", T, T]");
    if (example < 0 || example >= a.size(0))
      throw std::invalid_argument("analyze_attention: example " + std::to_string(example) +
                                  " is outside the batch of " + std::to_string(a.size(0)));
    const std::vector<HeadScores> scores = head_scores(a, tokens, causal);
    for (int64_t h = 0; h < run.num_heads; ++h) {
      HeadAnalysis head;
      head.layer = static_cast<int64_t>(l);
      head.head = h;
      head.scores = scores[static_cast<std::size_t>(h)];
      run.heads.push_back(head);
    }
    // The example's maps, copied so that the analysis outlives the tensors.
    const core::Tensor ex = a.select(0, example).to(core::DType::f64).contiguous();
    const int64_t len = ex.size(1);
    const double* d = ex.data<double>();
    std::vector<std::vector<double>> maps;
    for (int64_t h = 0; h < run.num_heads; ++h) maps.emplace_back(d + h * len * len, d + (h + 1) * len * len);
    run.example.attention.push_back(std::move(maps));
  }
  run.js = js_distance_matrix(layers, causal);
  if (!tokens.empty()) {
    const int64_t len = layers[0].size(2);
    const auto first = tokens.begin() + example * len;
    run.example.tokens.assign(first, first + len);
  } else {
    for (int32_t t = 0; t < static_cast<int32_t>(layers[0].size(2)); ++t) run.example.tokens.push_back(t);
  }
  relabel(run, options);
  return run;
}

void relabel(RunAnalysis& run, const LabelOptions& options) {
  for (HeadAnalysis& h : run.heads) h.label = label_head(h.scores, h.ablation_delta_loss, options);
  run.verdict = judge(run, options);
}

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
    const double score = ranked_patterns(h.scores)[0].score;
    listed += (listed.empty() ? "" : ", ") + head_name(h.layer, h.head) + " " + label_name(h.label) + " " +
              fixed(score, 2);
  }
  v.distinct_labels = static_cast<int64_t>(labels.size());
  const int64_t needed = std::max<int64_t>(1, options.min_distinct_labels);

  const std::size_t n_heads = run.heads.size();
  v.reasons.push_back(std::to_string(counted.size()) + " of " + std::to_string(n_heads) +
                      " heads have a role (a clear pattern)" + (listed.empty() ? "" : ": " + listed));
  for (const std::string& s : left_out) v.reasons.push_back(s);
  const bool enough_labels = v.distinct_labels >= needed;
  v.reasons.push_back(std::to_string(v.distinct_labels) + " distinct pattern label" +
                      (v.distinct_labels == 1 ? "" : "s") + " (need " + std::to_string(needed) + ")");

  // The weakest separation between two counted heads that claim different patterns.
  bool separated = true;
  std::string closest;
  for (std::size_t a = 0; a < counted.size(); ++a)
    for (std::size_t b = a + 1; b < counted.size(); ++b) {
      const HeadAnalysis& ha = run.heads[counted[a]];
      const HeadAnalysis& hb = run.heads[counted[b]];
      if (ha.label == hb.label || counted[a] >= run.js.size() || counted[b] >= run.js[counted[a]].size()) continue;
      const double js = run.js[counted[a]][counted[b]];
      if (!v.min_js || js < *v.min_js) {
        v.min_js = js;
        closest = head_name(ha.layer, ha.head) + "-" + head_name(hb.layer, hb.head);
      }
    }
  if (v.min_js) {
    separated = *v.min_js >= options.min_js;
    v.reasons.push_back("JS divergence between differently labelled heads: min " + fixed(*v.min_js, 2) +
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
  return v;
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

// --- heads.json ---

namespace {

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

std::optional<double> optional_from(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}

double rounded(double v) { return std::round(v * 1e4) / 1e4; }

nlohmann::json rounded(const std::optional<double>& v) { return v ? nlohmann::json(rounded(*v)) : nlohmann::json(); }

nlohmann::json scores_json(const HeadScores& s) {
  return {{"previous_token", s.previous_token}, {"first_token", s.first_token},
          {"self", s.self},                     {"induction", optional_json(s.induction)},
          {"duplicate_token", optional_json(s.duplicate_token)},
          {"entropy", s.entropy},               {"distance", s.distance}};
}

HeadScores scores_from(const nlohmann::json& j) {
  HeadScores s;
  s.previous_token = j.at("previous_token").get<double>();
  s.first_token = j.at("first_token").get<double>();
  s.self = j.at("self").get<double>();
  s.induction = optional_from(j, "induction");
  s.duplicate_token = optional_from(j, "duplicate_token");
  s.entropy = j.at("entropy").get<double>();
  s.distance = j.at("distance").get<double>();
  return s;
}

}  // namespace

void to_json(nlohmann::json& j, const RunAnalysis& run) {
  nlohmann::json heads = nlohmann::json::array();
  for (const HeadAnalysis& h : run.heads)
    heads.push_back({{"layer", h.layer},
                     {"head", h.head},
                     {"name", head_name(h.layer, h.head)},
                     {"label", label_name(h.label)},
                     {"scores", scores_json(h.scores)},
                     {"ablation_delta_loss", optional_json(h.ablation_delta_loss)},
                     {"ablation_delta_accuracy", optional_json(h.ablation_delta_acc)},
                     {"importance", optional_json(h.importance)}});
  const int64_t len = run.example.length();
  nlohmann::json attention = nlohmann::json::array();
  for (const auto& layer : run.example.attention) {
    nlohmann::json maps = nlohmann::json::array();
    for (const std::vector<double>& map : layer) {
      nlohmann::json rows = nlohmann::json::array();
      for (int64_t q = 0; q < len && static_cast<std::size_t>((q + 1) * len) <= map.size(); ++q)
        rows.push_back(std::vector<double>(map.begin() + q * len, map.begin() + (q + 1) * len));
      maps.push_back(std::move(rows));
    }
    attention.push_back(std::move(maps));
  }
  j = {{"format", "headlab-heads/1"},
       {"layers", run.num_layers},
       {"heads_per_layer", run.num_heads},
       {"causal", run.causal},
       {"loss", optional_json(run.loss)},
       {"accuracy", optional_json(run.accuracy)},
       {"heads", std::move(heads)},
       {"js_divergence", run.js},
       {"verdict",
        {{"specialized", run.verdict.specialized},
         {"reasons", run.verdict.reasons},
         {"counted_heads", run.verdict.counted_heads},
         {"distinct_labels", run.verdict.distinct_labels},
         {"min_js", optional_json(run.verdict.min_js)}}},
       {"example",
        {{"tokens", run.example.tokens}, {"token_labels", run.example.token_labels}, {"attention", attention}}}};
}

void from_json(const nlohmann::json& j, RunAnalysis& run) {
  if (j.value("format", std::string()) != "headlab-heads/1")
    throw std::invalid_argument("heads.json: format is '" + j.value("format", std::string("(missing)")) +
                                "', expected 'headlab-heads/1'");
  RunAnalysis r;
  r.num_layers = j.at("layers").get<int64_t>();
  r.num_heads = j.at("heads_per_layer").get<int64_t>();
  r.causal = j.at("causal").get<bool>();
  r.loss = optional_from(j, "loss");
  r.accuracy = optional_from(j, "accuracy");
  for (const nlohmann::json& h : j.at("heads")) {
    HeadAnalysis a;
    a.layer = h.at("layer").get<int64_t>();
    a.head = h.at("head").get<int64_t>();
    a.label = label_from_name(h.at("label").get<std::string>());
    a.scores = scores_from(h.at("scores"));
    a.ablation_delta_loss = optional_from(h, "ablation_delta_loss");
    a.ablation_delta_acc = optional_from(h, "ablation_delta_accuracy");
    a.importance = optional_from(h, "importance");
    r.heads.push_back(a);
  }
  if (static_cast<int64_t>(r.heads.size()) != r.num_layers * r.num_heads)
    throw std::invalid_argument("heads.json: " + std::to_string(r.heads.size()) + " heads listed for " +
                                std::to_string(r.num_layers) + " layers x " + std::to_string(r.num_heads) +
                                " heads per layer");
  r.js = j.at("js_divergence").get<std::vector<std::vector<double>>>();
  const nlohmann::json& v = j.at("verdict");
  r.verdict.specialized = v.at("specialized").get<bool>();
  r.verdict.reasons = v.at("reasons").get<std::vector<std::string>>();
  r.verdict.counted_heads = v.at("counted_heads").get<int64_t>();
  r.verdict.distinct_labels = v.at("distinct_labels").get<int64_t>();
  r.verdict.min_js = optional_from(v, "min_js");
  const nlohmann::json& e = j.at("example");
  r.example.tokens = e.at("tokens").get<std::vector<int32_t>>();
  r.example.token_labels = e.at("token_labels").get<std::vector<std::string>>();
  for (const nlohmann::json& layer : e.at("attention")) {
    std::vector<std::vector<double>> maps;
    for (const nlohmann::json& rows : layer) {
      std::vector<double> map;
      for (const nlohmann::json& row : rows) {
        const auto values = row.get<std::vector<double>>();
        map.insert(map.end(), values.begin(), values.end());
      }
      if (static_cast<int64_t>(map.size()) != r.example.length() * r.example.length())
        throw std::invalid_argument("heads.json: an example attention map has " + std::to_string(map.size()) +
                                    " values, expected T*T = " +
                                    std::to_string(r.example.length() * r.example.length()));
      maps.push_back(std::move(map));
    }
    r.example.attention.push_back(std::move(maps));
  }
  run = std::move(r);
}

nlohmann::json compact_json(const RunAnalysis& run) {
  nlohmann::json heads = nlohmann::json::object();
  for (const HeadAnalysis& h : run.heads) {
    const HeadScores& s = h.scores;
    nlohmann::json o = {{"label", label_name(h.label)},
                        {"score", rounded(ranked_patterns(s)[0].score)},
                        {"previous_token", rounded(s.previous_token)},
                        {"first_token", rounded(s.first_token)},
                        {"self", rounded(s.self)},
                        {"induction", rounded(s.induction)},
                        {"duplicate_token", rounded(s.duplicate_token)},
                        {"entropy", rounded(s.entropy)},
                        {"distance", rounded(s.distance)}};
    if (h.ablation_delta_loss) o["ablation_delta_loss"] = rounded(*h.ablation_delta_loss);
    if (h.ablation_delta_acc) o["ablation_delta_accuracy"] = rounded(*h.ablation_delta_acc);
    if (h.importance) o["importance"] = *h.importance;  // often tiny: not rounded
    heads[head_name(h.layer, h.head)] = std::move(o);
  }
  nlohmann::json layer_js = nlohmann::json::array();
  for (int64_t l = 0; l < run.num_layers; ++l) layer_js.push_back(rounded(layer_mean_js(run, l)));
  return {{"heads", std::move(heads)}, {"layer_js", std::move(layer_js)}, {"specialized", run.verdict.specialized}};
}

}  // namespace headlab::train
