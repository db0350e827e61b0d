#include "analysis/circuits.h"

#include <cmath>

#include "core/eigenvalues.h"
#include "core/ops.h"

namespace headlab::analysis {
namespace {

using core::Tensor;

Tensor t(const Tensor& m) { return m.transpose(0, 1); }

// x W_Q^T W_K y^T / sqrt(d_k) for x [n, d], y [m, d].
Tensor qk_between(const HeadWeights& h, const Tensor& x, const Tensor& y) {
  const Tensor left = core::matmul(x, t(h.q)), right = core::matmul(y, t(h.k));  // [n, d_k], [m, d_k]
  return core::mul(core::matmul(left, t(right)), 1.0 / std::sqrt(static_cast<double>(h.q.size(0)))).contiguous();
}

}  // namespace

Tensor qk_token_circuit(const CircuitWeights& w, int64_t layer, int64_t head) {
  return qk_between(w.at(layer, head), w.embed, w.embed);
}

Tensor qk_position_circuit(const CircuitWeights& w, int64_t layer, int64_t head) {
  return qk_between(w.at(layer, head), w.pos, w.pos);
}

Tensor ov_circuit(const CircuitWeights& w, int64_t layer, int64_t head) {
  const HeadWeights& h = w.at(layer, head);
  const Tensor read = core::matmul(w.embed, t(h.v));             // [V, d_k]
  const Tensor write = core::matmul(t(h.o), t(w.unembed));       // [d_k, C]
  return core::matmul(read, write).contiguous();
}

std::optional<double> copying_score(const std::vector<std::complex<double>>& eigenvalues) {
  double positive = 0, total = 0;
  for (const std::complex<double>& e : eigenvalues) {
    positive += std::max(e.real(), 0.0);
    total += std::abs(e);
  }
  if (!(total > 0)) return std::nullopt;
  return positive / total;
}

std::optional<double> ov_copying_score(const CircuitWeights& w, int64_t layer, int64_t head) {
  if (w.embed.size(0) != w.unembed.size(0)) return std::nullopt;
  const HeadWeights& h = w.at(layer, head);
  const Tensor read = core::matmul(w.embed, t(h.v));        // [V, d_k]
  const Tensor write = core::matmul(t(h.o), t(w.unembed));  // [d_k, V]
  const Tensor small = core::matmul(write, read).contiguous();  // [d_k, d_k]
  return copying_score(core::eigenvalues(small.to_vector(), small.size(0)));
}

}  // namespace headlab::analysis
