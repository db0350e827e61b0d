#include "analysis/heads_json.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace headlab::analysis {
namespace {

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

std::optional<double> optional_from(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}

double rounded(double v) { return std::round(v * 1e4) / 1e4; }

nlohmann::json rounded(const std::optional<double>& v) { return v ? nlohmann::json(rounded(*v)) : nlohmann::json(); }

nlohmann::json scores_json(const HeadScores& s) {
  nlohmann::json j = {{"entropy", s.entropy}, {"distance", s.distance}};
  for (std::size_t i = 0; i < kPatternCount; ++i) {
    j[pattern_key(kPatterns[i])] = optional_json(s.patterns[i]);
    j[pattern_key(kPatterns[i]) + "_all"] = optional_json(s.patterns_all[i]);
  }
  nlohmann::json user = nlohmann::json::object();
  for (const UserScore& u : s.user) user[u.name] = optional_json(u.score);
  j["user"] = std::move(user);
  j["transformer_lens"] = {{"previous_token", optional_json(s.detector.previous_token)},
                           {"duplicate_token", optional_json(s.detector.duplicate_token)},
                           {"induction", optional_json(s.detector.induction)}};
  return j;
}

HeadScores scores_from(const nlohmann::json& j, const std::vector<PatternInfo>& user_patterns) {
  HeadScores s;
  for (std::size_t i = 0; i < kPatternCount; ++i) {
    const std::string key = pattern_key(kPatterns[i]), all = key + "_all";
    if (!kPatterns[i].can_be_absent && j.contains(key) && j.at(key).is_null())
      throw std::invalid_argument("heads.json: the " + key + " score is null; it always has a value");
    s.patterns[i] = optional_from(j, key.c_str());
    // Files written before the judged-query scores had only the all-query one.
    s.patterns_all[i] = j.contains(all) ? optional_from(j, all.c_str()) : s.patterns[i];
  }
  for (const PatternInfo& p : user_patterns) {
    const bool has = j.contains("user") && j.at("user").is_object();
    s.user.push_back({p.name, has ? optional_from(j.at("user"), p.name.c_str()) : std::nullopt, p.nests_with});
  }
  if (j.contains("transformer_lens") && j.at("transformer_lens").is_object()) {
    const nlohmann::json& tl = j.at("transformer_lens");
    s.detector = {optional_from(tl, "previous_token"), optional_from(tl, "duplicate_token"),
                  optional_from(tl, "induction")};
  }
  s.entropy = j.at("entropy").get<double>();
  s.distance = j.at("distance").get<double>();
  return s;
}

std::string composition_key(const Composition& c) {
  return head_name(c.writer_layer, c.writer_head) + ">" + head_name(c.reader_layer, c.reader_head);
}

// "L1H0" -> (1, 0); anything else is an error naming the text.
std::pair<int64_t, int64_t> parse_head_name(const std::string& name, const RunAnalysis& r) {
  int64_t layer = -1, head = -1;
  char tail = 0;
  if (std::sscanf(name.c_str(), "L%" SCNd64 "H%" SCNd64 "%c", &layer, &head, &tail) != 2 || layer < 0 ||
      head < 0 || layer >= r.num_layers || head >= r.num_heads)
    throw std::invalid_argument("heads.json: '" + name + "' is not a head of this model (L0H0 .. L" +
                                std::to_string(r.num_layers - 1) + "H" + std::to_string(r.num_heads - 1) + ")");
  return {layer, head};
}

// The layer-major index (into RunAnalysis::heads) of a head named like "L1H0".
std::size_t head_index(const RunAnalysis& run, const std::string& name) {
  const auto [layer, head] = parse_head_name(name, run);
  const auto index = static_cast<std::size_t>(layer * run.num_heads + head);
  if (index >= run.heads.size())
    throw std::invalid_argument("heads.json: head '" + name + "' is named but the file lists only " +
                                std::to_string(run.heads.size()) + " heads");
  return index;
}

nlohmann::json circuits_json(const RunAnalysis& run) {
  nlohmann::json comp = nlohmann::json::array();
  for (const Composition& c : run.composition)
    comp.push_back({{"writer", head_name(c.writer_layer, c.writer_head)},
                    {"reader", head_name(c.reader_layer, c.reader_head)},
                    {"q", c.q},
                    {"k", c.k},
                    {"v", c.v}});
  return {{"composition", std::move(comp)},
          {"composition_baseline", optional_json(run.composition_baseline)},
          {"layernorm_folded", run.circuits_layernorm_folded},
          {"mlp_ignored", run.circuits_mlp_ignored}};
}

void circuits_from(const nlohmann::json& j, RunAnalysis& r) {
  for (const nlohmann::json& c : j.at("composition")) {
    const auto [wl, wh] = parse_head_name(c.at("writer").get<std::string>(), r);
    const auto [rl, rh] = parse_head_name(c.at("reader").get<std::string>(), r);
    r.composition.push_back({wl, wh, rl, rh, c.at("q").get<double>(), c.at("k").get<double>(), c.at("v").get<double>()});
  }
  r.composition_baseline = optional_from(j, "composition_baseline");
  r.circuits_layernorm_folded = j.value("layernorm_folded", false);
  r.circuits_mlp_ignored = j.value("mlp_ignored", false);
}

nlohmann::json pruning_json(const PruningCurve& p, int64_t heads) {
  std::vector<std::string> order;
  for (int64_t i : p.order) order.push_back(head_name(i / heads, i % heads));
  return {{"order", order},
          {"loss", p.loss},
          {"accuracy", p.accuracy},
          {"random_loss", p.random_loss},
          {"random_accuracy", p.random_accuracy},
          {"random_orders", p.random_orders}};
}

PruningCurve pruning_from(const nlohmann::json& j, const RunAnalysis& r) {
  PruningCurve p;
  for (const std::string& name : j.at("order").get<std::vector<std::string>>())
    p.order.push_back(static_cast<int64_t>(head_index(r, name)));
  p.loss = j.at("loss").get<std::vector<double>>();
  p.accuracy = j.at("accuracy").get<std::vector<double>>();
  p.random_loss = j.at("random_loss").get<std::vector<double>>();
  p.random_accuracy = j.at("random_accuracy").get<std::vector<double>>();
  p.random_orders = j.at("random_orders").get<int64_t>();
  if (p.loss.size() != p.order.size() + 1 || p.accuracy.size() != p.loss.size())
    throw std::invalid_argument("heads.json: the pruning curve has " + std::to_string(p.loss.size()) +
                                " points for " + std::to_string(p.order.size()) + " heads (expected heads + 1)");
  return p;
}

nlohmann::json optionals_json(const std::vector<std::optional<double>>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : values) out.push_back(optional_json(v));
  return out;
}

