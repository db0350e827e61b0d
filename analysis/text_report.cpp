#include "analysis/text_report.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "analysis/circuit_text.h"
#include "analysis/fixed.h"

namespace headlab::analysis {
namespace {

// Columns a UTF-8 string takes: one per code point (no wide characters here).
int64_t columns(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string pad_right(const std::string& s, int64_t width) {
  return s + std::string(static_cast<std::size_t>(std::max<int64_t>(0, width - columns(s))), ' ');
}
std::string pad_left(const std::string& s, int64_t width) {
  return std::string(static_cast<std::size_t>(std::max<int64_t>(0, width - columns(s))), ' ') + s;
}

// Printable and at most `width` columns: control characters become '?', a
// longer label is cut with '…'.
std::string sanitize(const std::string& s, int64_t width) {
  std::string clean;
  for (unsigned char c : s) clean += (c < 0x20 || c == 0x7F) ? '?' : static_cast<char>(c);
  if (columns(clean) <= width) return clean;
  std::string cut;
  int64_t n = 0;
  for (unsigned char c : clean) {
    const bool starts = (c & 0xC0) != 0x80;
    if (starts && ++n > width - 1) break;
    cut += static_cast<char>(c);
  }
  return cut + "…";
}

// The code points of a UTF-8 string, one string each.
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80 || out.empty()) out.emplace_back();
    out.back() += c;
  }
  return out;
}

// "prev" for a pattern, the label's name for the others.
std::string short_name(const Label& l) { return l.is_builtin() ? std::string(l.entry().short_name) : label_name(l); }

// ANSI SGR code of a label's colour: patterns in their colour, sinks amber, the rest grey.
std::string label_colour(const Label& l) {
  if (l.is_user()) return user_ansi_colour(l.user_name());
  if (l.is_builtin()) return std::string(l.entry().ansi_colour);
  return l == Label::sink() ? "38;5;179" : "38;5;245";
}

std::string paint(const std::string& s, const std::string& sgr, bool color) {
  return color ? "\x1b[" + sgr + "m" + s + "\x1b[0m" : s;
}

// "previous-token 0.95", "mixed (prev 0.41)", "diffuse (H 0.93)".
std::string label_with_score(const HeadAnalysis& h) {
  const PatternScore top = ranked_patterns(h.scores)[0];
  if (h.label == Label::diffuse()) return "diffuse (H " + fixed(h.scores.entropy, 2) + ")";
  if (h.label == Label::mixed()) return "mixed (" + short_name(top.pattern) + " " + fixed(top.score, 2) + ")";
  return label_name(h.label) + " " + fixed(label_score(h.scores, h.label), 2);
}

constexpr const char* kShades[] = {"·", "░", "▒", "▓", "█"};

int shade_level(double p) {
  if (p < 0.05) return 0;
  if (p < 0.25) return 1;
  if (p < 0.5) return 2;
  if (p < 0.75) return 3;
  return 4;
}

// A 256-colour blue ramp from dark (level 0) to bright (level 4).
constexpr const char* kShadeColours[] = {"38;5;238", "38;5;24", "38;5;31", "38;5;39", "38;5;81"};

