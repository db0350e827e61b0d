// Fourier analysis over the residues mod p, the basis of Nanda et al.'s
// (2023) progress measures for grokking: a model that has learned modular
// addition embeds each residue x through a few frequencies k, as
// cos(2 pi k x / p) and sin(2 pi k x / p) (docs/head-metrics.md, "Progress
// measures for modular addition").
//
// Frequency 0 is the constant; frequencies 1 .. (p-1)/2 each have a cosine
// and a sine. Over x in [0, p) these p vectors (p odd) are orthogonal, so the
// squared norms of a matrix's components along them add up to its own.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace headlab::analysis {

// The highest frequency, (p-1)/2.
inline int64_t highest_frequency(int64_t p) { return (p - 1) / 2; }

// The norm of `rows` [p, d] (row x for the residue x, row-major) along each
// frequency: out[k] = the norm of its projection onto the unit vectors of
// frequency k (the constant for k = 0; cosine and sine together after).
// Throws std::invalid_argument for p < 3 or a size that is not p * d.
std::vector<double> frequency_norms(std::span<const double> rows, int64_t p, int64_t d);

// The `count` frequencies >= 1 of largest norm in `norms` (frequency_norms),
// largest first; ties go to the lower frequency.
std::vector<int64_t> key_frequencies(const std::vector<double>& norms, int64_t count);

// The share of the squared norm over all frequencies (the constant
// included) that the frequencies `keys` hold: 1 for a matrix built from
// them alone.
double key_share(const std::vector<double>& norms, const std::vector<int64_t>& keys);

}  // namespace headlab::analysis