nlohmann::json sets_json(const RunAnalysis& run) {
  nlohmann::json out = nlohmann::json::array();
  for (const SetAblation& set : run.set_ablations) {
    nlohmann::json names = nlohmann::json::array();
    for (std::size_t i : set.heads)
      names.push_back(i < run.heads.size() ? head_name(run.heads[i].layer, run.heads[i].head) : "?");
    nlohmann::json without = nlohmann::json::array();
    for (const SetAblation::Cost& c : set.without)
      without.push_back({{"delta_loss", c.delta_loss}, {"delta_accuracy", c.delta_accuracy}});
    out.push_back({{"role", set.role},
                   {"heads", std::move(names)},
                   {"delta_loss", set.delta_loss},
                   {"delta_accuracy", set.delta_accuracy},
                   {"without", std::move(without)}});
  }
  return out;
}

// The user-set label options (kLabelFlags), or null.
nlohmann::json label_options_json(const std::optional<LabelOptions>& options) {
  if (!options) return nullptr;
  nlohmann::json j = nlohmann::json::object();
  for (const LabelFlag& f : kLabelFlags) j[f.key] = (*options).*f.value;
  return j;
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
                     {"importance", optional_json(h.importance)},
                     {"importance_margin", optional_json(h.importance_margin)},
                     {"importance_normalized", optional_json(h.importance_normalized)},
                     {"copying", optional_json(h.copying)},
                     {"task_scores",
                      {{"previous_token", optional_json(h.task.previous_token)},
                       {"induction", optional_json(h.task.induction)}}},
                     {"direct_logit", optional_json(h.direct_logit)},
                     {"mean_ablation_delta_loss", optional_json(h.mean_ablation_delta_loss)},
                     {"resample_ablation_delta_loss", optional_json(h.resample_ablation_delta_loss)},
                     {"patch_restored", optional_json(h.patch_restored)}});
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
  nlohmann::json patterns = nlohmann::json::array();
  for (const PatternInfo& p : run.user_patterns)
    patterns.push_back({{"name", p.name}, {"definition", p.definition}, {"nests_with", p.nests_with}});
  nlohmann::json roles = nlohmann::json::array();
  for (const ExpectedRole& r : run.expected_roles) roles.push_back({{"role", r.role}, {"pattern", r.pattern}});
  nlohmann::json found = nlohmann::json::array();
  for (const RoleFound& r : run.verdict.roles)
    found.push_back({{"role", r.role}, {"pattern", r.pattern}, {"heads", r.heads}});
  j = {{"format", "headlab-heads/1"},
       {"analyzed", run.analyzed},
       {"step", run.step ? nlohmann::json(*run.step) : nlohmann::json()},
       {"patterns", std::move(patterns)},
       {"expected_roles", std::move(roles)},
       {"chance", run.chance ? scores_json(*run.chance) : nlohmann::json()},
       {"label_options", label_options_json(run.label_options)},
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
         {"counted", run.verdict.counted},
         {"distinct_labels", run.verdict.distinct_labels},
         {"min_js", optional_json(run.verdict.min_js)},
         {"roles_found", run.verdict.roles_found},
         {"roles", std::move(found)},
         {"success", run.verdict.success()}}},
       {"example",
        {{"tokens", run.example.tokens}, {"token_labels", run.example.token_labels}, {"attention", attention}}},
       {"circuits", circuits_json(run)},
       {"pruning", run.pruning ? pruning_json(*run.pruning, run.num_heads) : nlohmann::json()},
       {"set_ablations", sets_json(run)},
       {"position_loss", optionals_json(run.position_loss)},
       {"icl_score", optional_json(run.icl_score)},
       {"patching", run.patching ? nlohmann::json{{"corruption", run.patching->corruption},
                                                  {"clean_loss", run.patching->clean_loss},
                                                  {"corrupted_loss", run.patching->corrupted_loss},
                                                  {"rows", run.patching->rows},
                                                  {"corrupted_rows", run.patching->corrupted_rows}}
                                 : nlohmann::json()},
       {"resample", run.resample ? nlohmann::json{{"rows", run.resample->rows}, {"with_donor", run.resample->with_donor}}
                                 : nlohmann::json()}};
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
  // Files written before these keys existed analyzed no user patterns.
  r.analyzed = j.value("analyzed", std::string());
  if (const auto step = j.find("step"); step != j.end() && step->is_number_integer()) r.step = step->get<int64_t>();
  std::vector<std::string> user_names;
  if (j.contains("patterns"))
    for (const nlohmann::json& p : j.at("patterns")) {
      // Files written before nesting was recorded have none.
      r.user_patterns.push_back({p.at("name").get<std::string>(), p.value("definition", std::string()),
                                 p.value("nests_with", std::vector<std::string>())});
      check_pattern_name(r.user_patterns.back().name);
      for (const std::string& nested : r.user_patterns.back().nests_with)
        if (!is_pattern_name(nested))
          throw std::invalid_argument("heads.json: pattern '" + r.user_patterns.back().name + "' nests with '" +
                                      nested + "', which is not a built-in pattern");
      user_names.push_back(r.user_patterns.back().name);
    }
  if (j.contains("expected_roles"))
    for (const nlohmann::json& role : j.at("expected_roles"))
      r.expected_roles.push_back({role.at("role").get<std::string>(), role.at("pattern").get<std::string>()});
  // Files written before chance scores were measured have none: their labels take no chance test.
  if (const auto chance = j.find("chance"); chance != j.end() && chance->is_object())
    r.chance = scores_from(*chance, r.user_patterns);
  // Files written before the label options were recorded have none.
  if (const auto o = j.find("label_options"); o != j.end() && o->is_object()) {
    r.label_options.emplace();
    for (const LabelFlag& f : kLabelFlags)
      if (const auto v = o->find(f.key); v != o->end()) {
        if (!v->is_number())
          throw std::invalid_argument("heads.json: label_options." + std::string(f.key) + " is " + v->dump() +
                                      ", not a number (" + f.flag + "'s value)");
        (*r.label_options).*f.value = v->get<double>();
      }
  }
  for (const nlohmann::json& h : j.at("heads")) {
    HeadAnalysis a;
    a.layer = h.at("layer").get<int64_t>();
    a.head = h.at("head").get<int64_t>();
    a.label = label_from_name(h.at("label").get<std::string>(), user_names);
    a.scores = scores_from(h.at("scores"), r.user_patterns);
    a.ablation_delta_loss = optional_from(h, "ablation_delta_loss");
    a.ablation_delta_acc = optional_from(h, "ablation_delta_accuracy");
    a.importance = optional_from(h, "importance");
    a.importance_margin = optional_from(h, "importance_margin");
    a.importance_normalized = optional_from(h, "importance_normalized");
    a.copying = optional_from(h, "copying");
    if (h.contains("task_scores") && h.at("task_scores").is_object()) {
      a.task.previous_token = optional_from(h.at("task_scores"), "previous_token");
      a.task.induction = optional_from(h.at("task_scores"), "induction");
    }
    a.direct_logit = optional_from(h, "direct_logit");
    a.mean_ablation_delta_loss = optional_from(h, "mean_ablation_delta_loss");
    a.resample_ablation_delta_loss = optional_from(h, "resample_ablation_delta_loss");
    a.patch_restored = optional_from(h, "patch_restored");
    r.heads.push_back(a);
  }
  if (static_cast<int64_t>(r.heads.size()) != r.num_layers * r.num_heads)
    throw std::invalid_argument("heads.json: " + std::to_string(r.heads.size()) + " heads listed for " +
                                std::to_string(r.num_layers) + " layers x " + std::to_string(r.num_heads) +
                                " heads per layer");
  for (std::size_t i = 0; i < r.heads.size(); ++i) {
    const auto layer = static_cast<int64_t>(i) / r.num_heads, head = static_cast<int64_t>(i) % r.num_heads;
    if (r.heads[i].layer != layer || r.heads[i].head != head)
      throw std::invalid_argument("heads.json: head " + std::to_string(i) + " of the list is " +
                                  head_name(r.heads[i].layer, r.heads[i].head) + " where " + head_name(layer, head) +
                                  " belongs (heads are listed layer by layer)");
  }
  r.js = j.at("js_divergence").get<std::vector<std::vector<double>>>();
  const nlohmann::json& v = j.at("verdict");
  r.verdict.specialized = v.at("specialized").get<bool>();
  r.verdict.reasons = v.at("reasons").get<std::vector<std::string>>();
  r.verdict.counted_heads = v.at("counted_heads").get<int64_t>();
  r.verdict.counted = v.value("counted", std::vector<std::string>{});
  r.verdict.distinct_labels = v.at("distinct_labels").get<int64_t>();
  r.verdict.min_js = optional_from(v, "min_js");
  r.verdict.roles_found = v.value("roles_found", false);
  if (v.contains("roles"))
    for (const nlohmann::json& role : v.at("roles"))
      r.verdict.roles.push_back({role.at("role").get<std::string>(), role.at("pattern").get<std::string>(),
                                 role.at("heads").get<std::vector<std::string>>()});
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
  // Files written before the circuit analysis existed have neither key.
  if (j.contains("circuits") && j.at("circuits").is_object()) circuits_from(j.at("circuits"), r);
  if (j.contains("pruning") && j.at("pruning").is_object()) r.pruning = pruning_from(j.at("pruning"), r);
  // Files written before these keys existed read as absent.
  if (j.contains("set_ablations"))
    for (const nlohmann::json& set : j.at("set_ablations")) {
      SetAblation s;
      s.role = set.at("role").get<std::string>();
      for (const nlohmann::json& name : set.at("heads")) s.heads.push_back(head_index(r, name.get<std::string>()));
      s.delta_loss = set.at("delta_loss").get<double>();
      s.delta_accuracy = set.at("delta_accuracy").get<double>();
      if (set.contains("without"))
        for (const nlohmann::json& c : set.at("without"))
          s.without.push_back({c.at("delta_loss").get<double>(), c.at("delta_accuracy").get<double>()});
      if (!s.without.empty() && s.without.size() != s.heads.size())
        throw std::invalid_argument("heads.json: the set " + s.role + " of " + std::to_string(s.heads.size()) +
                                    " heads is measured without " + std::to_string(s.without.size()) + " of them");
      r.set_ablations.push_back(std::move(s));
    }
  if (j.contains("position_loss"))
    for (const nlohmann::json& loss : j.at("position_loss"))
      r.position_loss.push_back(loss.is_null() ? std::nullopt : std::optional<double>(loss.get<double>()));
  r.icl_score = optional_from(j, "icl_score");
  if (j.contains("patching") && j.at("patching").is_object()) {
    const nlohmann::json& p = j.at("patching");
    r.patching = PatchingSummary{p.at("corruption").get<std::string>(), p.at("clean_loss").get<double>(),
                                 p.at("corrupted_loss").get<double>(), p.value("rows", int64_t{0}),
                                 p.value("corrupted_rows", int64_t{0})};
  }
  if (j.contains("resample") && j.at("resample").is_object())
    r.resample = ResampleCoverage{j.at("resample").at("rows").get<int64_t>(),
                                  j.at("resample").at("with_donor").get<int64_t>()};
  run = std::move(r);
}

