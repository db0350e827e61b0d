// Activation patching (docs/head-metrics.md, "Interventions"): run the model
// on a corrupted input, put one head's output from the clean run in its place
// (through the probe, before W_O), and measure how much of the loss gap
// between the clean and the corrupted run that restores:
//
//   restored(h) = (loss_corrupted - loss_patched(h)) / (loss_corrupted - loss_clean)
//
// 1 = the head alone carries everything the corruption destroyed, 0 = nothing.
// Every loss is on the clean targets. The model is never changed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "analysis/evaluate.h"
#include "layers/transformer.h"

namespace headlab::analysis {

// The corrupted run: other tokens [B * T] (same B and T as the clean
// examples), and optionally per-layer gates [h] (empty = all ones), e.g. to
// corrupt by ablating a head. It runs with the clean rows' lengths: row b's
// corrupted tokens count at its first n_b positions, the rest is padding
// (what it holds changes nothing).
struct Corruption {
  std::span<const int32_t> tokens;
  std::vector<core::Tensor> gates;
};

struct Patching {
  double clean_loss = 0, corrupted_loss = 0;
  // Rows, and those the corruption changed (a real token, or gates). A row
  // it leaves as it is adds the same terms to the clean, corrupted and
  // patched losses: it changes no difference, so `restored` is the changed
  // rows' ratio, while the losses are means over every row.
  int64_t rows = 0, corrupted_rows = 0;
  std::vector<double> patched_loss;             // per head, layer-major
  std::vector<std::optional<double>> restored;  // per head; absent when the runs' losses differ by < 1e-9
};

// Throws std::invalid_argument when the corrupted tokens do not fill [B, T].
Patching patch_heads(const layers::Transformer& model, const Examples& clean, const Corruption& corruption);

// patch_heads over a set read in chunks: add() each chunk's clean examples
// with their corrupted tokens (row b's corruption in row b, so the pairs the
// corruption makes are the caller's); value() is what patch_heads of one batch
// holding every chunk gives -- the same sums in the same order.
class PatchingSums {
 public:
  void add(const layers::Transformer& model, const Examples& clean, const Corruption& corruption);
  // The same with the clean pass given: its logits and its head outputs per
  // layer [B, T, d_model] (the analysis has run it already). Each head's
  // patched pass starts at the head's layer from the corrupted pass's
  // residuals (prefix.h).
  void add(const layers::Transformer& model, const Examples& clean, const Corruption& corruption,
           const core::Tensor& clean_logits, const std::vector<core::Tensor>& clean_outputs);
  Patching value() const;

 private:
  EvalSums clean_, corrupted_;
  int64_t rows_ = 0, corrupted_rows_ = 0;
  std::vector<EvalSums> patched_;  // per head, layer-major
};

}  // namespace headlab::analysis
