#include "analysis/circuit_text.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "analysis/fixed.h"

namespace headlab::analysis {
namespace {

// printf into a std::string (the lines here are ASCII, so widths are columns).
template <typename... Args>
std::string format(const char* f, Args... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

double strongest(const Composition& c) { return std::max({c.q, c.k, c.v}); }

std::string copying_lines(const RunAnalysis& run) {
  std::string line;
  for (const HeadAnalysis& h : run.heads)
    if (h.copying) line += "  " + head_name(h.layer, h.head) + " " + fixed(*h.copying, 2);
  if (line.empty()) return "";
  return "  copying score (OV eigenvalues, 1 = copies the attended token):" + line + "\n";
}

std::string composition_lines(const RunAnalysis& run) {
  if (run.composition.empty()) return "";
  std::string out = "  composition into each later head (strongest writer; random matrices score " +
                    (run.composition_baseline ? fixed(*run.composition_baseline, 2) : std::string("?")) + "):\n";
  for (int64_t l = 1; l < run.num_layers; ++l)
    for (int64_t h = 0; h < run.num_heads; ++h) {
      const Composition* best = nullptr;
      for (const Composition& c : run.composition)
        if (c.reader_layer == l && c.reader_head == h && (!best || strongest(c) > strongest(*best))) best = &c;
      if (!best) continue;
      out += format("    %s <- %s  Q %.2f  K %.2f  V %.2f\n", head_name(l, h).c_str(),
                    head_name(best->writer_layer, best->writer_head).c_str(), best->q, best->k, best->v);
    }
  return out;
}

// At most 13 columns: every point for small models, evenly spaced ones beyond.
std::vector<std::size_t> shown_points(std::size_t n) {
  std::vector<std::size_t> idx;
  const std::size_t cols = std::min<std::size_t>(n, 13);
  for (std::size_t i = 0; i < cols; ++i) idx.push_back(cols == 1 ? 0 : i * (n - 1) / (cols - 1));
  return idx;
}

std::string pruning_lines(const PruningCurve& p) {
  const std::vector<std::size_t> idx = shown_points(p.loss.size());
  auto row = [&](const char* name, const std::vector<double>& v, double scale, int decimals) {
    std::string line = format("  %-22s", name);
    for (std::size_t i : idx) line += format(" %6s", fixed(scale * v[i], decimals).c_str());
    return line + "\n";
  };
  std::string out = "Pruning (heads zero-ablated least important first; random: mean of " +
                    std::to_string(p.random_orders) + " orders):\n";
  out += format("  %-22s", "heads removed");
  for (std::size_t i : idx) out += format(" %6zu", i);
  out += "\n" + row("accuracy %, importance", p.accuracy, 100.0, 1);
  if (!p.random_accuracy.empty()) out += row("accuracy %, random", p.random_accuracy, 100.0, 1);
  out += row("loss, importance", p.loss, 1.0, 3);
  if (!p.random_loss.empty()) out += row("loss, random", p.random_loss, 1.0, 3);
  return out;
}

}  // namespace

std::string circuit_text(const RunAnalysis& run) {
  std::string out;
  if (const std::string weights = copying_lines(run) + composition_lines(run); !weights.empty()) {
    std::string approx = "exact: attention-only, no LayerNorm";
    if (run.circuits_layernorm_folded || run.circuits_mlp_ignored)
      approx = std::string(run.circuits_layernorm_folded ? "LayerNorm folded as centering and scale" : "") +
               (run.circuits_layernorm_folded && run.circuits_mlp_ignored ? ", " : "") +
               (run.circuits_mlp_ignored ? "MLPs ignored" : "");
    out += "Circuits from the weights (" + approx + "):\n" + weights;
  }
  if (run.pruning && !run.pruning->loss.empty()) out += pruning_lines(*run.pruning);
  return out;
}

}  // namespace headlab::analysis