nlohmann::json compact_json(const RunAnalysis& run) {
  nlohmann::json heads = nlohmann::json::object();
  for (const HeadAnalysis& h : run.heads) {
    const HeadScores& s = h.scores;
    nlohmann::json o = {{"label", label_name(h.label)},
                        {"score", rounded(label_score(s, h.label))},
                        {"entropy", rounded(s.entropy)},
                        {"distance", rounded(s.distance)}};
    for (std::size_t i = 0; i < kPatternCount; ++i) o[pattern_key(kPatterns[i])] = rounded(s.patterns[i]);
    for (const UserScore& u : s.user) o[u.name] = rounded(u.score);
    if (h.ablation_delta_loss) o["ablation_delta_loss"] = rounded(*h.ablation_delta_loss);
    if (h.ablation_delta_acc) o["ablation_delta_accuracy"] = rounded(*h.ablation_delta_acc);
    if (h.importance) o["importance"] = *h.importance;  // often tiny: not rounded
    if (h.importance_normalized) o["importance_normalized"] = rounded(*h.importance_normalized);
    if (h.copying) o["copying"] = rounded(*h.copying);
    if (h.task.previous_token) o["task_previous_token"] = rounded(*h.task.previous_token);
    if (h.task.induction) o["task_induction"] = rounded(*h.task.induction);
    if (h.direct_logit) o["direct_logit"] = rounded(*h.direct_logit);
    heads[head_name(h.layer, h.head)] = std::move(o);
  }
  nlohmann::json layer_js = nlohmann::json::array();
  for (int64_t l = 0; l < run.num_layers; ++l) layer_js.push_back(rounded(layer_mean_js(run, l)));
  nlohmann::json out = {{"heads", std::move(heads)}, {"layer_js", std::move(layer_js)}, {"specialized", run.verdict.specialized}};
  if (!run.expected_roles.empty()) out["roles_found"] = run.verdict.roles_found;
  if (!run.composition.empty()) {
    nlohmann::json comp = nlohmann::json::object();
    for (const Composition& c : run.composition)
      comp[composition_key(c)] = {{"q", rounded(c.q)}, {"k", rounded(c.k)}, {"v", rounded(c.v)}};
    out["composition"] = std::move(comp);
  }
  if (!run.position_loss.empty()) {
    nlohmann::json losses = nlohmann::json::array();
    for (const auto& v : run.position_loss) losses.push_back(rounded(v));
    out["position_loss"] = std::move(losses);
    out["icl_score"] = rounded(run.icl_score);
  }
  return out;
}

}  // namespace headlab::analysis
