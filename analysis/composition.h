// Composition scores between heads (Elhage et al. 2021): how much of what a
// head of layer l writes a head of a later layer reads through its query (Q),
// key (K) or value (V), in the residual basis, Frobenius norms:
//   Q = ||W_QK^T W_OV|| / (||W_QK|| ||W_OV||)          W_QK = W_Q^T W_K (the reader's)
//   K = ||W_QK   W_OV|| / (||W_QK|| ||W_OV||)          W_OV = W_O W_V   (the writer's)
//   V = ||W_OV' W_OV||  / (||W_OV'|| ||W_OV||)         W_OV' the reader's
// Each ratio is in [0, 1]: 1 when the reader's matrix reads exactly the
// writer's output subspace (and their singular vectors line up), 0 when it
// reads only directions the writer never writes.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/circuit_records.h"
#include "analysis/circuit_weights.h"

namespace headlab::analysis {

// Every (writer, reader) pair with writer layer < reader layer, writers in
// layer-major order, then readers.
std::vector<Composition> composition_scores(const CircuitWeights& w);

// What a score means by chance: the mean composition score of independent
// Gaussian matrices of the same shapes (W_QK and W_OV both a [d_model, d_k]
// times a [d_k, d_model] factor; Q, K and V share the value, their three
// products having the same distribution), over `samples` draws from a
// generator seeded with `seed`.
double composition_baseline(int64_t d_model, int64_t d_k, int64_t samples = 200, uint64_t seed = 0);

}  // namespace headlab::analysis
