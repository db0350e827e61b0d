// A head's QK and OV circuits as matrices over tokens (Elhage et al. 2021),
// its copying score, and what they are made of (analysis/circuit_weights.h).
//
// In the checkpoint's layouts (docs/model.md): W_E = tok_emb.weight [V, d],
// W_pos = pos_emb.weight [T_max, d], W_U = head.weight [C, d], and head h's
// W_Q,h, W_K,h, W_V,h [d_k, d] and W_O,h [d, d_k] (LayerNorm folded in):
//   QK        = W_E W_Q,h^T W_K,h W_E^T / sqrt(d_k)       [V, V]    query token x key token
//   QK_pos    = W_pos W_Q,h^T W_K,h W_pos^T / sqrt(d_k)   [T_max, T_max]
//   OV        = W_E W_V,h^T W_O,h^T W_U^T                 [V, C]    attended token x logit
// QK is the pre-softmax score a query token gives a key token through the
// direct path, positional terms kept apart in QK_pos (the cross terms token x
// position are left out); OV row t is what the head adds to the logits when
// it attends fully to token t.
#pragma once

#include <complex>
#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/circuit_weights.h"
#include "core/tensor.h"

namespace headlab::analysis {

core::Tensor qk_token_circuit(const CircuitWeights& w, int64_t layer, int64_t head);
core::Tensor qk_position_circuit(const CircuitWeights& w, int64_t layer, int64_t head);
core::Tensor ov_circuit(const CircuitWeights& w, int64_t layer, int64_t head);

// sum_i max(Re lambda_i, 0) / sum_i |lambda_i| over the eigenvalues of a
// square matrix, in [0, 1] (the share of positive eigenvalue mass, as Elhage
// et al. define it): 1 when every eigenvalue is positive (the head raises the
// logit of the token it attends to), 0 when none has a positive real part;
// absent when all are 0.
std::optional<double> copying_score(const std::vector<std::complex<double>>& eigenvalues);

// The copying score of the head's OV circuit, from the eigenvalues of the
// d_k x d_k matrix (W_O,h^T W_U^T)(W_E W_V,h^T): they are the nonzero
// eigenvalues of OV (AB and BA share them), and zero ones add nothing to
// either sum. Absent when OV is not square (classes != vocab), so that no
// token-to-same-token reading exists.
std::optional<double> ov_copying_score(const CircuitWeights& w, int64_t layer, int64_t head);

}  // namespace headlab::analysis
