// Nanda et al.'s (2023) restricted and excluded losses: how much of a
// modular-addition model's output its key frequencies carry.
//
// The logits over all p^2 inputs (a, b) are, per output class, a function on
// the p x p grid. A model that adds through frequency k writes
// cos(w (a + b - c)) = cos(w (a + b)) cos(w c) + sin(w (a + b)) sin(w c),
// w = 2 pi k / p: a multiple of the two grid directions cos(w (a + b)) and
// sin(w (a + b)) for each class c. The restricted logits keep only those
// directions of the key frequencies; the excluded logits are the rest.
// A circuit that has formed gives a restricted loss close to the full one,
// and removing it (the excluded loss on the training pairs) undoes the fit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace headlab::analysis {

// `logits` [p * p, classes] (row a * p + b for the input (a, b), row-major,
// classes >= p): their components along cos(w_k (a + b)) and
// sin(w_k (a + b)) for the frequencies `keys`, same shape.
std::vector<double> key_frequency_part(std::span<const double> logits, int64_t p, int64_t classes,
                                       const std::vector<int64_t>& keys);

// The mean cross-entropy of `logits` rows [p * p, classes] against their
// targets (a + b) mod p, over the rows where `rows` is true (empty: all).
double modular_loss(std::span<const double> logits, int64_t p, int64_t classes, const std::vector<bool>& rows = {});

struct FourierLosses {
  double full = 0;        // the logits as they are, over all p^2 inputs
  double restricted = 0;  // only the key frequencies' part, over all p^2 inputs
  double excluded = 0;    // the key frequencies' part removed, over the training pairs
};

// `train`: which of the p^2 rows are trained on (empty: all).
FourierLosses fourier_losses(std::span<const double> logits, int64_t p, int64_t classes,
                             const std::vector<int64_t>& keys, const std::vector<bool>& train);

}  // namespace headlab::analysis
