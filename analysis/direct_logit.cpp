#include "analysis/direct_logit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "layers/layer_norm.h"

namespace headlab::analysis {

std::vector<double> direct_logit_attribution(const layers::Transformer& model, const Examples& examples) {
  layers::Probe clean(model.num_layers());
  evaluate(model, examples, &clean);
  DirectLogitSums sums;
  sums.add(model, examples, clean);
  return sums.value();
}

void DirectLogitSums::add(const layers::Transformer& model, const Examples& examples, const layers::Probe& probe) {
  const int64_t L = model.num_layers(), H = model.spec().heads, D = model.spec().d_model, dk = D / H;
  const int64_t B = examples.batch, T = examples.seq_len;
  if (static_cast<int64_t>(probe.layers.size()) != L || !probe.layers.back().residual.defined() ||
      probe.layers.back().residual.size(0) != B || probe.layers.back().residual.size(1) != T)
    throw std::invalid_argument("direct logit attribution: the probe is not of a pass of the model over the " +
                                std::to_string(B) + " examples of " + std::to_string(T) + " tokens");
  const core::Tensor w_u = model.unembed().weight().value().to(core::DType::f64).contiguous();  // [C, D]
  const layers::LayerNorm* ln = model.final_norm();
  // The activations are read a row at a time as doubles (exact for float):
  // a float64 copy of each layer's was twice its bytes again.
  const core::Tensor resid = probe.layers.back().residual.contiguous();  // [B, T, D]
  std::vector<double> gamma(static_cast<std::size_t>(D), 1.0);
  if (ln != nullptr) gamma = ln->weight().value().to(core::DType::f64).to_vector();

  if (total_.empty()) total_.assign(static_cast<std::size_t>(L * H), 0.0);
  std::vector<double>& out = total_;
  int64_t& count = count_;
  std::vector<double> c(static_cast<std::size_t>(D)), resid_row(static_cast<std::size_t>(D)),
      output_row(static_cast<std::size_t>(D));
  // Row (b, t) of a [B, T, D] activation into `to`, as doubles.
  const auto row_of = [&](const core::Tensor& x, int64_t b, int64_t t, std::vector<double>& to) {
    core::dispatch(x.dtype(), [&](auto zero) {
      const auto* p = x.data<decltype(zero)>() + (b * T + t) * D;
      to.assign(p, p + D);
    });
    return to.data();
  };
  for (int64_t l = 0; l < L; ++l) {
    const core::Tensor o = probe.layers[static_cast<std::size_t>(l)].head_outputs.contiguous();
    const core::Tensor w_o = model.attention(l).o().weight().value().to(core::DType::f64).contiguous();  // [D, D]
    const double* pw = w_o.data<double>();
    const double* pu = w_u.data<double>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int32_t y = examples.targets[static_cast<std::size_t>(b * T + t)];
        if (y < 0) continue;
        if (l == 0) ++count;
        double sigma = 1;
        if (ln != nullptr) {
          const double* r = row_of(resid, b, t, resid_row);
          double mean = 0, var = 0;
          for (int64_t i = 0; i < D; ++i) mean += r[i];
          mean /= static_cast<double>(D);
          for (int64_t i = 0; i < D; ++i) var += (r[i] - mean) * (r[i] - mean);
          sigma = std::sqrt(var / static_cast<double>(D) + ln->options().eps);
        }
        const double* row = row_of(o, b, t, output_row);
        for (int64_t h = 0; h < H; ++h) {
          // c = W_O[:, head h's columns] o_h
          double mean = 0;
          for (int64_t i = 0; i < D; ++i) {
            double v = 0;
            for (int64_t k = h * dk; k < (h + 1) * dk; ++k) v += pw[i * D + k] * row[k];
            c[static_cast<std::size_t>(i)] = v;
            mean += v;
          }
          mean = ln != nullptr ? mean / static_cast<double>(D) : 0.0;
          double logit = 0;
          for (int64_t i = 0; i < D; ++i)
            logit += pu[y * D + i] * gamma[static_cast<std::size_t>(i)] * (c[static_cast<std::size_t>(i)] - mean) / sigma;
          out[static_cast<std::size_t>(l * H + h)] += logit;
        }
      }
  }
}

std::vector<double> DirectLogitSums::value() const {
  std::vector<double> out = total_;
  for (double& v : out) v /= static_cast<double>(std::max<int64_t>(count_, 1));
  return out;
}

}  // namespace headlab::analysis