// The heatmap's lines; every line has the same number of columns.
std::vector<std::string> heatmap_lines(const RunAnalysis& run, int64_t layer, int64_t head,
                                       const TextOptions& options) {
  const HeadAnalysis& h = run.at(layer, head);
  const AttentionExample& ex = run.example;
  const int64_t len = ex.length();
  const auto& maps = ex.attention;
  if (static_cast<std::size_t>(layer) >= maps.size() || static_cast<std::size_t>(head) >= maps[layer].size() ||
      static_cast<int64_t>(maps[layer][head].size()) != len * len)
    throw std::invalid_argument("attention_heatmap: the example has no " + std::to_string(len) + "x" +
                                std::to_string(len) + " map for " + head_name(layer, head));
  const std::vector<double>& a = maps[layer][head];
  const int64_t shown = std::min(len, std::max<int64_t>(1, options.max_positions));
  constexpr int64_t kRowLabel = 9;  // "pos label " before the cells

  std::vector<std::string> lines;
  lines.push_back(paint(head_name(layer, head), "1", options.color) + " " +
                  paint(label_with_score(h), label_colour(h.label), options.color));
  // Key labels run downwards, one character per line, so that each fits its
  // two-column cell: "12" over "13" stays readable where "1213" would not.
  std::vector<std::vector<std::string>> keys;
  std::size_t depth = 1;
  for (int64_t k = 0; k < shown; ++k) {
    keys.push_back(code_points(sanitize(ex.token_label(k), 3)));
    depth = std::max(depth, keys.back().size());
  }
  for (std::size_t i = 0; i < depth; ++i) {
    std::string header(kRowLabel, ' ');
    for (const auto& key : keys) header += pad_right(i < key.size() ? key[i] : "", 2);
    lines.push_back(header);
  }
  for (int64_t q = 0; q < shown; ++q) {
    std::string row = pad_left(std::to_string(q), 3) + " " + pad_right(sanitize(ex.token_label(q), 4), 4) + " ";
    for (int64_t k = 0; k < shown; ++k) {
      if (run.causal && k > q) {
        row += "  ";
        continue;
      }
      const int level = shade_level(a[static_cast<std::size_t>(q * len + k)]);
      const std::string cell = level == 0 ? std::string(kShades[0]) + " " : std::string(kShades[level]) + kShades[level];
      row += paint(cell, kShadeColours[level], options.color);
    }
    lines.push_back(row);
  }
  if (shown < len) lines.push_back("(first " + std::to_string(shown) + " of " + std::to_string(len) + " positions)");
  // Equal widths so that heatmaps can sit side by side (colour codes take no columns).
  const int64_t width = std::max<int64_t>(kRowLabel + 2 * shown, 24);
  for (std::string& l : lines) {
    std::string plain;
    bool in_escape = false;
    for (char c : l) {
      if (c == '\x1b') in_escape = true;
      if (!in_escape) plain += c;
      if (in_escape && c == 'm') in_escape = false;
    }
    l += std::string(static_cast<std::size_t>(std::max<int64_t>(0, width - columns(plain))), ' ');
  }
  return lines;
}

// Why a run whose expected roles are all there is not called specialized:
// specialization asks for two counted heads with different patterns, which
// a one-role task or a one-head model cannot show, so that "found" and "not
// specialized" do not read as a contradiction.
std::string why_not_specialized(const RunAnalysis& run) {
  const Verdict& v = run.verdict;
  if (run.heads.size() < 2) return "a single head: there are no heads to tell apart";
  if (v.roles.size() < 2)
    return "the task expects one role; specialization asks for heads with 2 distinct patterns";
  return "but the heads did not specialize: see the reasons";
}

}  // namespace

std::string layer_summary(const RunAnalysis& run, int64_t layer) {
  std::string line;
  for (int64_t h = 0; h < run.num_heads; ++h)
    line += (h ? " | " : "") + head_name(layer, h) + " " + label_with_score(run.at(layer, h));
  if (const auto js = layer_mean_js(run, layer)) line += " | JS " + fixed(*js, 2);
  return line;
}

std::string verdict_text(const RunAnalysis& run, const TextOptions& options) {
  const Verdict& v = run.verdict;
  int64_t found = 0;
  for (const RoleFound& r : v.roles) found += r.heads.empty() ? 0 : 1;
  const std::string roles = v.roles.empty() ? ""
                            : "expected roles found: " + std::to_string(found) + " of " + std::to_string(v.roles.size());
  std::string out;
  if (v.specialized)
    out = paint("Verdict: heads specialized", "1;32", options.color) + (roles.empty() ? "" : "; " + roles);
  else if (v.roles_found)
    out = paint("Verdict: " + roles, "1;32", options.color) + " (" + why_not_specialized(run) + ")";
  else
    out = paint("Verdict: heads did not specialize", "1;31", options.color) + (roles.empty() ? "" : "; " + roles);
  if (run.loss || run.accuracy) {
    out += "  (";
    if (run.loss) out += "loss " + fixed(*run.loss, 4);
    if (run.loss && run.accuracy) out += ", ";
    if (run.accuracy) out += "accuracy " + fixed(100.0 * *run.accuracy, 1) + "%";
    out += ")";
  }
  out += "\n";
  for (const std::string& r : run.verdict.reasons) out += "  - " + r + "\n";
  return out;
}

