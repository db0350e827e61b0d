#include "analysis/composition.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/ops.h"
#include "core/random.h"

namespace headlab::analysis {
namespace {

using core::Tensor;

Tensor t(const Tensor& m) { return m.transpose(0, 1); }

double trace_of_product(const Tensor& a, const Tensor& b) {  // tr(A B), both [k, k]
  return core::sum(core::mul(a, t(b))).item();
}

// A rank-k matrix as its factors, left [d, k] times right [k, d]: every norm
// below is computed from k x k Gram matrices, never from a d x d product.
struct Factored {
  Tensor left, right;
};

// ||L R||_F = sqrt(tr((L^T L)(R R^T))).
double norm(const Factored& m) {
  return std::sqrt(std::max(trace_of_product(core::matmul(t(m.left), m.left), core::matmul(m.right, t(m.right))), 0.0));
}

// ||A B||_F for A = La Ra, B = Lb Rb: with M = Ra Lb [k, k],
// ||La M Rb||^2 = tr(M^T (La^T La) M (Rb Rb^T)).
double norm_of_product(const Factored& a, const Factored& b) {
  const Tensor m = core::matmul(a.right, b.left);
  const Tensor left = core::matmul(core::matmul(t(m), core::matmul(t(a.left), a.left)), m);
  return std::sqrt(std::max(trace_of_product(left, core::matmul(b.right, t(b.right))), 0.0));
}

double ratio(const Factored& a, const Factored& b) {
  const double denominator = norm(a) * norm(b);
  return denominator > 0 ? norm_of_product(a, b) / denominator : 0.0;
}

Factored qk(const HeadWeights& h) { return {t(h.q), h.k}; }      // W_Q^T W_K
Factored qk_t(const HeadWeights& h) { return {t(h.k), h.q}; }    // (W_Q^T W_K)^T = W_K^T W_Q
Factored ov(const HeadWeights& h) { return {h.o, h.v}; }         // W_O W_V

}  // namespace

std::vector<Composition> composition_scores(const CircuitWeights& w) {
  std::vector<Composition> out;
  for (int64_t wl = 0; wl < w.num_layers; ++wl)
    for (int64_t wh = 0; wh < w.num_heads; ++wh) {
      const Factored written = ov(w.at(wl, wh));
      for (int64_t rl = wl + 1; rl < w.num_layers; ++rl)
        for (int64_t rh = 0; rh < w.num_heads; ++rh) {
          const HeadWeights& r = w.at(rl, rh);
          out.push_back({wl, wh, rl, rh, ratio(qk_t(r), written), ratio(qk(r), written), ratio(ov(r), written)});
        }
    }
  return out;
}

double composition_baseline(int64_t d_model, int64_t d_k, int64_t samples, uint64_t seed) {
  if (d_model < 1 || d_k < 1 || samples < 1)
    throw std::invalid_argument("composition_baseline: d_model " + std::to_string(d_model) + ", d_k " +
                                std::to_string(d_k) + " and samples " + std::to_string(samples) +
                                " must all be at least 1");
  core::Generator gen(seed);
  auto draw = [&] {
    return Factored{gen.normal({d_model, d_k}, 0.0, 1.0, core::DType::f64),
                    gen.normal({d_k, d_model}, 0.0, 1.0, core::DType::f64)};
  };
  double total = 0;
  for (int64_t s = 0; s < samples; ++s) {
    const Factored reader = draw(), writer = draw();
    total += ratio(reader, writer);
  }
  return total / static_cast<double>(samples);
}

}  // namespace headlab::analysis
