// Nanda et al.'s (2023) progress measures of a modular-addition model
// (inputs [a, b, =], '=' the token p, target (a + b) mod p at '='), taken at
// each analysis step of a run so that the circuit can be watched forming
// before the held-out accuracy jumps (docs/head-metrics.md, "Progress
// measures for modular addition"):
//   - the Fourier spectrum of the token embedding's rows 0 .. p-1
//     (fourier.h), its key frequencies and their share of its norm;
//   - the restricted and excluded losses over the p^2 inputs
//     (fourier_loss.h) for those key frequencies;
//   - each head's attention, at '=', on the operands a and b.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "layers/transformer.h"

namespace headlab::analysis {

// How many key frequencies the measures follow: Nanda et al.'s p = 113
// model uses five.
inline constexpr int64_t kKeyFrequencies = 5;

struct ProgressMeasures {
  int64_t p = 0;
  std::vector<double> embedding_norms;  // per frequency 0 .. (p-1)/2 (frequency_norms)
  std::vector<int64_t> key_frequencies;  // the embedding's largest, largest first
  double key_share = 0;                 // their share of the embedding's squared norm
  double full_loss = 0, restricted_loss = 0, excluded_loss = 0;
  // Per layer and head (layer-major): the mean attention of the '=' query on
  // the key a (position 0) and on the key b (position 1), over all inputs.
  std::vector<double> attention_a, attention_b;
};

// The measures of `model` (vocab >= p + 1, classes >= p, max_seq_len >= 3)
// for addition mod p, p >= 3; `train` marks the trained pairs, row a * p + b
// (empty: all). Throws std::invalid_argument naming p, or the model's sizes
// and what they must be, when either does not fit.
ProgressMeasures progress_measures(const layers::Transformer& model, int64_t p, const std::vector<bool>& train,
                                   int64_t keys = kKeyFrequencies);

// {"p", "embedding_norms", "key_frequencies", "key_share", "full_loss",
//  "restricted_loss", "excluded_loss", "attention_a", "attention_b"}.
nlohmann::json to_json(const ProgressMeasures& m);

}  // namespace headlab::analysis