std::string head_table(const RunAnalysis& run, const TextOptions& options) {
  std::vector<std::pair<std::string, int64_t>> cols = {
      {"layer", 5}, {"head", 4},    {"label", 15},    {"top scores", 22},
      {"entropy", 7}, {"distance", 8}, {"ablation Δacc", 13}, {"importance", 10}};
  const bool emerged = !options.emerged.empty();
  if (emerged && options.emerged.size() != run.heads.size())
    throw std::invalid_argument("head_table: " + std::to_string(options.emerged.size()) + " emergence steps for " +
                                std::to_string(run.heads.size()) + " heads");
  if (emerged) cols.push_back({"emerged", 7});
  std::ostringstream out;
  std::string header, rule;
  for (std::size_t i = 0; i < cols.size(); ++i) {
    const bool left = i == 2 || i == 3;
    header += (i ? "  " : "") + (left ? pad_right(cols[i].first, cols[i].second) : pad_left(cols[i].first, cols[i].second));
    rule += (i ? "  " : "") + std::string(static_cast<std::size_t>(cols[i].second), '-');
  }
  out << paint(header, "1", options.color) << "\n" << rule << "\n";
  for (std::size_t i = 0; i < run.heads.size(); ++i) {
    const HeadAnalysis& h = run.heads[i];
    const std::vector<PatternScore> ranked = ranked_patterns(h.scores);
    std::string top;
    for (std::size_t r = 0; r < std::min<std::size_t>(2, ranked.size()); ++r)
      top += (r ? "  " : "") + short_name(ranked[r].pattern) + " " + fixed(ranked[r].score, 2);
    const std::string abl = h.ablation_delta_acc ? fixed(100.0 * *h.ablation_delta_acc, 1) + " pts" : "-";
    // Normalized margin importance when measured (it agrees with ablation where
    // the loss gradient has vanished); the raw loss gradient only for older files.
    const std::string imp = h.importance_normalized ? fixed(*h.importance_normalized, 2)
                            : h.importance          ? fixed(*h.importance, 4)
                                                    : "-";
    out << pad_left(std::to_string(h.layer), 5) << "  " << pad_left(std::to_string(h.head), 4) << "  "
        << paint(pad_right(label_name(h.label), 15), label_colour(h.label), options.color) << "  "
        << pad_right(top, 22) << "  " << pad_left(fixed(h.scores.entropy, 2), 7) << "  "
        << pad_left(fixed(h.scores.distance, 2), 8) << "  " << pad_left(abl, 13) << "  " << pad_left(imp, 10);
    if (emerged) out << "  " << pad_left(options.emerged[i] ? std::to_string(*options.emerged[i]) : "-", 7);
    out << "\n";
  }
  return out.str();
}

std::string attention_heatmap(const RunAnalysis& run, int64_t layer, int64_t head, const TextOptions& options) {
  std::string out;
  for (const std::string& l : heatmap_lines(run, layer, head, options)) {
    std::string trimmed = l;
    trimmed.erase(trimmed.find_last_not_of(' ') + 1);
    out += trimmed + "\n";
  }
  return out;
}

std::string attention_heatmaps(const RunAnalysis& run, const TextOptions& options) {
  std::string out;
  for (int64_t l = 0; l < run.num_layers; ++l) {
    // Greedily fill rows of side-by-side heatmaps up to the width.
    std::vector<std::vector<std::string>> row;
    std::vector<int64_t> widths;  // each block's columns (its header line has no colour)
    int64_t used = 0;
    auto flush = [&] {
      std::size_t height = 0;
      for (const auto& b : row) height = std::max(height, b.size());
      for (std::size_t i = 0; i < height; ++i) {
        std::string line;
        for (std::size_t b = 0; b < row.size(); ++b)
          line += (b ? "    " : "") + (i < row[b].size() ? row[b][i] : std::string(static_cast<std::size_t>(widths[b]), ' '));
        line.erase(line.find_last_not_of(' ') + 1);
        out += line + "\n";
      }
      out += "\n";
      row.clear();
      widths.clear();
      used = 0;
    };
    for (int64_t h = 0; h < run.num_heads; ++h) {
      std::vector<std::string> block = heatmap_lines(run, l, h, options);
      const int64_t w = columns(block[1]);
      if (!row.empty() && used + 4 + w > options.width) flush();
      used += (row.empty() ? 0 : 4) + w;
      row.push_back(std::move(block));
      widths.push_back(w);
    }
    if (!row.empty()) flush();
  }
  return out;
}

std::string text_report(const RunAnalysis& run, const TextOptions& options) {
  const std::string circuits = circuit_text(run);
  return verdict_text(run, options) + "\n" + head_table(run, options) + (circuits.empty() ? "" : "\n" + circuits) +
         "\n" + attention_heatmaps(run, options);
}

}  // namespace headlab::analysis
